package skim

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPickPrefixReadsTheHeadOfAHugePrompt(t *testing.T) {
	paths := [][]string{{"id"}, {"method"}, {"params", "sessionId"}, {"params"}, {"params", "prompt"}, {"result"}}
	set := Compile(paths...)
	msg := `{"jsonrpc":"2.0","id":"p\u00e9","method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"` +
		strings.Repeat("x", 1000) + `"}]}}`
	for _, cut := range []int{40, 200, len(msg) - 3} {
		pre, err := PickPrefix([]byte(msg[:cut]), set)
		require.NoError(t, err, "cut %d", cut)
		require.False(t, pre.Whole, "cut %d: whole", cut)
		if cut < 200 {
			continue
		}
		if assert.Equal(t, `"p\u00e9"`, string(pre.Values[0]), "cut %d: %q", cut, pre.Values) {
			if assert.Equal(t, `"session/prompt"`, string(pre.Values[1]), "cut %d: %q", cut, pre.Values) {
				assert.Equal(t, `"s1"`, string(pre.Values[2]), "cut %d: %q", cut, pre.Values)
			}
		}
		if assert.Nil(t, pre.Values[3], "cut %d: params and prompt run past the end: values %q, started %v", cut, pre.Values[3:5], pre.Started) {
			if assert.Nil(t, pre.Values[4], "cut %d: params and prompt run past the end: values %q, started %v", cut, pre.Values[3:5], pre.Started) {
				if assert.True(t, pre.Started[3], "cut %d: params and prompt run past the end: values %q, started %v", cut, pre.Values[3:5], pre.Started) {
					assert.True(t, pre.Started[4], "cut %d: params and prompt run past the end: values %q, started %v", cut, pre.Values[3:5], pre.Started)
				}
			}
		}
		// The result is absent.
		assert.False(t, pre.Started[5], "cut %d: result started", cut)
		assert.Nil(t, pre.Values[5], "cut %d: result value", cut)
	}
	pre, err := PickPrefix([]byte(msg+"\n"), set)
	require.NoError(t, err, "whole message, %+v", pre)
	require.True(t, pre.Whole, "whole message: %v, %+v", err, pre)
	require.NotNil(t, pre.Values[3], "whole message, %+v", pre)
}

