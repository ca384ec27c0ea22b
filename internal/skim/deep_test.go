package skim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reading mode without a nesting limit (Picker.Unbounded,
// PickPrefixUnbounded), held to encoding/json's json.Decoder.Token: it
// reads arrays and objects one delimiter at a time, with a stack of its
// own and no nesting limit (the scanner's limit only applies to the scalars
// it decodes), so it judges a message as JSON.parse does, at any depth.

// tokenValid reports whether b is one JSON value, by encoding/json's
// grammar, at any depth.
func tokenValid(b []byte) bool {
	d := tokenDecoder(b)
	if err := skipToken(d); err != nil {
		return false
	}
	_, err := d.Token()
	return err == io.EOF
}

// tokenDecoder is a json.Decoder on b that decodes numbers as
// json.Number, which a literal out of float64's range (1e400) is too.
func tokenDecoder(b []byte) *json.Decoder {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d
}

// skipToken reads one value with d.Token.
func skipToken(d *json.Decoder) error {
	depth := 0
	for {
		t, err := d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// members calls f with the raw name and the raw value of each member of
// the object obj, a valid JSON value, in order; it reports obj is an
// object.
func members(obj []byte, f func(name, value []byte)) bool {
	d := tokenDecoder(obj)
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for d.More() {
		k0 := d.InputOffset() // before the comma, if any
		if _, err := d.Token(); err != nil {
			return false
		}
		k1 := d.InputOffset()
		if err := skipToken(d); err != nil {
			return false
		}
		f(trimSep(obj[k0:k1]), trimSep(obj[k1:d.InputOffset()]))
	}
	return true
}

// trimSep trims whitespace, and the commas and colons before a token.
func trimSep(b []byte) []byte { return bytes.TrimRight(bytes.TrimLeft(b, " \t\r\n,:"), " \t\r\n") }

// tokenPick is exactAt (fold false) and foldAt (fold true) of each of
// paths, at any depth: the raw value at the path, the last member whose
// name matches at each level, a name matching exactly as a map decode
// matches it, or as encoding/json matches a struct field (asked of
// encoding/json itself). Each object is read once, for all the paths
// through it.
func tokenPick(b []byte, paths [][]string, fold bool) [][]byte {
	out := make([][]byte, len(paths))
	var walk func(obj []byte, level int, qs []int)
	walk = func(obj []byte, level int, qs []int) {
		found := map[string][]byte{}
		members(obj, func(key, value []byte) {
			for _, q := range qs {
				if name := paths[q][level]; nameMatches(key, name, fold) {
					found[name] = value
				}
			}
		})
		below := map[string][]int{}
		var names []string
		for _, q := range qs {
			v, ok := found[paths[q][level]]
			switch {
			case !ok:
			case level == len(paths[q])-1:
				out[q] = v
			default:
				name := paths[q][level]
				if below[name] == nil {
					names = append(names, name)
				}
				below[name] = append(below[name], q)
			}
		}
		for _, name := range names {
			walk(found[name], level+1, below[name])
		}
	}
	var qs []int
	for q, path := range paths {
		if len(path) > 0 {
			qs = append(qs, q)
		}
	}
	walk(trimSpace(b), 0, qs)
	return out
}

func nameMatches(key []byte, name string, fold bool) bool {
	if !fold {
		var s string
		return json.Unmarshal(key, &s) == nil && s == name
	}
	v := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "V", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + name + `"`),
	}}))
	msg := append(append([]byte("{"), key...), ":0}"...)
	return json.Unmarshal(msg, v.Interface()) == nil && v.Elem().Field(0).Bytes() != nil
}

// deepMix is depth levels of arrays and objects in turn, the innermost
// holding inner, and members and elements beside each level.
func deepMix(depth int, inner string) string {
	var b strings.Builder
	for l := range depth {
		if l%2 == 0 {
			b.WriteString(`[1,"x",{"id":2},`)
		} else {
			b.WriteString(`{"s":null,"k":`)
		}
	}
	b.WriteString(inner)
	for l := depth - 1; l >= 0; l-- {
		if l%2 == 0 {
			b.WriteString(`,true]`)
		} else {
			b.WriteString(`,"b":[]}`)
		}
	}
	return b.String()
}

