package skim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzPaths are the paths FuzzPick picks: short names, so that the fuzzer
// finds them, a repeated prefix, and names whose case and Unicode folds
// matter (k: the Kelvin sign; s: the long s).
var fuzzPaths = [][]string{
	{"id"}, {"a"}, {"a", "b"}, {"a", "b", "c"}, {"a", "id"}, {"k"}, {"s"}, {"b"}, {"a", "k", "s"},
}

var (
	fuzzExact = Compile(fuzzPaths...)
	fuzzFold  = CompileFold(fuzzPaths...)
)

var pickSeeds = []string{
	`{}`, ` {"a":1} `, `{"id":1,"method":"x","params":{"sessionId":"s"}}`,
	`{"id":"1","result":null}`, `{"a":[1,2,{"b":[]}],"c":"\u00e9\n\"x\""}`,
	`{"a":-0.5e+10,"b":true,"c":false,"d":null}`, `{"\u0069d":7}`, `{"id":1,"id":2}`,
	`{"a":{"b":{"c":1}},"a":{"id":2}}`, `{"A":{"B":{"C":1}},"a":{"ID":2}}`, "{\"\u212a\":{\"\u017f\":1},\"K\":2}",
	`{"a":{"k":{"S":1}},"a":null}`, `{"a":{"b":1},"A":[1]}`, `{"Id":1,"iD":2,"id":3}`, `{"i\u0044":1}`,
	`[1]`, `"s"`, `{"a":01}`, `{"a":1,}`, `{"a" 1}`, `{"a":"\x"}`, `{"a":"` + "\x01" + `"}`,
	`{"a":tru}`, `{"a":1} x`, `{"a":"\ud800"}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{`, `{"a":[}`, ``, ` `, `1 2`,
	nested(MaxDepth, ""), nested(MaxDepth+1, ""),
	`{"a":` + nested(MaxDepth-1, "") + `}`, `{"a":` + nested(MaxDepth, "") + `}`,
	"{\"a\":\"\xff\xfe\"}", "{\"\xff\":1,\"\xef\xbf\xbd\":2}", `{"a":"\/\b\f\n\r\t"}`, `{"a":"\u12G4"}`,
}

