package audit

// index answers "is p a substring of the text?" in time linear in p: a
// suffix automaton of the summary, built in time and memory linear in the
// summary. The summary is the small side of an audit (the history is the
// large one), so the history's normal forms are looked up in it rather than
// the other way round.
type index struct {
	st []samState
}

type samState struct {
	len, link int32
	edges     []samEdge
}

type samEdge struct {
	c  byte
	to int32
}

func (s *samState) get(c byte) (int32, bool) {
	for _, e := range s.edges {
		if e.c == c {
			return e.to, true
		}
	}
	return 0, false
}

func (s *samState) set(c byte, to int32) {
	for i := range s.edges {
		if s.edges[i].c == c {
			s.edges[i].to = to
			return
		}
	}
	s.edges = append(s.edges, samEdge{c, to})
}

func newIndex(text string) *index {
	x := &index{st: make([]samState, 1, 2*len(text)+1)}
	x.st[0].link = -1
	last := int32(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		cur := int32(len(x.st))
		x.st = append(x.st, samState{len: x.st[last].len + 1})
		p := last
		for p != -1 {
			if _, ok := x.st[p].get(c); ok {
				break
			}
			x.st[p].set(c, cur)
			p = x.st[p].link
		}
		if p == -1 {
			x.st[cur].link = 0
		} else {
			q, _ := x.st[p].get(c)
			if x.st[p].len+1 == x.st[q].len {
				x.st[cur].link = q
			} else {
				clone := int32(len(x.st))
				x.st = append(x.st, samState{len: x.st[p].len + 1, link: x.st[q].link,
					edges: append([]samEdge(nil), x.st[q].edges...)})
				for p != -1 {
					if t, ok := x.st[p].get(c); !ok || t != q {
						break
					}
					x.st[p].set(c, clone)
					p = x.st[p].link
				}
				x.st[q].link = clone
				x.st[cur].link = clone
			}
		}
		last = cur
	}
	return x
}

// contains reports whether p occurs in the text.
func (x *index) contains(p string) bool {
	s := int32(0)
	for i := 0; i < len(p); i++ {
		t, ok := x.st[s].get(p[i])
		if !ok {
			return false
		}
		s = t
	}
	return true
}
