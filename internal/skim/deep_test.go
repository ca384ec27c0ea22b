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
		if valid := tc.err == nil || tc.err == ErrNotObject; tokenValid(msg) != valid {
			t.Fatalf("%s: the test is wrong: Token validity %v", tc.name, !valid)
		}
		if tc.depth > MaxDepth && json.Valid(msg) {
			t.Fatalf("%s: the test is wrong: json.Valid true", tc.name)
		}
		for _, mode := range []struct {
			name string
			set  *Paths
		}{{"exact", exact}, {"fold", fold}} {
			p := Picker{Unbounded: true}
			got, err := p.Pick(msg, mode.set)
			if errors.Is(err, ErrTooDeep) {
				t.Errorf("%s/%s: %v", tc.name, mode.name, err)
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || errors.Is(err, ErrSyntax) == errors.Is(err, ErrNotObject) {
					t.Errorf("%s/%s: error %v, want %v", tc.name, mode.name, err, tc.err)
				}
			} else if err != nil {
				t.Errorf("%s/%s: %v", tc.name, mode.name, err)
			} else {
				var oracle [][]byte // encoding/json's Token (the exact set only: a slow oracle)
				if !mode.set.fold {
					oracle = tokenPick(msg, paths, false)
				}
				for i, w := range tc.want {
					if w == "" && got[i] != nil || string(got[i]) != w {
						t.Errorf("%s/%s: %v = %.40q, want %.40q", tc.name, mode.name, paths[i], got[i], w)
					}
					if oracle != nil && !bytes.Equal(got[i], oracle[i]) {
						t.Errorf("%s/%s: %v = %.40q, encoding/json's Token %.40q", tc.name, mode.name, paths[i], got[i], oracle[i])
					}
				}
			}
			// The zero Picker keeps the limit.
			var bounded Picker
			if _, err := bounded.Pick(msg, mode.set); tc.depth > MaxDepth && !errors.Is(err, ErrTooDeep) {
				t.Errorf("%s/%s: bounded: error %v, want ErrTooDeep", tc.name, mode.name, err)
			}
			// PickPrefixUnbounded reads the whole message as Pick does,
			// and every prefix of a valid one without an error.
			// (A message that ends too soon is a prefix.)
			pre, perr := PickPrefixUnbounded(msg, mode.set)
			if (perr == nil) != (err == nil || tc.truncated) || errors.Is(perr, ErrTooDeep) || perr == nil && pre.Whole != (err == nil) ||
				err == nil && !reflect.DeepEqual(pre.Values, got) {
				t.Errorf("%s/%s: PickPrefixUnbounded: %v, whole %v; Pick: %v", tc.name, mode.name, perr, pre.Whole, err)
			}
			if _, err := PickPrefix(msg, mode.set); tc.depth > MaxDepth && !errors.Is(err, ErrTooDeep) {
				t.Errorf("%s/%s: PickPrefix: error %v, want ErrTooDeep", tc.name, mode.name, err)
			}
			if tc.err != nil {
				continue
			}
			for _, k := range []int{len(msg) / 2, len(msg) - 3} {
				pre, err := PickPrefixUnbounded(msg[:k], mode.set)
				if err != nil || pre.Whole {
					t.Errorf("%s/%s: prefix of %d bytes: %v, whole %v", tc.name, mode.name, k, err, pre.Whole)
				}
				for i, v := range pre.Values {
					if v != nil && !bytes.Equal(v, got[i]) {
						t.Errorf("%s/%s: prefix of %d bytes: %v = %.40q, the whole message has %.40q", tc.name, mode.name, k, paths[i], v, got[i])
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
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got[0]) != "7" || string(got[7]) != `"plan"` || len(got[6]) != len(tc.value)+len(`{"sessionUpdate":"plan","_meta":}`) {
			t.Errorf("%s: id %q, sessionUpdate %q, update of %d bytes", tc.name, got[0], got[7], len(got[6]))
		}
		var bounded Picker
		if _, err := bounded.Pick(msg, agentSet); !errors.Is(err, ErrTooDeep) {
			t.Errorf("%s: bounded: %v", tc.name, err)
		}
		pre, err := PickPrefixUnbounded(msg, agentSet)
		if err != nil || !pre.Whole || !reflect.DeepEqual(pre.Values, got) {
			t.Errorf("%s: PickPrefixUnbounded: %v, whole %v", tc.name, err, pre.Whole)
		}
		pre, err = PickPrefixUnbounded(msg[:len(msg)/2], agentSet)
		if err != nil || pre.Whole || string(pre.Values[7]) != `"plan"` || pre.Values[6] != nil || !pre.Started[6] {
			t.Errorf("%s: PickPrefixUnbounded of half: %v, %q", tc.name, err, pre.Values)
		}
		if raceEnabled {
			continue // the rest measures allocation, which the race detector adds to
		}
		// The bits past MaxDepth (124 KB for a million levels, the slice
		// doubling as it grows: 256 KB in all), and no more.
		if n := testing.AllocsPerRun(2, func() { _, _ = p.Pick(msg, agentSet) }); n > 20 {
			t.Errorf("%s: %v allocations", tc.name, n)
		}
		if b := allocBytes(func() { _, _ = p.Pick(msg, agentSet) }); b > depth/4+64<<10 {
			t.Errorf("%s: %d bytes allocated", tc.name, b)
		}
	}
	// One deep invalid byte is found.
	bad := []byte(`{"a":` + nested(depth/2, nested(depth/2, "1,")) + `}`)
	p := Picker{Unbounded: true}
	if _, err := p.Pick(bad, agentSet); !errors.Is(err, ErrSyntax) || errors.Is(err, ErrTooDeep) {
		t.Errorf("a trailing comma a million deep: %v", err)
	}
	if _, err := PickPrefixUnbounded(bad, agentSet); !errors.Is(err, ErrSyntax) || errors.Is(err, ErrTooDeep) {
		t.Errorf("PickPrefixUnbounded: a trailing comma a million deep: %v", err)
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
