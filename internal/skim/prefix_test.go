package skim

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPickPrefixReadsTheHeadOfAHugePrompt(t *testing.T) {
	paths := [][]string{{"id"}, {"method"}, {"params", "sessionId"}, {"params"}, {"params", "prompt"}, {"result"}}
	set := Compile(paths...)
	msg := `{"jsonrpc":"2.0","id":"p\u00e9","method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"` +
		strings.Repeat("x", 1000) + `"}]}}`
	for _, cut := range []int{40, 200, len(msg) - 3} {
		pre, err := PickPrefix([]byte(msg[:cut]), set)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if pre.Whole {
			t.Fatalf("cut %d: whole", cut)
		}
		if cut < 200 {
			continue
		}
		if string(pre.Values[0]) != `"p\u00e9"` || string(pre.Values[1]) != `"session/prompt"` || string(pre.Values[2]) != `"s1"` {
			t.Errorf("cut %d: %q", cut, pre.Values)
		}
		if pre.Values[3] != nil || pre.Values[4] != nil || !pre.Started[3] || !pre.Started[4] {
			t.Errorf("cut %d: params and prompt run past the end: values %q, started %v", cut, pre.Values[3:5], pre.Started)
		}
		if pre.Started[5] || pre.Values[5] != nil {
			t.Errorf("cut %d: result is absent", cut)
		}
	}
	pre, err := PickPrefix([]byte(msg+"\n"), set)
	if err != nil || !pre.Whole || pre.Values[3] == nil {
		t.Fatalf("whole message: %v, %+v", err, pre)
	}
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
			if !errors.Is(err, tc.err) {
				t.Errorf("%q: error %v, want %v", tc.prefix, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.prefix, err)
			continue
		}
		if string(pre.Values[0]) != tc.a || (tc.a == "") != (pre.Values[0] == nil) || string(pre.Values[1]) != tc.b || pre.Whole != tc.whole {
			t.Errorf("%q: %q whole %v; want a %q, b %q, whole %v", tc.prefix, pre.Values, pre.Whole, tc.a, tc.b, tc.whole)
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
			if err == nil && pre.Whole != (werr == nil) {
				t.Fatalf("%s: %q: whole %v, Pick error %v", mode.name, b, pre.Whole, werr)
			}
			if err != nil && werr == nil {
				t.Fatalf("%s: %q: PickPrefix error %v on a valid message", mode.name, b, err)
			}
			if mode.unbounded && errors.Is(err, ErrTooDeep) {
				t.Fatalf("%s: %q: %v", mode.name, b, err)
			}
			if werr != nil || repeatsOnPaths(b, mode.set.root, mode.set.fold) {
				continue
			}
			for i := range want {
				if !bytes.Equal(pre.Values[i], want[i]) || (pre.Values[i] == nil) != (want[i] == nil) || pre.Started[i] != (want[i] != nil) {
					t.Fatalf("%s: %q: whole message: %v = %q (started %v), Pick %q", mode.name, b, fuzzPaths[i], pre.Values[i], pre.Started[i], want[i])
				}
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
				if err != nil {
					t.Fatalf("%s: %q: prefix of %d bytes: %v", mode.name, b, k, err)
				}
				for i := range want {
					if v := pre.Values[i]; v != nil && !bytes.Equal(v, want[i]) {
						t.Fatalf("%s: %q: prefix of %d bytes: %v = %q, the whole message has %q", mode.name, b, k, fuzzPaths[i], v, want[i])
					}
					if pre.Values[i] != nil && !pre.Started[i] {
						t.Fatalf("%s: %q: prefix of %d bytes: %v complete but not started", mode.name, b, k, fuzzPaths[i])
					}
				}
				if pre.Whole && !valid(b[:k]) {
					t.Fatalf("%s: %q: prefix of %d bytes whole, but not valid", mode.name, b, k)
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
			if !errors.Is(err, tc.err) {
				t.Errorf("%q: error %v, want %v", tc.prefix, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.prefix, err)
			continue
		}
		for q, want := range tc.values {
			if got := pre.Values[q]; string(got) != want || (got == nil) != (want == "") {
				t.Errorf("%q: value %d: got %q, want %q", tc.prefix, q, got, want)
			}
		}
		if !slices.Equal(pre.Started, tc.started) {
			t.Errorf("%q: started: got %v, want %v", tc.prefix, pre.Started, tc.started)
		}
		if pre.Whole != tc.whole {
			t.Errorf("%q: whole: got %v, want %v", tc.prefix, pre.Whole, tc.whole)
		}
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
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%q: PickPrefix error %v, Pick's %v", msg, got, want)
		}
	}
}
