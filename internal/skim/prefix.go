package skim

import "errors"

// Prefix is what PickPrefix reads from the first bytes of a message.
type Prefix struct {
	// Values holds, for each path of the set in the order compiled, the
	// raw value of its member when that value is complete within the
	// prefix (a sub-slice of it, as Pick returns), and nil otherwise: when
	// the member is absent from the prefix, or its value runs past the
	// prefix's end.
	Values [][]byte
	// Started reports, for each path, that its member's name (and the
	// colon after it) lies within the prefix, whether or not its value is
	// complete: a member whose value runs past the end is Started with a
	// nil value.
	Started []bool
	// Whole reports that the prefix holds a whole message: one JSON object
	// followed by nothing but whitespace. Values are then exactly Pick's.
	Whole bool
}

// errCut is the scanner's signal that the prefix ended inside a value.
var errCut = errors.New("skim: the prefix ended")

// PickPrefix reads the head of a message too long to read whole: prefix is
// its first bytes, cut anywhere. It validates the prefix as the beginning
// of one JSON object (with Pick's grammar and nesting limit) and returns
// the members of set that are complete within it.
//
// A member is complete when its value ends within the prefix: a string at
// its closing quote, an object or array at its closing bracket, a literal
// at its last letter, a number only once the byte after it is read (its
// digits could go on). For a message whose objects along the paths of set
// do not repeat a member name, each value PickPrefix reports is the one
// Pick reports for the whole message, however the message is cut. A
// prefix cannot see a repeat of a member that comes after its end, which
// on the wire would replace the value (the last one wins); ACP's peers
// never repeat a member.
//
// A prefix that cannot begin a JSON object is an error wrapping ErrSyntax
// (and ErrTooDeep when nested too deeply), or ErrNotObject when it begins
// another kind of JSON value. An empty or blank prefix is no error, and
// holds nothing. It is safe for concurrent use.
func PickPrefix(prefix []byte, set *Paths) (Prefix, error) {
	return pickPrefix(prefix, set, false)
}

// PickPrefixUnbounded is PickPrefix without the nesting limit, as
// JavaScript's JSON.parse has none: it reads the prefix as a [Picker] with
// Unbounded set reads a message (the values nested deeper than MaxDepth
// without recursion, in memory of a bit or two per level past MaxDepth),
// and never returns ErrTooDeep.
func PickPrefixUnbounded(head []byte, set *Paths) (Prefix, error) {
	return pickPrefix(head, set, true)
}

func pickPrefix(prefix []byte, set *Paths, unbounded bool) (Prefix, error) {
	s := prefixScanner{
		skimmer: skimmer{b: prefix, unbounded: unbounded},
		fold:    set.fold,
		pre:     Prefix{Values: make([][]byte, set.n), Started: make([]bool, set.n)},
	}
	err := s.top(set)
	if err == errCut {
		err = nil
	}
	if err != nil {
		return Prefix{}, err
	}
	return s.pre, nil
}

// prefixScanner is the skimmer for a prefix: it tells a value the prefix
// cut (errCut) from an invalid one (a syntaxError).
type prefixScanner struct {
	skimmer
	fold bool
	pre  Prefix
}

func (s *prefixScanner) top(set *Paths) error {
	s.ws()
	if s.i >= len(s.b) {
		return errCut
	}
	if s.b[s.i] != '{' {
		// Another kind of value, or not JSON at all?
		if err := s.value(); err != nil && err != errCut {
			return err
		}
		if err := s.trailing(); err != nil && err != errCut {
			return err
		}
		return ErrNotObject
	}
	if err := s.object(set.root); err != nil {
		return err
	}
	if err := s.trailing(); err != nil {
		return err
	}
	s.pre.Whole = true
	return nil
}

// trailing checks that only whitespace follows the value.
func (s *prefixScanner) trailing() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the value")
	}
	return nil
}

