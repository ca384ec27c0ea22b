package skim

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The reader built on jsontext (github.com/go-json-experiment/json, the
// upstream of encoding/json/v2), kept as the benchmarks' and the fuzz
// test's second implementation: it lost to the hand-written skimmer (see
// README.md), which costs the proxy and the kit less per message. Its
// streaming Decoder reads a *bytes.Buffer in place, and the values it
// returns are sub-slices of the message.

// textOptions make jsontext accept what encoding/json.Valid accepts: it
// refuses duplicate names and invalid UTF-8 by default. Its nesting limit
// is fixed at encoding/json's 10000 (WithDepthLimit is not implemented
// yet, go.dev/issue/56733).
var textOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// textReader is a jsontext.Decoder on one message.
type textReader struct {
	buf bytes.Buffer
	dec jsontext.Decoder
	msg []byte
}

func (r *textReader) reset(msg []byte) {
	r.msg = msg
	r.buf = *bytes.NewBuffer(msg)
	r.dec.Reset(&r.buf, textOptions...)
}

// done forgets the message, so a pooled reader does not keep it alive.
func (r *textReader) done() {
	r.msg = nil
	r.buf = bytes.Buffer{}
	r.dec.Reset(&r.buf, textOptions...)
}

// textError turns a jsontext error into this package's.
func textError(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		msg := se.Err.Error()
		// jsontext's depth error is not exported; its text is all there is.
		return &syntaxError{off: se.ByteOffset, msg: msg, deep: strings.Contains(msg, "exceeded max depth")}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &syntaxError{msg: "unexpected end"}
	}
	return &syntaxError{msg: err.Error()}
}

func (r *textReader) pickInto(out [][]byte, set *Paths) error {
	d := &r.dec
	if d.PeekKind() != '{' {
		// Valid JSON of another kind, or not JSON at all?
		if _, err := d.ReadValue(); err != nil {
			return textError(err)
		}
		if err := r.end(); err != nil {
			return err
		}
		return ErrNotObject
	}
	if _, err := d.ReadToken(); err != nil {
		return textError(err)
	}
	if err := r.object(out, set.root, set.fold); err != nil {
		return err
	}
	return r.end()
}

// end checks that nothing but whitespace follows the value.
func (r *textReader) end() error {
	switch _, err := r.dec.ReadValue(); err {
	case io.EOF:
		return nil
	case nil:
		return &syntaxError{off: r.dec.InputOffset(), msg: "data after the value"}
	default:
		return textError(err)
	}
}

// object reads the members of an object whose '{' was read, storing in out
// the values of the paths n holds, and its '}'.
func (r *textReader) object(out [][]byte, n *pathNode, fold bool) error {
	d := &r.dec
	for {
		if d.PeekKind() == '}' {
			if _, err := d.ReadToken(); err != nil {
				return textError(err)
			}
			return nil
		}
		key, err := d.ReadValue() // the member's name, or a syntax error
		if err != nil {
			return textError(err)
		}
		kid := n.match(key, fold)
		if kid == nil {
			if _, err := d.ReadValue(); err != nil {
				return textError(err)
			}
			continue
		}
		var v []byte
		if kid.node != nil {
			// A repeated member replaces whatever an earlier one held
			// below it.
			for _, q := range kid.below {
				out[q] = nil
			}
		}
		if kid.node != nil && d.PeekKind() == '{' {
			if _, err := d.ReadToken(); err != nil {
				return textError(err)
			}
			v0 := d.InputOffset() - 1
			if err := r.object(out, kid.node, fold); err != nil {
				return err
			}
			v = r.msg[v0:d.InputOffset()]
		} else if v, err = d.ReadValue(); err != nil {
			return textError(err)
		}
		for _, q := range kid.leaves {
			out[q] = v
		}
	}
}

// textPicker is the Picker of the jsontext reader.
type textPicker struct {
	out [][]byte
	r   textReader
}

func (p *textPicker) pick(msg []byte, set *Paths) ([][]byte, error) {
	if cap(p.out) < set.n {
		p.out = make([][]byte, set.n)
	}
	p.out = p.out[:set.n]
	clear(p.out)
	// The reader keeps msg until the next pick, as p.out does.
	p.r.reset(msg)
	if err := p.r.pickInto(p.out, set); err != nil {
		return nil, err
	}
	return p.out, nil
}

var textReaders = sync.Pool{New: func() any { return new(textReader) }}

// readHeadText is ReadHead with jsontext.
func readHeadText(msg []byte) (Head, error) {
	var out [2][]byte
	r := textReaders.Get().(*textReader)
	r.reset(msg)
	err := r.pickInto(out[:], headSet)
	r.done()
	textReaders.Put(r)
	if err != nil {
		return Head{}, err
	}
	return headOf(&out), nil
}
