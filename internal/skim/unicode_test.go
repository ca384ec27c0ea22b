package skim

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// Rune decodes a JSON string one character at a time as encoding/json
// decodes it whole.
func TestRuneDecodesAsEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`"plain"`, `"\u00e9t\u00E9"`, `"tab\tnew\nline\\ \/ \" \b\f\r"`, `"\ud83d\ude00 pair"`,
		`"\ud800 lone"`, `"\udc00\ud800 swapped"`, "\"bad \xff byte\"", `"é direct"`,
	} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(raw), &want), "encoding/json reads %s", raw)
		var got []rune
		in := []byte(raw)[1:]
		for {
			r, n := Rune(in)
			if n == 0 {
				break
			}
			got, in = append(got, r), in[n:]
		}
		assert.Equal(t, want, string(got), "Rune over %s", raw)
		assert.Equal(t, `"`, string(in), "what is left of %s", raw)
	}
	_, n := Rune([]byte(`\x"`))
	assert.Zero(t, n, "a malformed escape ends the string")
}

// Elements yields a JSON array's elements raw, whatever they hold.
func TestElementsYieldsEachElementRaw(t *testing.T) {
	arr := []byte(` [ {"a":[1,2],"s":"x,]"} , "q\"]" ,3,[ [] ], null ] `)
	var got []string
	for e := range Elements(bytes.TrimSpace(arr)) {
		got = append(got, string(e))
	}
	assert.Equal(t, []string{`{"a":[1,2],"s":"x,]"}`, `"q\"]"`, `3`, `[ [] ]`, `null`}, got)
	for e := range Elements([]byte(`[1,2,3]`)) {
		assert.Equal(t, "1", string(e), "stopping after the first")
		break
	}
	for range Elements([]byte(`[]`)) {
		assert.Fail(t, "an empty array has no elements")
	}
}