// FuzzPick holds both implementations to encoding/json: a message is
// valid exactly when json.Valid says so (the nesting limit included), and
// each path's value is the raw value encoding/json finds there, decoding
// level by level into a map (Compile: exact names, the last duplicate) or
// into a struct with one json.RawMessage field tagged with the name
// (CompileFold: encoding/json's struct field matching).
//
// A Picker without the nesting limit (Unbounded) does exactly the same on
// a message within the limit, and on one nested deeper agrees with
// encoding/json's json.Decoder.Token, which has no limit (tokenValid,
// tokenPick). The message is also read past the limit: as the element of an
// array MaxDepth deep, and by skipDeep on its own from the top.
func FuzzPick(f *testing.F) {
	for _, s := range pickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		trimmed := trimSpace(b)
		isObject := valid && trimmed[0] == '{'
		var cerr *json.SyntaxError
		deep := errors.As(json.Compact(new(bytes.Buffer), b), &cerr) && strings.Contains(cerr.Error(), "exceeded max depth")
		// Valid without the nesting limit.
		validJS := tokenValid(b)
		if !deep {
			require.Equal(t, valid, validJS, "%q: the Token oracle against json.Valid", b)
		}
		isObjectJS := validJS && trimmed[0] == '{'

		for _, mode := range []struct {
			name string
			set  *Paths
			want func(b []byte, path []string) []byte
		}{{"exact", fuzzExact, exactAt}, {"fold", fuzzFold, foldAt}} {
			var results [][][]byte
			for _, im := range impls {
				var p implPicker
				got, err := im.pick(&p, b, mode.set)
				switch {
				case !valid && (!errors.Is(err, ErrSyntax) || errors.Is(err, ErrNotObject)):
					require.Fail(t, fmt.Sprintf("%s/%s: %q: error %v, json.Valid false", im.name, mode.name, b, err))
				case valid && !isObject && (!errors.Is(err, ErrNotObject) || errors.Is(err, ErrSyntax)):
					require.Fail(t, fmt.Sprintf("%s/%s: %q: error %v, valid but not an object", im.name, mode.name, b, err))
				case isObject && err != nil:
					require.Fail(t, fmt.Sprintf("%s/%s: %q: error %v, json.Valid true", im.name, mode.name, b, err))
				case errors.Is(err, ErrTooDeep) != deep:
					require.Fail(t, fmt.Sprintf("%s/%s: %q: error %v, encoding/json: %v", im.name, mode.name, b, err, cerr))
				}
				if err != nil {
					continue
				}
				for i, path := range fuzzPaths {
					want := mode.want(b, path)
					require.Equal(t, want, got[i], "%s/%s: %q: %v, encoding/json %q", im.name, mode.name, b, path, want)
					require.Equal(t, want == nil, got[i] == nil, "%s/%s: %q: %v, encoding/json %q", im.name, mode.name, b, path, want)
				}
				results = append(results, append([][]byte(nil), got...))
			}
			if len(results) == 2 {
				require.Equal(t, results[0], results[1], "%s: %q: jsontext against hand", mode.name, b)
			}

			// Unbounded.
			p := Picker{Unbounded: true}
			got, err := p.Pick(b, mode.set)
			switch {
			case errors.Is(err, ErrTooDeep):
				require.Fail(t, fmt.Sprintf("unbounded/%s: %q: error %v", mode.name, b, err))
			case !validJS && (!errors.Is(err, ErrSyntax) || errors.Is(err, ErrNotObject)):
				require.Fail(t, fmt.Sprintf("unbounded/%s: %q: error %v, Token oracle: invalid", mode.name, b, err))
			case validJS && !isObjectJS && (!errors.Is(err, ErrNotObject) || errors.Is(err, ErrSyntax)):
				require.Fail(t, fmt.Sprintf("unbounded/%s: %q: error %v, valid but not an object", mode.name, b, err))
			case isObjectJS && err != nil:
				require.Fail(t, fmt.Sprintf("unbounded/%s: %q: error %v, Token oracle: valid", mode.name, b, err))
			}
			if err != nil {
				continue
			}
			if !deep {
				require.Equal(t, results[0], got, "unbounded/%s: %q: against bounded", mode.name, b)
			}
			if deep {
				wants := tokenPick(b, fuzzPaths, mode.set.fold)
				for i, path := range fuzzPaths {
					want := wants[i]
					require.Equal(t, want, got[i], "unbounded/%s: %q: %v, encoding/json's Token %q", mode.name, b, path, want)
					require.Equal(t, want == nil, got[i] == nil, "unbounded/%s: %q: %v, encoding/json's Token %q", mode.name, b, path, want)
				}
			}
		}

		// Past the limit: b the element of an array MaxDepth deep, its
		// arrays and objects read by skipDeep.
		inner := append(append([]byte("["), b...), ']')
		wrapped := append(append([]byte(wrapOpen), inner...), wrapClose...)
		innerValid := tokenValid(inner)
		for _, set := range []*Paths{fuzzExact, fuzzFold} {
			p := Picker{Unbounded: true}
			got, err := p.Pick(wrapped, set)
			require.Equal(t, innerValid, err == nil, "unbounded: %q, %d deep, Token oracle: valid %v", b, MaxDepth, innerValid)
			require.NotErrorIs(t, err, ErrTooDeep, "unbounded: %q, %d deep, Token oracle: valid %v", b, MaxDepth, innerValid)
			if err != nil {
				continue
			}
			a := wrapped[len(`{"a":`) : len(wrapped)-len(`,"id":1}`)]
			for i, path := range fuzzPaths {
				var want []byte
				switch strings.Join(path, ".") {
				case "id":
					want = []byte("1")
				case "a":
					want = a
				}
				require.Equal(t, want, got[i], "unbounded: %q, %d deep: %v", b, MaxDepth, path)
				require.Equal(t, want == nil, got[i] == nil, "unbounded: %q, %d deep: %v", b, MaxDepth, path)
			}
		}
		// PickPrefixUnbounded reads it whole as Pick does, and no prefix
		// of a valid one is an error (the exact set only: this is slow).
		pre, err := PickPrefixUnbounded(wrapped, fuzzExact)
		require.Equal(t, innerValid, err == nil, "unbounded prefix: %q, %d deep: without an error (%v) against the Token oracle", b, MaxDepth, err)
		require.NotErrorIs(t, err, ErrTooDeep, "unbounded prefix: %q, %d deep", b, MaxDepth)
		if err == nil {
			require.True(t, pre.Whole, "unbounded prefix: %q, %d deep: whole", b, MaxDepth)
			require.Equal(t, "1", string(pre.Values[0]), "unbounded prefix: %q, %d deep: id", b, MaxDepth)
			require.Equal(t, len(wrapped)-len(`{"a":,"id":1}`), len(pre.Values[1]), "unbounded prefix: %q, %d deep: length of a", b, MaxDepth)
		}
		for k := 1; innerValid && k < 4; k++ {
			cut := len(wrapOpen) + k*len(inner)/4
			_, err := PickPrefixUnbounded(wrapped[:cut], fuzzExact)
			require.NoError(t, err, "unbounded prefix of %q, %d deep, cut %d bytes in", b, MaxDepth, cut-len(wrapOpen))
		}

		// skipDeep on its own, from the top: a valid array or object is
		// skipped whole; with cut, each prefix of it is errCut, or nil
		// once the value is complete.
		if len(trimmed) > 0 && (trimmed[0] == '[' || trimmed[0] == '{') {
			s := skimmer{b: b}
			s.ws()
			err := s.skipDeep(false)
			if err == nil {
				if s.ws(); s.i != len(b) {
					err = s.fail("data after the value")
				}
			}
			require.Equal(t, validJS, err == nil, "skipDeep(%q) without an error (%v) against the Token oracle", b, err)
			if err != nil {
				require.ErrorIs(t, err, ErrSyntax, "skipDeep(%q)", b)
			}
			step := 1
			if len(b) > 256 {
				step = len(b) / 64
			}
			for k := 0; validJS && k <= len(b); k += step {
				s := skimmer{b: b[:k]}
				if s.ws(); s.i == k {
					continue
				}
				switch err := s.skipDeep(true); {
				case err == errCut:
				case err == nil && len(trimSpace(b[s.i:])) == 0:
				default:
					require.Fail(t, fmt.Sprintf("skipDeep(%q, cut): %v at byte %d, of %q", b[:k], err, s.i, b))
				}
			}
		}

		// ReadHead reads what the kits' envelope struct reads.
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
		}
		for _, im := range impls {
			h, err := im.head(b)
			require.Equal(t, isObject, err == nil, "%s: ReadHead(%q) error %v, json.Valid %v", im.name, b, err, valid)
			if err != nil {
				continue
			}
			env.ID, env.Method = nil, nil
			require.NoError(t, json.Unmarshal(b, &env), "json.Unmarshal(%q)", b)
			var want Head
			var method string
			if env.Method != nil && json.Unmarshal(env.Method, &method) == nil && env.Method[0] == '"' {
				want.Method, want.HasMethod = method, true
			}
			want.HasID = env.ID != nil && string(env.ID) != "null"
			require.Equal(t, want, h, "%s: ReadHead(%q), encoding/json %+v", im.name, b, want)
		}
	})
}

