package skim

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A string is exact when every reader decodes it to the same characters:
// valid UTF-8, and surrogate escapes only in pairs.
func TestExact(t *testing.T) {
	for raw, want := range map[string]bool{
		`"cmp_1"`:                true,
		`"é \u00e9 \n \\ \""`:    true,
		`"\ud83d\ude00"`:         true,
		`"\uD83D\uDE00"`:         true,
		`"\\ud800"`:              true, // an escaped backslash, then text
		`"a\ud800"`:              false,
		`"a\udbff"`:              false,
		`"\ude00"`:               false,
		`"\ud83d\u0041"`:         false,
		`"\ud83d"`:               false,
		"\"a\xff\"":              false,
		"\"a\xe2\x82\"":          false,
		`"\ud800\ud800"`:         false,
		`"ok\ud83d\ude00\udc00"`: false,
		`"\u12"`:                 true, // not a string any reader reads: String refuses it
	} {
		assert.Equal(t, want, Exact([]byte(raw)), "Exact(%s)", raw)
	}
}
