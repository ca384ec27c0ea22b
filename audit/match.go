package audit

// matcher finds which of many patterns occur in a text, in one pass over
// the text (Aho-Corasick): building it is linear in the patterns' total
// length, scanning linear in the text.
type matcher struct {
	// next maps (state<<8 | byte) to the next state of the trie.
	next map[uint64]int32
	fail []int32
	// out[s] lists the patterns ending at state s; dict[s] is the nearest
	// state on s's fail chain with a pattern, or -1.
	out  [][]int32
	dict []int32
	n    int
}

func newMatcher(patterns []string) *matcher {
	m := &matcher{next: map[uint64]int32{}, fail: []int32{0}, out: [][]int32{nil}, n: len(patterns)}
	for i, p := range patterns {
		s := int32(0)
		for j := 0; j < len(p); j++ {
			k := uint64(s)<<8 | uint64(p[j])
			t, ok := m.next[k]
			if !ok {
				t = int32(len(m.fail))
				m.fail = append(m.fail, 0)
				m.out = append(m.out, nil)
				m.next[k] = t
			}
			s = t
		}
		m.out[s] = append(m.out[s], int32(i))
	}
	// Breadth-first over the trie: children of each state, by byte.
	children := make([][]uint64, len(m.fail))
	for k, t := range m.next {
		children[k>>8] = append(children[k>>8], k&0xff|uint64(t)<<8)
	}
	m.dict = make([]int32, len(m.fail))
	m.dict[0] = -1
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, c := range children[s] {
			b, t := byte(c&0xff), int32(c>>8)
			if s != 0 {
				f := m.fail[s]
				for {
					if u, ok := m.next[uint64(f)<<8|uint64(b)]; ok {
						m.fail[t] = u
						break
					}
					if f == 0 {
						m.fail[t] = 0
						break
					}
					f = m.fail[f]
				}
			}
			if f := m.fail[t]; len(m.out[f]) > 0 {
				m.dict[t] = f
			} else {
				m.dict[t] = m.dict[f]
			}
			queue = append(queue, t)
		}
	}
	return m
}

// scan reports, per pattern, whether it occurs in text.
func (m *matcher) scan(text string) []bool {
	found := make([]bool, m.n)
	if m.n == 0 {
		return found
	}
	seen := make([]bool, len(m.fail)) // states whose outputs were reported
	s := int32(0)
	for i := 0; i < len(text); i++ {
		b := uint64(text[i])
		for {
			if t, ok := m.next[uint64(s)<<8|b]; ok {
				s = t
				break
			}
			if s == 0 {
				break
			}
			s = m.fail[s]
		}
		for o := s; o > 0 && !seen[o]; {
			seen[o] = true
			for _, p := range m.out[o] {
				found[p] = true
			}
			if d := m.dict[o]; d > 0 {
				o = d
			} else {
				break
			}
		}
	}
	return found
}