// TestPickUnboundedReadsPastTheNestingLimit: a Picker with Unbounded reads
// a message nested deeper than MaxDepth as JSON.parse does, validating
// the deep values with the same grammar, and picks the members beside them.
func TestPickUnboundedReadsPastTheNestingLimit(t *testing.T) {
	paths := [][]string{{"id"}, {"method"}, {"params", "_meta"}, {"params", "sessionId"}, {"result"}}
	exact, fold := Compile(paths...), CompileFold(paths...)
	type want = []string // "" is absent (nil)
	meta := func(v string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"_meta":` + v + `,"sessionId":"s1"}}`
	}
	for _, tc := range []struct {
		name      string
		msg       string
		want      want // nil: an error is expected
		err       error
		truncated bool // the message ends too soon (a prefix of one)
		depth     int  // its nesting
	}{
		{name: "_meta 10,001 deep (the gate bypass)", msg: meta(nested(MaxDepth-1, "")),
			want: want{"1", `"session/prompt"`, nested(MaxDepth-1, ""), `"s1"`, ""}, depth: MaxDepth + 1},
		{name: "arrays and objects 20,000 deep", msg: meta(deepMix(2*MaxDepth, `"é\u00e9\n"`)),
			want: want{"1", `"session/prompt"`, deepMix(2*MaxDepth, `"é\u00e9\n"`), `"s1"`, ""}, depth: 2*MaxDepth + 2},
		{name: "objects 10,001 deep", msg: `{"result":` + strings.Repeat(`{"a":`, MaxDepth) + `0` + strings.Repeat(`}`, MaxDepth) + `,"id":"r"}`,
			want: want{`"r"`, "", "", "", strings.Repeat(`{"a":`, MaxDepth) + `0` + strings.Repeat(`}`, MaxDepth)}, depth: MaxDepth + 1},
		{name: "empty values past the limit", msg: meta(nested(MaxDepth, ` [ ] , { } , [{}], {"a":[]}, "", 0, -1.5e3, true, false, null `)),
			want:  want{"1", `"session/prompt"`, nested(MaxDepth, ` [ ] , { } , [{}], {"a":[]}, "", 0, -1.5e3, true, false, null `), `"s1"`, ""},
			depth: MaxDepth + 3},
		{name: "whitespace past the limit", msg: meta(strings.Repeat("[ \t\r\n", MaxDepth+5) + strings.Repeat(" \n]", MaxDepth+5)),
			want: want{"1", `"session/prompt"`, strings.Repeat("[ \t\r\n", MaxDepth+5) + strings.Repeat(" \n]", MaxDepth+5), `"s1"`, ""}, depth: MaxDepth + 7},
		{name: "a top-level array", msg: nested(MaxDepth+1, ""), err: ErrNotObject, depth: MaxDepth + 1},
		{name: "trailing comma past the limit", msg: meta(nested(MaxDepth, "1,")), err: ErrSyntax},
		{name: "trailing comma in an object past the limit", msg: meta(nested(MaxDepth, `{"a":1,}`)), err: ErrSyntax},
		{name: "missing colon past the limit", msg: meta(nested(MaxDepth, `{"a" 1}`)), err: ErrSyntax},
		{name: "name not a string past the limit", msg: meta(nested(MaxDepth, `{a:1}`)), err: ErrSyntax},
		{name: "mismatched brackets past the limit", msg: meta(strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth) + "}"), err: ErrSyntax},
		{name: "missing bracket past the limit", msg: meta(strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth)), err: ErrSyntax},
		{name: "a string past the limit runs to the end", msg: `{"a":` + nested(MaxDepth, `"abc`), err: ErrSyntax, truncated: true},
		{name: "extra bracket past the limit", msg: meta(nested(MaxDepth+1, "") + "]"), err: ErrSyntax},
		{name: "bad literal past the limit", msg: meta(nested(MaxDepth, "nul")), err: ErrSyntax},
		{name: "bad number past the limit", msg: meta(nested(MaxDepth, "01")), err: ErrSyntax},
		{name: "bad escape past the limit", msg: meta(nested(MaxDepth, `"\x"`)), err: ErrSyntax},
		{name: "control character past the limit", msg: meta(nested(MaxDepth, "\"\x01\"")), err: ErrSyntax},
		{name: "missing comma past the limit", msg: meta(nested(MaxDepth, "1 2")), err: ErrSyntax},
		{name: "the end past the limit", msg: `{"a":` + strings.Repeat(`[{"b":`, MaxDepth), err: ErrSyntax, truncated: true},
		{name: "data after a deep message", msg: meta(nested(MaxDepth, "")) + "]", err: ErrSyntax},
	} {
		msg := []byte(tc.msg)
		// The oracles: encoding/json's Token at any depth, and json.Valid
		// within the limit.
		valid := tc.err == nil || tc.err == ErrNotObject
		require.Equal(t, valid, tokenValid(msg), "%s: the test is wrong: Token validity %v", tc.name, !valid)
		if tc.depth > MaxDepth {
			require.False(t, json.Valid(msg), "%s: the test is wrong: json.Valid", tc.name)
		}
		for _, mode := range []struct {
			name string
			set  *Paths
		}{{"exact", exact}, {"fold", fold}} {
			p := Picker{Unbounded: true}
			got, err := p.Pick(msg, mode.set)
			assert.NotErrorIs(t, err, ErrTooDeep, "%s/%s", tc.name, mode.name)
			if tc.err != nil {
				if assert.ErrorIs(t, err, tc.err, "%s/%s: error", tc.name, mode.name) {
					assert.NotEqual(t, errors.Is(err, ErrNotObject), errors.Is(err, ErrSyntax), "%s/%s: error", tc.name, mode.name)
				}
			} else if assert.NoError(t, err, "%s/%s", tc.name, mode.name) {
				var oracle [][]byte // encoding/json's Token (the exact set only: a slow oracle)
				if !mode.set.fold {
					oracle = tokenPick(msg, paths, false)
				}
				for i, w := range tc.want {
					assert.Equal(t, w, string(got[i]), "%s/%s: %v", tc.name, mode.name, paths[i])
					if w == "" {
						assert.Nil(t, got[i], "%s/%s: %v", tc.name, mode.name, paths[i])
					}
					if oracle != nil {
						// As strings: bytes.Equal's nil and empty are one.
						assert.Equal(t, string(oracle[i]), string(got[i]), "%s/%s: %v against encoding/json's Token", tc.name, mode.name, paths[i])
					}
				}
			}
			// The zero Picker keeps the limit.
			var bounded Picker
			if _, err := bounded.Pick(msg, mode.set); tc.depth > MaxDepth {
				assert.ErrorIs(t, err, ErrTooDeep, "%s/%s: bounded", tc.name, mode.name)
			}
			// PickPrefixUnbounded reads the whole message as Pick does,
			// and every prefix of a valid one without an error.
			// (A message that ends too soon is a prefix.)
			pre, perr := PickPrefixUnbounded(msg, mode.set)
			assert.Equal(t, err == nil || tc.truncated, perr == nil, "%s/%s: PickPrefixUnbounded without an error: %v; Pick: %v", tc.name, mode.name, perr, err)
			assert.NotErrorIs(t, perr, ErrTooDeep, "%s/%s: PickPrefixUnbounded", tc.name, mode.name)
			if perr == nil {
				assert.Equal(t, err == nil, pre.Whole, "%s/%s: PickPrefixUnbounded whole; Pick: %v", tc.name, mode.name, err)
			}
			if err == nil {
				assert.Equal(t, got, pre.Values, "%s/%s: PickPrefixUnbounded values", tc.name, mode.name)
			}
			if _, err := PickPrefix(msg, mode.set); tc.depth > MaxDepth {
				assert.ErrorIs(t, err, ErrTooDeep, "%s/%s: PickPrefix", tc.name, mode.name)
			}
			if tc.err != nil {
				continue
			}
			for _, k := range []int{len(msg) / 2, len(msg) - 3} {
				pre, err := PickPrefixUnbounded(msg[:k], mode.set)
				if assert.NoError(t, err, "%s/%s: prefix of %d bytes, whole %v", tc.name, mode.name, k, pre.Whole) {
					assert.False(t, pre.Whole, "%s/%s: prefix of %d bytes: %v, whole %v", tc.name, mode.name, k, err, pre.Whole)
				}
				for i, v := range pre.Values {
					if v != nil {
						assert.Equal(t, string(got[i]), string(v), "%s/%s: prefix of %d bytes: %v against the whole message", tc.name, mode.name, k, paths[i])
					}

				}
			}
		}
	}
}

