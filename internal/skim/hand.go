package skim

// The hand-written skimmer, moved here from the proxy: a one-pass
// validating reader with encoding/json's grammar and nesting limit, which
// hands out sub-slices of the members asked for. Without the limit
// (unbounded), it reads the values nested deeper than MaxDepth with
// skipDeep, which does not recurse.

import "encoding/binary"

// lo8 and hi8 are the low and the high bit of each byte of a word: for a
// word v, (v-lo8*n)&^v&hi8 is not 0 exactly when a byte of v is below n
// (n <= 0x80), and so ((v^lo8*c)-lo8)&^v&hi8 when a byte of v is c (c < 0x80).
const lo8, hi8 = 0x0101010101010101, 0x8080808080808080

// strPlain marks the bytes that need no attention inside a string.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

type skimmer struct {
	b         []byte
	i         int
	depth     int
	unbounded bool // no nesting limit: skipDeep reads past MaxDepth
}

func (s *skimmer) fail(msg string) error { return &syntaxError{off: int64(s.i), msg: msg} }

func (s *skimmer) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value checks and skips one value.
func (s *skimmer) value() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.pickObject(nil, nil, false)
	case c == '[':
		return s.array()
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.fail("unexpected character")
}

func (s *skimmer) lit(w string) error {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return s.fail("bad literal")
	}
	s.i += len(w)
	return nil
}

func (s *skimmer) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *skimmer) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.fail("bad number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.fail("bad fraction")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail("bad exponent")
		}
	}
	return nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// str checks and skips a string; s.b[s.i] is its opening quote.
func (s *skimmer) str() error {
	s.i++
	b := s.b
	for i := s.i; i < len(b); {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character: the long texts of a line are mostly such runs.
		for i+8 <= len(b) {
			v := binary.LittleEndian.Uint64(b[i:])
			ctl, quote, bslash := v-lo8*0x20, (v^lo8*'"')-lo8, (v^lo8*'\\')-lo8
			if (ctl|quote|bslash)&^v&hi8 != 0 {
				break
			}
			i += 8
		}
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; c {
		case '"':
			s.i = i + 1
			return nil
		case '\\':
			if i+1 >= len(b) {
				s.i = i
				return s.fail("unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.i = i
					return s.fail("bad \\u escape")
				}
				i += 6
			default:
				s.i = i
				return s.fail("bad escape")
			}
		default:
			s.i = i
			return s.fail("control character in string")
		}
	}
	s.i = len(b)
	return s.fail("unterminated string")
}

// tooDeep is the error for the array or object at s.i, nested deeper than
// MaxDepth.
func (s *skimmer) tooDeep() error {
	return &syntaxError{off: int64(s.i), msg: "exceeded max depth", deep: true}
}

func (s *skimmer) array() error {
	if s.depth >= MaxDepth {
		if !s.unbounded {
			return s.tooDeep()
		}
		return s.skipDeep(false)
	}
	s.depth++
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected , or ]")
		}
	}
}

// pickObject checks and skips an object, s.b[s.i] being its '{', and
// stores in out the values of the paths that n holds (none when n is nil).
func (s *skimmer) pickObject(out [][]byte, n *pathNode, fold bool) error {
	if s.depth >= MaxDepth {
		if !s.unbounded {
			return s.tooDeep()
		}
		if n == nil {
			return s.skipDeep(false)
		}
		// A path deeper than MaxDepth: the recursion is the path's.
	}
	s.depth++
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a member name")
		}
		k0 := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[k0:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected :")
		}
		s.i++
		s.ws()
		v0 := s.i
		var kid *pathKid
		if n != nil {
			kid = n.match(key, fold)
		}
		var err error
		if kid != nil && kid.node != nil {
			// A repeated member replaces whatever an earlier one held
			// below it.
			for _, q := range kid.below {
				out[q] = nil
			}
			if s.i < len(s.b) && s.b[s.i] == '{' {
				err = s.pickObject(out, kid.node, fold)
			} else {
				err = s.value()
			}
		} else {
			err = s.value()
		}
		if err != nil {
			return err
		}
		if kid != nil {
			for _, q := range kid.leaves {
				out[q] = s.b[v0:s.i]
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected , or }")
		}
	}
}