// value checks and skips one value, or reports that the prefix cut it.
func (s *prefixScanner) value() error {
	s.ws()
	if s.i >= len(s.b) {
		return errCut
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		return s.strCut()
	case c == 't':
		return s.litCut("true")
	case c == 'f':
		return s.litCut("false")
	case c == 'n':
		return s.litCut("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.numberCut()
	}
	return s.fail("unexpected character")
}

func (s *skimmer) litCut(w string) error {
	for k := 0; k < len(w); k++ {
		if s.i+k >= len(s.b) {
			s.i = len(s.b)
			return errCut
		}
		if s.b[s.i+k] != w[k] {
			return s.fail("bad literal")
		}
	}
	s.i += len(w)
	return nil
}

// numberCut checks and skips a number in a prefix. One that reaches the
// end of the prefix is cut: more digits may follow.
func (s *skimmer) numberCut() error {
	more := func() error {
		if s.i >= len(s.b) {
			return errCut
		}
		return nil
	}
	if s.b[s.i] == '-' {
		s.i++
		if err := more(); err != nil {
			return err
		}
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.fail("bad number")
	}
	if err := more(); err != nil {
		return err
	}
	if s.b[s.i] == '.' {
		s.i++
		n := s.digits()
		if err := more(); err != nil {
			return err
		}
		if n == 0 {
			return s.fail("bad fraction")
		}
	}
	if s.b[s.i] == 'e' || s.b[s.i] == 'E' {
		s.i++
		if err := more(); err != nil {
			return err
		}
		if s.b[s.i] == '+' || s.b[s.i] == '-' {
			s.i++
		}
		n := s.digits()
		if err := more(); err != nil {
			return err
		}
		if n == 0 {
			return s.fail("bad exponent")
		}
	}
	return nil
}

// strCut checks and skips a string in a prefix; s.b[s.i] is its opening
// quote.
func (s *skimmer) strCut() error {
	b := s.b
	for i := s.i + 1; i < len(b); {
		c := b[i]
		if strPlain[c] {
			i++
			continue
		}
		switch c {
		case '"':
			s.i = i + 1
			return nil
		case '\\':
			if i+1 >= len(b) {
				s.i = len(b)
				return errCut
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(b) {
						s.i = len(b)
						return errCut
					}
					if !isHex(b[k]) {
						s.i = i
						return s.fail("bad \\u escape")
					}
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
	return errCut
}

func (s *prefixScanner) array() error {
	if s.depth >= MaxDepth {
		if !s.unbounded {
			return s.tooDeep()
		}
		return s.skipDeep(true)
	}
	s.depth++
	s.i++
	s.ws()
	if s.i >= len(s.b) {
		return errCut
	}
	if s.b[s.i] == ']' {
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
			return errCut
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

// object checks and skips an object, s.b[s.i] being its '{', recording the
// members of the paths n holds (none when n is nil).
func (s *prefixScanner) object(n *pathNode) error {
	if s.depth >= MaxDepth {
		if !s.unbounded {
			return s.tooDeep()
		}
		if n == nil {
			return s.skipDeep(true)
		}
	}
	s.depth++
	s.i++
	s.ws()
	if s.i >= len(s.b) {
		return errCut
	}
	if s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	out, started := s.pre.Values, s.pre.Started
	for {
		s.ws()
		if s.i >= len(s.b) {
			return errCut
		}
		if s.b[s.i] != '"' {
			return s.fail("expected a member name")
		}
		k0 := s.i
		if err := s.strCut(); err != nil {
			return err
		}
		key := s.b[k0:s.i]
		s.ws()
		if s.i >= len(s.b) {
			return errCut
		}
		if s.b[s.i] != ':' {
			return s.fail("expected :")
		}
		s.i++
		var kid *pathKid
		if n != nil {
			kid = n.match(key, s.fold)
		}
		if kid != nil {
			// A repeated member replaces whatever an earlier one held,
			// below it and at it.
			for _, q := range kid.below {
				out[q], started[q] = nil, false
			}
			for _, q := range kid.leaves {
				out[q], started[q] = nil, true
			}
		}
		s.ws()
		v0 := s.i
		var err error
		if kid != nil && kid.node != nil && s.i < len(s.b) && s.b[s.i] == '{' {
			err = s.object(kid.node)
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
			return errCut
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
