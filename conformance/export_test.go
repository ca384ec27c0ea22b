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
