package protocol

import (
	"bytes"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/acpcompact/acpcompact/internal/skim"
)

// Decoding a long compaction update.
//
// encoding/json, behind UnmarshalUpdate, copies each string of a
// content block twice on its way into a Go value: once as the block's raw
// member, once decoded. For a summary of tens of MiB those copies, on top
// of the line itself, are most of what the proxy holds at its peak. So a
// long update is decoded in two parts: the update with its long
// strings cut out (a few bytes, decoded as usual), and each long string
// once, straight from the line into the value that holds it.

const (
	// longUpdate is the size of update from which UnmarshalLongUpdate cuts out
	// the long strings; a shorter one is decoded as is.
	longUpdate = 256 << 10
	// longString is the length of string value that is cut out.
	longString = 16 << 10
	// holeMark begins the stand-in of a cut-out string: a NUL, which no
	// summary text carries, then the hole's number.
	holeMark = "\x00acpcompact-hole:"
)

// UnmarshalLongUpdate decodes a compaction update or summary chunk as
// UnmarshalUpdate does, with each long string value copied at most once
// (the proxy decodes summaries of tens of MiB so). own reports whether
// raw's memory is the caller's to keep (lines.Reader.Detach); then a long
// string that needs no unescaping is not copied at all, but made over
// raw's bytes, which nobody may write to again. own may be nil.
func UnmarshalLongUpdate(raw []byte, own func([]byte) bool) (any, error) {
	if len(raw) < longUpdate {
		return UnmarshalUpdate(raw)
	}
	holes := longStrings(raw)
	if len(holes) == 0 {
		return UnmarshalUpdate(raw)
	}
	// The update with each long string replaced by its stand-in.
	cut := make([]byte, 0, 64*len(holes)+len(raw)-holesLen(holes))
	last := 0
	for i, h := range holes {
		cut = append(cut, raw[last:h.start]...)
		cut = append(cut, `"\u0000acpcompact-hole:`...)
		cut = strconv.AppendInt(cut, int64(i), 10)
		cut = append(cut, '"')
		last = h.end
	}
	cut = append(cut, raw[last:]...)
	u, err := UnmarshalUpdate(cut)
	if err != nil {
		return nil, err
	}
	f := filler{raw: raw, holes: holes, own: own}
	switch u := u.(type) {
	case *CompactionUpdate:
		if blocks, ok := u.Summary.Get(); ok {
			for i := range blocks {
				f.block(&blocks[i])
			}
		}
		if e, ok := u.Error.Get(); ok {
			if s, ok := f.str(e); ok {
				u.Error = Set(s)
			}
		}
		if m, ok := u.Meta.Get(); ok {
			f.meta(m)
		}
	case *CompactionSummaryChunk:
		f.block(&u.Content)
		if m, ok := u.Meta.Get(); ok {
			f.meta(m)
		}
	}
	if f.bad || f.filled != len(holes) {
		// A stand-in landed where the filler does not look (or a string
		// did not decode): decode the whole, at the usual cost.
		return UnmarshalUpdate(raw)
	}
	return u, nil
}

// hole is a long string value of raw: raw[start:end] is the JSON string,
// quotes included.
type hole struct{ start, end int }

func holesLen(hs []hole) int {
	n := 0
	for _, h := range hs {
		n += h.end - h.start
	}
	return n
}

// longStrings finds the string values of raw (not member names) longer
// than longString. raw is taken to be valid JSON: UnmarshalUpdate
// checks the rest, and each long string is checked as it is decoded.
func longStrings(raw []byte) []hole {
	var out []hole
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		start := i
		for i++; i < len(raw) && raw[i] != '"'; i++ {
			if raw[i] == '\\' {
				i++
			}
		}
		if i >= len(raw) {
			return out // unterminated: the decoder reports it
		}
		end := i + 1
		if end-start-2 <= longString {
			continue
		}
		j := end
		for j < len(raw) && (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\n' || raw[j] == '\r') {
			j++
		}
		if j < len(raw) && raw[j] == ':' {
			continue // a member name
		}
		out = append(out, hole{start, end})
	}
	return out
}

// filler puts the long strings back into the decoded update.
type filler struct {
	raw    []byte
	holes  []hole
	own    func([]byte) bool
	filled int
	bad    bool
}

// index reads a stand-in's hole number.
func (f *filler) index(s string) (int, bool) {
	rest, ok := cutPrefix(s, holeMark)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= len(f.holes) {
		return 0, false
	}
	return i, true
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix):], true
}

// str decodes the long string s stands in for.
func (f *filler) str(s string) (string, bool) {
	i, ok := f.index(s)
	if !ok {
		return "", false
	}
	h := f.holes[i]
	lit := f.raw[h.start:h.end]
	if plainString(lit[1:len(lit)-1]) && f.own != nil && f.own(lit) {
		f.filled++
		inner := lit[1 : len(lit)-1]
		return unsafe.String(unsafe.SliceData(inner), len(inner)), true
	}
	v, ok := skim.String(lit)
	if !ok {
		f.bad = true
		return "", false
	}
	f.filled++
	return v, true
}

// plainString reports whether the inside of a JSON string decodes to
// itself: no escapes, no control characters, valid UTF-8 (skim.String's
// and encoding/json's rule).
func plainString(inner []byte) bool {
	for _, c := range inner {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(inner)
}

// rawValue returns the JSON a raw value stands for: the long string
// itself when the value is a stand-in, else the value with its stand-ins
// put back.
func (f *filler) rawValue(v []byte) []byte {
	if !bytes.Contains(v, []byte(`\u0000acpcompact-hole:`)) {
		return v
	}
	var out []byte
	for {
		k := bytes.Index(v, []byte(`"\u0000acpcompact-hole:`))
		if k < 0 {
			return append(out, v...)
		}
		e := bytes.IndexByte(v[k+1:], '"')
		if e < 0 {
			f.bad = true
			return v
		}
		lit := v[k : k+1+e+1]
		s, ok := skim.String(lit)
		i, ok2 := f.index(s)
		if !ok || !ok2 {
			f.bad = true
			return v
		}
		h := f.holes[i]
		out = append(append(out, v[:k]...), f.raw[h.start:h.end]...)
		f.filled++
		v = v[k+len(lit):]
	}
}

func (f *filler) block(b *ContentBlock) {
	if s, ok := f.str(b.Text); ok {
		b.Text = s
	}
	for k, v := range b.Extra {
		b.Extra[k] = f.rawValue(v)
	}
}

func (f *filler) meta(m Meta) {
	for k, v := range m {
		m[k] = f.rawValue(v)
	}
}
