package skim

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// Exact reports whether raw, a JSON string such as a value Pick returned,
// decodes to the same characters in every reader: its bytes are valid
// UTF-8 and it holds no unpaired surrogate escape. Go (String) decodes an
// unpaired surrogate and each invalid byte to U+FFFD, so two such strings
// that differ can decode to one; JavaScript's JSON.parse keeps the
// unpaired surrogate as a code unit of its own, and TextDecoder replaces
// invalid bytes by maximal subparts, so it can keep them apart. A host
// that compares identifiers as its peers do (a compaction's ID, a
// session's) cannot read such a string as one identifier. It is safe for
// concurrent use.
func Exact(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; ; {
		k := bytes.IndexByte(raw[i:], '\\')
		if k < 0 {
			return true
		}
		i += k
		if i+1 >= len(raw) {
			return true
		}
		if raw[i+1] != 'u' {
			i += 2
			continue
		}
		r, ok := hexRune(raw[i+2:])
		if !ok {
			return true // not an escape of this kind: the reader refuses the string
		}
		i += 6
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return false // a trail surrogate without its lead
		case r >= 0xd800 && r <= 0xdbff:
			if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
				return false
			}
			r2, ok := hexRune(raw[i+2:])
			if !ok || utf16.DecodeRune(r, r2) == utf8.RuneError {
				return false
			}
			i += 6
		}
	}
}

// hexRune reads the four hex digits of a \u escape.
func hexRune(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Rune decodes the first character of b, the inside of a JSON string, and
// its length in b; 0 at the string's closing quote (or a malformed escape).
// An unpaired surrogate and invalid UTF-8 decode to U+FFFD, as
// encoding/json (and String) decode them. It lets a reader decode no more
// of a long string than it needs.
func Rune(b []byte) (rune, int) {
	switch {
	case len(b) == 0 || b[0] == '"':
		return 0, 0
	case b[0] != '\\':
		return utf8.DecodeRune(b)
	case len(b) < 2:
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hexRune(b[2:])
		if !ok {
			return 0, 0
		}
		if utf16.IsSurrogate(r) {
			if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
				if r2, ok := hexRune(b[8:]); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						return d, 12
					}
				}
			}
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return 0, 0
}
