package conformance

import "io"

// NewScannerLimit lets tests probe the line-length boundary without
// allocating MaxLineBytes, which costs seconds under -race.
func NewScannerLimit(r io.Reader, limit int) *Scanner {
	s := NewScanner(r)
	s.max = limit
	return s
}

// IDKey exposes the request id comparison.
var IDKey = idKey

// JSUnits exposes the UTF-16 code units JSON.parse (after TextDecoder)
// makes of a raw JSON string; JSKey the key the checker compares IDs by.
var JSUnits = jsUnits

func JSKey(raw []byte) (string, bool) {
	id, ok := jsString(raw)
	return string(id), ok
}