// wrapOpen and wrapClose wrap an array in an object member and arrays, so
// that the array is MaxDepth deep (FuzzPick).
var (
	wrapOpen  = `{"a":` + strings.Repeat("[", MaxDepth-2)
	wrapClose = strings.Repeat("]", MaxDepth-2) + `,"id":1}`
)

// exactAt is the raw value at path by decoding into maps.
func exactAt(b []byte, path []string) []byte {
	raw := json.RawMessage(b)
	for _, name := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		var ok bool
		if raw, ok = m[name]; !ok {
			return nil
		}
	}
	return raw
}

// foldAt is the raw value at path by decoding into structs.
func foldAt(b []byte, path []string) []byte {
	raw := json.RawMessage(b)
	for _, name := range path {
		v := reflect.New(reflect.StructOf([]reflect.StructField{{
			Name: "V", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + name + `"`),
		}}))
		if trimmed := trimSpace(raw); len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(raw, v.Interface()) != nil {
			return nil
		}
		raw = v.Elem().Field(0).Bytes()
		if raw == nil {
			return nil
		}
	}
	return raw
}

var idSeeds = [][2]string{
	{`"init-é"`, `"init-\u00e9"`}, {`"a<b&c"`, `"a\u003cb\u0026c"`}, {`1`, `"1"`}, {`1`, `1.0`}, {`null`, ``},
	{` 7 `, `7`}, {`{"a":1,"b":2}`, `{"b":2,"a":1}`}, {`[1,"x"]`, `[1,"\u0078"]`}, {"\"\xff\"", `"\ufffd"`},
	{`true`, `"true"`}, {`{"a":1,"a":2}`, `{"a":2}`}, {`-0`, `0`}, {`1e2`, `100`}, {`""`, `null`}, {`01`, `1`},
	{`0.0`, `-0`}, {`2e0`, `2`}, {`9007199254740993`, `9007199254740992`}, {`1e400`, `2e400`}, {`-1e400`, `1e400`},
	{`1e-400`, `-0`}, {`[1.0]`, `[1]`},
}

