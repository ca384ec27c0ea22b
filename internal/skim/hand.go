package skim

// The hand-written skimmer, moved here from the proxy: a one-pass
// validating reader with encoding/json's grammar and nesting limit, which
// hands out sub-slices of the members asked for. Without the limit
// (unbounded), it reads the values nested deeper than MaxDepth with
// skipDeep, which does not recurse. In the partial mode (PickPrefix) the
// input is the prefix of a message: the grammar is the same, and only the
// branches where the input runs out answer differently (errCut, not a
// syntax error), so that Pick's path pays nothing for the mode.

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
	// partial: b is the prefix of a message, cut anywhere, and its end
	// inside a value is errCut rather than invalid input.
	partial bool
	// started is Prefix.Started in the partial mode; pickObject marks in
	// it the members whose value the prefix cut (pickPrefix adds those
	// whose value is complete).
	started []bool
}

func (s *skimmer) fail(msg string) error { return &syntaxError{off: int64(s.i), msg: msg} }

// end is the error for the input ending where more was expected (msg
// says what): in the partial mode, the prefix was cut there.
func (s *skimmer) end(msg string) error {
	if s.partial {
		return errCut
	}
	return s.fail(msg)
}

// bad is the error for the byte at s.i, which is not what msg says was
// expected, or for the end of the input there (see end).
func (s *skimmer) bad(msg string) error {
	if s.i >= len(s.b) {
		return s.end(msg)
	}
	return s.fail(msg)
}

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
		return s.end("unexpected end")
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

// lit checks and skips the literal w. The partial mode's check is written
// out here, not called, so that lit stays small enough for value to inline
// it with w a constant: the comparison is then a load, not a call.
func (s *skimmer) lit(w string) error {
	rest := s.b[s.i:]
	if len(rest) >= len(w) && string(rest[:len(w)]) == w {
		s.i += len(w)
		return nil
	}
	if s.partial && len(rest) < len(w) && string(rest) == w[:len(rest)] {
		return errCut // the prefix ends inside w
	}
	return s.fail("bad literal")
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
		return s.bad("bad number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.bad("bad fraction")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.bad("bad exponent")
		}
	}
	if s.i >= len(s.b) && s.partial {
		// Its digits may go on past the cut: a number is complete only
		// once the byte after it is read.
		return errCut
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
				return s.end("unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.i = i
					return s.badU()
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
	return s.end("unterminated string")
}

// badU is the error for the \u escape at s.i, which has no four hex
// digits: none in the partial mode when the prefix ends inside it.
func (s *skimmer) badU() error {
	if s.partial {
		rest := s.b[s.i+2:]
		cut := len(rest) < 4
		for _, c := range rest {
			cut = cut && isHex(c)
		}
		if cut {
			return errCut
		}
	}
	return s.fail("bad \\u escape")
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
		return s.skipDeep(s.partial)
	}
	if s.open(']') {
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.end("unterminated array")
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

// open enters the array or object at s.i, and reports whether it is
// empty: then close (its closing bracket) followed, and it is left again.
// Small enough to be inlined into array and pickObject.
func (s *skimmer) open(close byte) (empty bool) {
	s.depth++
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		s.depth--
		return true
	}
	return false
}

// pickObject checks and skips an object, s.b[s.i] being its '{', and
// stores in out the values of the paths that n holds (none when n is nil).
func (s *skimmer) pickObject(out [][]byte, n *pathNode, fold bool) error {
	if s.depth >= MaxDepth {
		if !s.unbounded {
			return s.tooDeep()
		}
		if n == nil {
			return s.skipDeep(s.partial)
		}
		// A path deeper than MaxDepth: the recursion is the path's.
	}
	if s.open('}') {
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.bad("expected a member name")
		}
		k0 := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[k0:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.bad("expected :")
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
			if _, cut := err.(cutError); cut && kid != nil {
				return s.cutIn(out, kid)
			}
			return err
		}
		if kid != nil {
			for _, q := range kid.leaves {
				out[q] = s.b[v0:s.i]
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.end("unterminated object")
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

// cutIn is errCut for the value of kid's member, which the prefix ended
// inside: the paths that end at the member are started, and an earlier
// member's value, which this one replaces, is gone. It returns errCut
// rather than have pickObject keep err, which would cost every level of
// its recursion a bigger frame.
func (s *skimmer) cutIn(out [][]byte, kid *pathKid) error {
	for _, q := range kid.leaves {
		out[q], s.started[q] = nil, true
	}
	return errCut
}

// pickInto is Pick with the hand-written skimmer, into out (len set.n,
// cleared). In the partial mode it is errCut when the prefix ends inside
// the object, nil when the prefix holds it whole.
func (s *skimmer) pickInto(out [][]byte, set *Paths) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		// Valid JSON of another kind, or not JSON at all?
		blank := s.i >= len(s.b)
		if err := s.value(); err == errCut && !blank {
			return ErrNotObject // the prefix of another kind of value
		} else if err != nil {
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
// doubling, so n/4 bytes in all). cut sets the partial mode (the scanner
// passes its own; the tests drive skipDeep alone).
func (s *skimmer) skipDeep(cut bool) error {
	s.partial = cut
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
			return s.end("unexpected end")
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
				err = s.str()
			case c == 't' || c == 'f' || c == 'n':
				w := "true"
				if c == 'f' {
					w = "false"
				} else if c == 'n' {
					w = "null"
				}
				err = s.lit(w)
			case c == '-' || (c >= '0' && c <= '9'):
				err = s.number()
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
			if err := s.str(); err != nil {
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
