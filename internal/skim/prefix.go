package skim

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

// errCut is the skimmer's signal, in the partial mode, that the prefix
// ended inside a value. It has a type of its own so that pickObject tells
// it with a type check: comparing two errors is a call, which would make
// every level of its recursion take a bigger frame.
var errCut error = cutError{}

type cutError struct{}

func (cutError) Error() string { return "skim: the prefix ended" }

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

// pickPrefix is Pick's skimmer in the partial mode.
func pickPrefix(prefix []byte, set *Paths, unbounded bool) (Prefix, error) {
	pre := Prefix{Values: make([][]byte, set.n), Started: make([]bool, set.n)}
	s := skimmer{b: prefix, unbounded: unbounded, partial: true, started: pre.Started}
	switch err := s.pickInto(pre.Values, set); err {
	case nil:
		pre.Whole = true
	case errCut:
	default:
		return Prefix{}, err
	}
	// The skimmer marked the members the prefix cut; a complete one is
	// started too.
	for q, v := range pre.Values {
		if v != nil {
			pre.Started[q] = true
		}
	}
	return pre, nil
}