func TestPickPrefixCuts(t *testing.T) {
	set := Compile([]string{"a"}, []string{"b"})
	for _, tc := range []struct {
		prefix string
		a, b   string // "" is nil
		err    error
		whole  bool
	}{
		{prefix: ``},
		{prefix: ` `},
		{prefix: `{`},
		{prefix: `{"a":1`, a: ""},   // 1 may go on: 12
		{prefix: `{"a":1,`, a: "1"}, // now it cannot
		{prefix: `{"a":-`, a: ""},
		{prefix: `{"a":1.`, a: ""},
		{prefix: `{"a":1e+`, a: ""},
		{prefix: `{"a":tr`},
		{prefix: `{"a":true`, a: "true"}, // a literal cannot go on
		{prefix: `{"a":"x\u00`},
		{prefix: `{"a":"x\`},
		{prefix: `{"a":"x"`, a: `"x"`},
		{prefix: `{"a":[1,{"b":2}`},
		{prefix: `{"a":{"b":2}}`, a: `{"b":2}`, whole: true},
		{prefix: `{"a":1,"b":[`, a: "1"},
		{prefix: `{"a":1,"a":[`, a: ""}, // the repeat replaces the first
		{prefix: `{"a":1,,`, err: ErrSyntax},
		{prefix: `{"a":tx`, err: ErrSyntax},
		{prefix: `{"a":"\u00G`, err: ErrSyntax},
		{prefix: `{"a":01`, err: ErrSyntax},
		{prefix: `{"a":1.x`, err: ErrSyntax},
		{prefix: `{1`, err: ErrSyntax},
		{prefix: `{"a"1`, err: ErrSyntax},
		{prefix: "{\"a\":\"\x01", err: ErrSyntax},
		{prefix: `{}x`, err: ErrSyntax},
		{prefix: `x`, err: ErrSyntax},
		{prefix: `[{"a":1`, err: ErrNotObject},
		{prefix: `[}`, err: ErrSyntax},
		{prefix: `"a"`, err: ErrNotObject},
		{prefix: strings.Repeat(`{"a":`, MaxDepth+1), err: ErrTooDeep},
	} {
		pre, err := PickPrefix([]byte(tc.prefix), set)
		if tc.err != nil {
			assert.ErrorIs(t, err, tc.err, "%q: error", tc.prefix)
			continue
		}
		if !assert.NoError(t, err, "%q", tc.prefix) {
			continue
		}
		if assert.Equal(t, tc.a, string(pre.Values[0]), "%q: %q whole", tc.prefix, pre.Values) {
			if assert.Equal(t, pre.Values[0] == nil, tc.a == "", "%q: %q whole", tc.prefix, pre.Values) {
				if assert.Equal(t, tc.b, string(pre.Values[1]), "%q: %q whole", tc.prefix, pre.Values) {
					assert.Equal(t, tc.whole, pre.Whole, "%q: %q whole", tc.prefix, pre.Values)
				}
			}
		}
	}
}

// FuzzPickPrefix: on any valid message, whatever PickPrefix reports
// complete in any prefix is what Pick finds in the whole message, and the
// whole message is Pick's exactly. A message whose objects along the paths
// repeat a member name is left out: a prefix cannot see a repeat after
// its end (see PickPrefix). No prefix of a valid message is an error; a
// prefix PickPrefix calls whole is a valid message. The same holds of
// PickPrefixUnbounded and an Unbounded Picker, at any depth.
func FuzzPickPrefix(f *testing.F) {
	for _, s := range pickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var cerr *json.SyntaxError
		deep := errors.As(json.Compact(new(bytes.Buffer), b), &cerr) && strings.Contains(cerr.Error(), "exceeded max depth")
		for _, mode := range []struct {
			name      string
			set       *Paths
			unbounded bool
		}{{"exact", fuzzExact, false}, {"fold", fuzzFold, false}, {"unbounded/exact", fuzzExact, true}, {"unbounded/fold", fuzzFold, true}} {
			pickPrefix, valid := PickPrefix, json.Valid
			if mode.unbounded {
				pickPrefix, valid = PickPrefixUnbounded, tokenValid
			}
			p := Picker{Unbounded: mode.unbounded}
			want, werr := p.Pick(b, mode.set)
			pre, err := pickPrefix(b, mode.set)
			if err == nil {
				require.Equal(t, werr == nil, pre.Whole, "%s: %q: whole; Pick error %v", mode.name, b, werr)
			}
			if werr == nil {
				require.NoError(t, err, "%s: %q: PickPrefix on a valid message", mode.name, b)
			}
			if mode.unbounded {
				require.NotErrorIs(t, err, ErrTooDeep, "%s: %q", mode.name, b)
			}
			if werr != nil || repeatsOnPaths(b, mode.set.root, mode.set.fold) {
				continue
			}
			for i := range want {
				require.Equal(t, want[i], pre.Values[i], "%s: %q: whole message: %v (started %v), Pick %q", mode.name, b, fuzzPaths[i], pre.Started[i], want[i])
				require.Equal(t, want[i] == nil, pre.Values[i] == nil, "%s: %q: whole message: %v (started %v), Pick %q", mode.name, b, fuzzPaths[i], pre.Started[i], want[i])
				require.Equal(t, want[i] != nil, pre.Started[i], "%s: %q: whole message: %v (started %v), Pick %q", mode.name, b, fuzzPaths[i], pre.Started[i], want[i])
			}
			step := 1
			switch {
			case mode.unbounded && !deep:
				continue // the prefixes are read as without the flag
			case mode.unbounded && len(b) > 2048:
				step = len(b) / 128
			case len(b) > 2048:
				step = len(b) / 512
			}
			for k := 0; k < len(b); k += step {
				pre, err := pickPrefix(b[:k], mode.set)
				require.NoError(t, err, "%s: %q: prefix of %d bytes", mode.name, b, k)
				for i := range want {
					if v := pre.Values[i]; v != nil {
						// As strings: bytes.Equal's nil and empty are one.
						require.Equal(t, string(want[i]), string(v), "%s: %q: prefix of %d bytes: %v against the whole message", mode.name, b, k, fuzzPaths[i])
						require.True(t, pre.Started[i], "%s: %q: prefix of %d bytes: %v complete but not started", mode.name, b, k, fuzzPaths[i])
					}
				}
				if pre.Whole {
					require.True(t, valid(b[:k]), "%s: %q: prefix of %d bytes whole, but not valid", mode.name, b, k)
				}

			}
		}
	})
}

// repeatsOnPaths reports whether an object of msg, a valid message, that
// the paths of n go through holds two members that select the same path
// member. It reads msg with encoding/json's Token, at any depth.
func repeatsOnPaths(msg []byte, n *pathNode, fold bool) bool {
	seen := map[*pathKid]bool{}
	repeats := false
	members(msg, func(key, value []byte) {
		kid := n.match(key, fold)
		if kid == nil || repeats {
			return
		}
		repeats = seen[kid] || kid.node != nil && repeatsOnPaths(value, kid.node, fold)
		seen[kid] = true
	})
	return repeats
}

// TestPickPrefixCutsInsideTokens: the prefix cut inside each kind of
// token, and a repeated member cut on its way, as the partial mode of
// Pick's skimmer reads them.
func TestPickPrefixCutsInsideTokens(t *testing.T) {
	set := Compile([]string{"a"}, []string{"a", "b"}, []string{"c"})
	for _, tc := range []struct {
		prefix  string
		values  []string // "" is nil
		started []bool
		whole   bool
		err     error
	}{
		{prefix: `{"a":"x\u0`, values: []string{"", "", ""}, started: []bool{true, false, false}},
		{prefix: `{"a":"x\u0G`, err: ErrSyntax},
		{prefix: `{"a":fals`, values: []string{"", "", ""}, started: []bool{true, false, false}},
		{prefix: `{"a":nulx`, err: ErrSyntax},
		{prefix: `{"a":0`, values: []string{"", "", ""}, started: []bool{true, false, false}},
		{prefix: `{"a":0 `, values: []string{"0", "", ""}, started: []bool{true, false, false}},
		{prefix: `{"a":1E`, values: []string{"", "", ""}, started: []bool{true, false, false}},
		{prefix: `{"a":-0.5e+1}`, values: []string{"-0.5e+1", "", ""}, started: []bool{true, false, false}, whole: true},
		{prefix: `{"c":[tru`, values: []string{"", "", ""}, started: []bool{false, false, true}},
		{prefix: `{"a":{"b":1}`, values: []string{`{"b":1}`, "1", ""}, started: []bool{true, true, false}},
		{prefix: `{"a":{"b":1},"a":`, values: []string{"", "", ""}, started: []bool{true, false, false}},
		{prefix: `{"a":{"b":1},"a":{"b":`, values: []string{"", "", ""}, started: []bool{true, true, false}},
		{prefix: `{"a":{"b":1},"a":{"b":2,`, values: []string{"", "2", ""}, started: []bool{true, true, false}},
		{prefix: `{"c":1,"a":{"b":"\u00e9"},"c":`, values: []string{`{"b":"\u00e9"}`, `"\u00e9"`, ""}, started: []bool{true, true, true}},
		{prefix: "\t\n", values: []string{"", "", ""}, started: []bool{false, false, false}},
		{prefix: `1`, err: ErrNotObject},
		{prefix: ` tr`, err: ErrNotObject},
		{prefix: `"\u0`, err: ErrNotObject},
		{prefix: `tx`, err: ErrSyntax},
	} {
		pre, err := PickPrefix([]byte(tc.prefix), set)
		if tc.err != nil {
			assert.ErrorIs(t, err, tc.err, "%q: error", tc.prefix)
			continue
		}
		if !assert.NoError(t, err, "%q", tc.prefix) {
			continue
		}
		for q, want := range tc.values {
			got := pre.Values[q]
			if assert.Equal(t, want, string(got), "%q: value %d", tc.prefix, q) {
				assert.Equal(t, want == "", got == nil, "%q: value %d", tc.prefix, q)
			}
		}
		assert.Equal(t, tc.started, pre.Started, "%q: started", tc.prefix)
		assert.Equal(t, tc.whole, pre.Whole, "%q: whole", tc.prefix)
	}
}

// TestPickPrefixErrorsArePicks: a prefix that is invalid before its end is
// read by Pick's grammar, so PickPrefix reports Pick's error for it, at the
// same byte.
func TestPickPrefixErrorsArePicks(t *testing.T) {
	set := Compile([]string{"a"}, []string{"a", "b"})
	for _, msg := range []string{
		`{"a":1,,`, `{"a":tx`, `{"a":"\u00G`, `{"a":01`, `{"a":1.x`, `{"a":1ex`, `{"a":-x`, `{1`, `{"a"1`,
		"{\"a\":\"\x01", `{"a":"\q`, `{"a":[1}`, `{"a":{"b":1]`, `{}x`, `x`, `[}`, `{"a":nul `,
		strings.Repeat(`{"a":`, MaxDepth+1),
	} {
		var p Picker
		_, want := p.Pick([]byte(msg), set)
		_, got := PickPrefix([]byte(msg), set)
		if assert.Error(t, want, "%q: PickPrefix error %v, Pick's %v", msg, got, want) {
			if assert.Error(t, got, "%q: PickPrefix error %v, Pick's %v", msg, got, want) {
				assert.Equal(t, want.Error(), got.Error(), "%q: PickPrefix error %v, Pick's %v", msg, got, want)
			}
		}
	}
}