// FuzzIDKey: two ids that encoding/json accepts have the same key exactly
// when a client takes them for one id: two strings when encoding/json
// decodes them to the same string, two numbers when it decodes them to the
// same float64 (0 == -0; a number too large for one is an infinity of its
// sign, as JSON.parse makes it), two other values when it decodes them
// (numbers by their literals, json.Decoder.UseNumber) to equal values;
// anything else has a key no valid id has.
func FuzzIDKey(f *testing.F) {
	for _, s := range idSeeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ka, kb := IDKey(a), IDKey(b)
		va, oka := decodeID(a)
		vb, okb := decodeID(b)
		for _, c := range []struct {
			raw []byte
			key string
			ok  bool
		}{{a, ka, oka}, {b, kb, okb}} {
			if !c.ok && len(trimSpace(c.raw)) > 0 {
				require.True(t, strings.HasPrefix(c.key, "?:"), "IDKey(%q) = %q, not valid JSON", c.raw, c.key)
			}
			if c.ok {
				require.False(t, strings.HasPrefix(c.key, "?:"), "IDKey(%q) = %q, valid JSON", c.raw, c.key)
			}

		}
		if !oka || !okb {
			return
		}
		same := reflect.DeepEqual(va, vb)
		na, isNumA := va.(json.Number)
		nb, isNumB := vb.(json.Number)
		if isNumA && isNumB {
			same = numberValue(t, na) == numberValue(t, nb)
		}
		require.Equal(t, ka == kb, same, "IDKey(%q) = %q, IDKey(%q) = %q; encoding/json decodes %#v and %#v", a, ka, b, kb, va, vb)
	})
}

// numberValue is the float64 encoding/json decodes n to, or, for a number
// it refuses as out of range, the infinity of n's sign (JSON.parse's).
func numberValue(t *testing.T, n json.Number) float64 {
	var f float64
	if err := json.Unmarshal([]byte(n), &f); err != nil {
		var te *json.UnmarshalTypeError
		require.ErrorAs(t, err, &te, "json.Unmarshal(%s)", n)
		if strings.HasPrefix(string(n), "-") {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	return f
}

// decodeID decodes a raw id; an absent one (nothing but whitespace) is nil,
// as null is.
func decodeID(raw []byte) (any, bool) {
	if len(trimSpace(raw)) == 0 {
		return nil, true
	}
	if !json.Valid(raw) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}
