package conformance

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsID is an ID (a sessionId, compactionId, toolCallId) as a JavaScript
// client holds it, so that two IDs are one exactly when they are one to
// the client: the official TypeScript SDK decodes each line with
// TextDecoder (UTF-8, invalid bytes replaced by U+FFFD per maximal
// subpart, WHATWG) and parses it with JSON.parse, which keeps a string's
// UTF-16 code units as escaped, lone surrogates included; a client then
// keys its entities by the string (===, Map). encoding/json differs on
// both: it turns every lone surrogate escape into U+FFFD ("\ud800" and
// "\udc00" become one string) and replaces invalid UTF-8 byte by byte
// ("\xe2\x82" is two U+FFFD to Go, one to TextDecoder). A checker keyed
// by Go's strings would take two compactions for one, or one for two.
//
// The value is the code units in WTF-8 (UTF-8, with a lone surrogate
// written as the three bytes its code point would take): one-to-one with
// the code unit sequence, and the plain UTF-8 string for every ID without
// lone surrogates. Printed with %q it shows a lone surrogate as its
// escape, "\ud800".
//
// This is written here, not shared with the proxy or the engine: the
// checker is the independent oracle (see the package doc).
type jsID string

// jsStr returns a member that is a JSON string, as a JavaScript client
// holds it (jsID).
func (o object) jsStr(key string) (jsID, bool) {
	raw, ok := o[key]
	if !ok {
		return "", false
	}
	return jsString(raw)
}

// jsString decodes raw, a JSON value as the wire carried it, the way
// JSON.parse(new TextDecoder().decode(bytes)) does, if it is a string.
func jsString(raw []byte) (jsID, bool) {
	units, ok := jsUnits(raw)
	if !ok {
		return "", false
	}
	return jsID(wtf8(units)), true
}

// jsUnits returns the UTF-16 code units JSON.parse makes of raw, decoded
// by TextDecoder, if it is a JSON string.
func jsUnits(raw []byte) ([]uint16, bool) {
	cps := whatwgUTF8(bytes.Trim(raw, " \t\n\r")) // JSON's whitespace
	if len(cps) < 2 || cps[0] != '"' || cps[len(cps)-1] != '"' {
		return nil, false
	}
	body := cps[1 : len(cps)-1]
	units := make([]uint16, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"' || c < 0x20:
			return nil, false // JSON.parse throws
		case c != '\\':
			units = utf16.AppendRune(units, c)
			continue
		}
		i++
		if i == len(body) {
			return nil, false
		}
		switch body[i] {
		case '"', '\\', '/':
			units = append(units, uint16(body[i]))
		case 'b':
			units = append(units, '\b')
		case 'f':
			units = append(units, '\f')
		case 'n':
			units = append(units, '\n')
		case 'r':
			units = append(units, '\r')
		case 't':
			units = append(units, '\t')
		case 'u':
			if i+4 >= len(body) {
				return nil, false
			}
			u, err := strconv.ParseUint(string(body[i+1:i+5]), 16, 16)
			if err != nil {
				return nil, false
			}
			units = append(units, uint16(u))
			i += 4
		default:
			return nil, false
		}
	}
	return units, true
}

// whatwgUTF8 decodes b as the WHATWG Encoding Standard's UTF-8 decoder
// does (TextDecoder, fatal false): each maximal subpart of an invalid
// sequence becomes one U+FFFD. (Go's utf8.DecodeRune gives one per
// byte: "\xe2\x82" is one U+FFFD to the one and two to the other.)
func whatwgUTF8(b []byte) []rune {
	out := make([]rune, 0, len(b))
	var (
		cp           rune
		seen, needed int
		lower, upper byte = 0x80, 0xbf
	)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if needed == 0 {
			switch {
			case c <= 0x7f:
				out = append(out, rune(c))
			case 0xc2 <= c && c <= 0xdf:
				needed, cp = 1, rune(c&0x1f)
			case 0xe0 <= c && c <= 0xef:
				needed, cp = 2, rune(c&0x0f)
			case 0xf0 <= c && c <= 0xf4:
				needed, cp = 3, rune(c&0x07)
			default:
				out = append(out, utf8.RuneError)
			}
			lower, upper = secondByte(c)
			continue
		}
		if c < lower || c > upper {
			// The sequence ends short: one U+FFFD for it, and this byte
			// starts afresh.
			cp, seen, needed, lower, upper = 0, 0, 0, 0x80, 0xbf
			out = append(out, utf8.RuneError)
			i--
			continue
		}
		lower, upper = 0x80, 0xbf
		cp = cp<<6 | rune(c&0x3f)
		if seen++; seen == needed {
			out = append(out, cp)
			cp, seen, needed = 0, 0, 0
		}
	}
	if needed != 0 {
		out = append(out, utf8.RuneError)
	}
	return out
}

// secondByte is the range of the byte that follows lead byte c: narrower
// after E0, ED, F0 and F4, so that no overlong form, surrogate or code
// point past U+10FFFF decodes (Unicode's table of well-formed UTF-8 byte
// sequences; the WHATWG decoder's lower and upper boundaries).
func secondByte(c byte) (lower, upper byte) {
	switch c {
	case 0xe0:
		return 0xa0, 0xbf
	case 0xed:
		return 0x80, 0x9f
	case 0xf0:
		return 0x90, 0xbf
	case 0xf4:
		return 0x80, 0x8f
	}
	return 0x80, 0xbf
}

// wtf8 writes UTF-16 code units as WTF-8: a surrogate pair as its code
// point, a lone surrogate as the three bytes of its own code point.
func wtf8(units []uint16) string {
	b := make([]byte, 0, len(units))
	for i := 0; i < len(units); i++ {
		u := rune(units[i])
		if utf16.IsSurrogate(u) && u < 0xdc00 && i+1 < len(units) {
			if r := utf16.DecodeRune(u, rune(units[i+1])); r != utf8.RuneError {
				b = utf8.AppendRune(b, r)
				i++
				continue
			}
		}
		if utf16.IsSurrogate(u) {
			b = append(b, 0xe0|byte(u>>12), 0x80|byte(u>>6)&0x3f, 0x80|byte(u)&0x3f)
			continue
		}
		b = utf8.AppendRune(b, u)
	}
	return string(b)
}

// Format prints the ID: %q quotes it as Go does, except that a lone
// surrogate shows as its JSON escape (\ud800) rather than as three bytes
// that are not UTF-8; %s and %v print it as it is.
func (id jsID) Format(f fmt.State, verb rune) {
	if verb != 'q' {
		fmt.Fprint(f, string(id))
		return
	}
	s := string(id)
	b := []byte{'"'}
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n == 1 && len(s) >= 3 && s[0] == 0xed && s[1] >= 0xa0 && s[1] <= 0xbf && s[2] >= 0x80 && s[2] <= 0xbf {
			u := rune(s[0]&0x0f)<<12 | rune(s[1]&0x3f)<<6 | rune(s[2]&0x3f)
			b = fmt.Appendf(b, `\u%04x`, u)
			s = s[3:]
			continue
		}
		q := strconv.Quote(s[:n])
		b = append(b, q[1:len(q)-1]...)
		s = s[n:]
	}
	f.Write(append(b, '"'))
}