// pickInto is Pick with the hand-written skimmer, into out (len set.n,
// cleared).
func (s *skimmer) pickInto(out [][]byte, set *Paths) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		// Valid JSON of another kind, or not JSON at all?
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.i != len(s.b) {
			return s.fail("data after the value")
		}
		return ErrNotObject
	}
	if err := s.pickObject(out, set.root, set.fold); err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the value")
	}
	return nil
}

// skipDeep checks and skips the array or object at s.i, with the grammar
// of value, without recursion and so without a nesting limit: it keeps the
// kind of each level it has open as one bit (set for an object), so that n
// levels take n/8 bytes (nothing up to 256 levels; the bits are allocated
// doubling, so n/4 bytes in all). With cut, the input is the prefix of a
// message, and its end is errCut (as for the prefixScanner), not a syntax
// error.
func (s *skimmer) skipDeep(cut bool) error {
	const (
		value  = iota // a value begins
		member        // a member begins: its name, a colon
		after         // a value ended
	)
	var small [4]uint64
	objects := small[:] // bit l: level l is an object
	open := 0           // the levels open
	state := value
	for {
		if state == after && open == 0 {
			return nil
		}
		s.ws()
		if s.i >= len(s.b) {
			if cut {
				return errCut
			}
			return s.fail("unexpected end")
		}
		c := s.b[s.i]
		switch state {
		case value:
			var err error
			switch {
			case c == '[' || c == '{':
				for {
					w, bit := open>>6, uint64(1)<<(open&63)
					if w == len(objects) {
						grown := make([]uint64, 2*len(objects))
						copy(grown, objects)
						objects = grown
					}
					open++
					s.i++
					if c == '{' {
						objects[w] |= bit
						state = member
						break
					}
					objects[w] &^= bit
					// A run of '[', the bulk of a deep value.
					if s.i >= len(s.b) || s.b[s.i] != '[' {
						break
					}
				}
				s.ws()
				if s.i < len(s.b) && s.b[s.i] == c+2 { // ']' is '['+2, '}' is '{'+2
					s.i++
					open--
					state = after
				}
				continue
			case c == '"':
				if cut {
					err = s.strCut()
				} else {
					err = s.str()
				}
			case c == 't' || c == 'f' || c == 'n':
				w := "true"
				if c == 'f' {
					w = "false"
				} else if c == 'n' {
					w = "null"
				}
				if cut {
					err = s.litCut(w)
				} else {
					err = s.lit(w)
				}
			case c == '-' || (c >= '0' && c <= '9'):
				if cut {
					err = s.numberCut()
				} else {
					err = s.number()
				}
			default:
				return s.fail("unexpected character")
			}
			if err != nil {
				return err
			}
			state = after
		case member:
			if c != '"' {
				return s.fail("expected a member name")
			}
			var err error
			if cut {
				err = s.strCut()
			} else {
				err = s.str()
			}
			if err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) {
				continue // the end, reported above
			}
			if s.b[s.i] != ':' {
				return s.fail("expected :")
			}
			s.i++
			state = value
		case after:
			l := open - 1
			object := objects[l>>6]>>(l&63)&1 != 0
			switch {
			case c == ',':
				s.i++
				state = value
				if object {
					state = member
				}
			case c == '}' && object || c == ']' && !object:
				s.i++
				open--
				// A run of ']' closing arrays.
				for open > 0 && s.i < len(s.b) && s.b[s.i] == ']' && objects[(open-1)>>6]>>((open-1)&63)&1 == 0 {
					s.i++
					open--
				}
			case object:
				return s.fail("expected , or }")
			default:
				return s.fail("expected , or ]")
			}
		}
	}
}

// handPicker is the Picker of the hand-written skimmer; unbounded lifts
// the nesting limit (Picker.Unbounded).
type handPicker struct {
	out       [][]byte
	unbounded bool
}

func (p *handPicker) pick(msg []byte, set *Paths) ([][]byte, error) {
	if cap(p.out) < set.n {
		p.out = make([][]byte, set.n)
	}
	p.out = p.out[:set.n]
	clear(p.out)
	s := skimmer{b: msg, unbounded: p.unbounded}
	if err := s.pickInto(p.out, set); err != nil {
		return nil, err
	}
	return p.out, nil
}

// readHeadHand is ReadHead with the skimmer.
func readHeadHand(msg []byte) (Head, error) {
	var out [2][]byte
	s := skimmer{b: msg}
	if err := s.pickInto(out[:], headSet); err != nil {
		return Head{}, err
	}
	return headOf(&out), nil
}