// TestPickUnboundedMillionDeep: 1,000,000 levels, the values deeper than
// MaxDepth read without recursion (the stack is held to 32 MB, a tenth of
// what a million frames would take), in memory of a bit or two per level.
func TestPickUnboundedMillionDeep(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(32 << 20))
	const depth = 1_000_000
	arrays := nested(depth, "")
	objects := strings.Repeat(`{"a":`, depth) + `"x"` + strings.Repeat(`}`, depth)
	mixed := deepMix(depth, "null") // 22 MB
	for _, tc := range []struct{ name, value string }{{"arrays", arrays}, {"objects", objects}, {"arrays and objects", mixed}} {
		if raceEnabled && tc.name != "arrays" {
			continue // slow, and nothing runs concurrently
		}
		msg := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","_meta":` +
			tc.value + `}},"id":7}`)
		p := Picker{Unbounded: true}
		got, err := p.Pick(msg, agentSet)
		require.NoError(t, err, "%s", tc.name)
		if assert.Equal(t, "7", string(got[0]), "%s: id %q, sessionUpdate %q, update of %d bytes", tc.name, got[0], got[7], len(got[6])) {
			if assert.Equal(t, `"plan"`, string(got[7]), "%s: id %q, sessionUpdate %q, update of %d bytes", tc.name, got[0], got[7], len(got[6])) {
				assert.Len(t, got[6], len(tc.value)+len(`{"sessionUpdate":"plan","_meta":}`), "%s: id %q, sessionUpdate %q, update of %d bytes", tc.name, got[0], got[7], len(got[6]))
			}
		}
		var bounded Picker
		_, err = bounded.Pick(msg, agentSet)
		assert.ErrorIs(t, err, ErrTooDeep, "%s: bounded", tc.name)
		pre, err := PickPrefixUnbounded(msg, agentSet)
		if assert.NoError(t, err, "%s: PickPrefixUnbounded, whole %v", tc.name, pre.Whole) {
			if assert.True(t, pre.Whole, "%s: PickPrefixUnbounded: %v, whole %v", tc.name, err, pre.Whole) {
				assert.Equal(t, got, pre.Values, "%s: PickPrefixUnbounded, whole %v", tc.name, pre.Whole)
			}
		}
		pre, err = PickPrefixUnbounded(msg[:len(msg)/2], agentSet)
		if assert.NoError(t, err, "%s: PickPrefixUnbounded of half, %q", tc.name, pre.Values) {
			if assert.False(t, pre.Whole, "%s: PickPrefixUnbounded of half: %v, %q", tc.name, err, pre.Values) {
				if assert.Equal(t, `"plan"`, string(pre.Values[7]), "%s: PickPrefixUnbounded of half, %q", tc.name, pre.Values) {
					if assert.Nil(t, pre.Values[6], "%s: PickPrefixUnbounded of half, %q", tc.name, pre.Values) {
						assert.True(t, pre.Started[6], "%s: PickPrefixUnbounded of half: %v, %q", tc.name, err, pre.Values)
					}
				}
			}
		}
		if raceEnabled {
			continue // the rest measures allocation, which the race detector adds to
		}
		// The bits past MaxDepth (124 KB for a million levels, the slice
		// doubling as it grows: 256 KB in all), and no more.
		n := testing.AllocsPerRun(2, func() { _, _ = p.Pick(msg, agentSet) })
		assert.LessOrEqual(t, n, float64(20), "%s: %v allocations", tc.name, n)
		b := allocBytes(func() { _, _ = p.Pick(msg, agentSet) })
		assert.LessOrEqual(t, b, uint64(depth/4+64<<10), "%s: %d bytes allocated", tc.name, b)
	}
	// One deep invalid byte is found.
	bad := []byte(`{"a":` + nested(depth/2, nested(depth/2, "1,")) + `}`)
	p := Picker{Unbounded: true}
	_, err := p.Pick(bad, agentSet)
	if assert.ErrorIs(t, err, ErrSyntax, "a trailing comma a million deep") {
		assert.NotErrorIs(t, err, ErrTooDeep, "a trailing comma a million deep")
	}
	_, err = PickPrefixUnbounded(bad, agentSet)
	if assert.ErrorIs(t, err, ErrSyntax, "PickPrefixUnbounded: a trailing comma a million deep") {
		assert.NotErrorIs(t, err, ErrTooDeep, "PickPrefixUnbounded: a trailing comma a million deep")
	}
}

// allocBytes is the memory f allocates.
func allocBytes(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}
