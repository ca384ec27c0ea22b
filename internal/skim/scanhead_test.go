package skim

import "bytes"

// The kit's head scanner today (agentkit/internal/tap: scanHead and its
// helpers, copied unchanged): no validation, and it gives up (false) on
// escapes and non-ASCII keys. A baseline for BenchmarkHead only.

// head is what scanHead reads of a message's top-level members.
type head struct {
	method []byte // the raw (unescaped) method string, nil when absent
	id     bool   // an id member that is not null
}

// scanHead reads the top-level "method" and "id" members of a JSON object
// without decoding it, the way encoding/json would (keys match
// case-insensitively, the last duplicate wins). It reports false when msg
// is not an object it can read this way (an escape in a key or in the
// method, a non-ASCII key, a non-string method, malformed input), and the
// caller decodes it instead.
func scanHead(msg []byte) (h head, ok bool) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return h, false
	}
	i = skipSpace(msg, i+1)
	if i < len(msg) && msg[i] == '}' {
		return h, skipSpace(msg, i+1) == len(msg)
	}
	for {
		if i >= len(msg) || msg[i] != '"' {
			return h, false
		}
		j := i + 1
		for j < len(msg) && msg[j] != '"' {
			if c := msg[j]; c == '\\' || c >= 0x80 {
				return h, false
			}
			j++
		}
		if j >= len(msg) {
			return h, false
		}
		key := msg[i+1 : j]
		i = skipSpace(msg, j+1)
		if i >= len(msg) || msg[i] != ':' {
			return h, false
		}
		i = skipSpace(msg, i+1)
		end, ok := skipValue(msg, i)
		if !ok {
			return h, false
		}
		val := msg[i:end]
		switch {
		case asciiEqualFold(key, "method"):
			if val[0] != '"' || bytes.IndexByte(val, '\\') >= 0 {
				return h, false
			}
			h.method = val[1 : len(val)-1]
		case asciiEqualFold(key, "id"):
			h.id = string(val) != "null"
		}
		i = skipSpace(msg, end)
		if i >= len(msg) {
			return h, false
		}
		switch msg[i] {
		case ',':
			i = skipSpace(msg, i+1)
		case '}':
			return h, skipSpace(msg, i+1) == len(msg)
		default:
			return h, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i] ('"').
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(b), false
}

// skipValue returns the index after the value that starts at b[i]. It
// checks nesting and strings, not the full grammar: the caller only needs
// to find the members.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, ok := skipString(b, i)
				if !ok {
					return j, false
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	}
	j := i
	for j < len(b) {
		c := b[j]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		j++
	}
	return j, j > i
}

// asciiEqualFold compares a key with a lower-case ASCII name, ignoring
// ASCII case (keys with other bytes never reach it).
func asciiEqualFold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}
