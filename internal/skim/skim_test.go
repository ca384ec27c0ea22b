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

// impl is one implementation of Pick and ReadHead's pick, so that every
// test holds both the exported one and the benchmark baseline.
type impl struct {
	name string
	pick func(p *implPicker, msg []byte, set *Paths) ([][]byte, error)
	head func(msg []byte) (Head, error)
}

type implPicker struct {
	hand handPicker
	text textPicker
}

var impls = []impl{
	{"hand", func(p *implPicker, msg []byte, set *Paths) ([][]byte, error) { return p.hand.pick(msg, set) }, readHeadHand},
	{"jsontext", func(p *implPicker, msg []byte, set *Paths) ([][]byte, error) { return p.text.pick(msg, set) }, readHeadText},
}

// agentPaths is the proxy's agent path set.
var agentPaths = [][]string{
	{"id"}, {"method"}, {"params"}, {"result"}, {"error"},
	{"params", "sessionId"}, {"params", "update"}, {"params", "update", "sessionUpdate"},
	{"params", "requestId"}, {"params", "replayFrom"},
	{"params", "update", "content", "type"}, {"params", "update", "content", "text"},
	{"params", "update", "compactionId"}, {"params", "update", "status"},
}

var agentSet = Compile(agentPaths...)

func nested(depth int, inner string) string {
	return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
}

func TestPick(t *testing.T) {
	paths := [][]string{{"id"}, {"method"}, {"params", "sessionId"}, {"params", "update", "sessionUpdate"}, {"params"}}
	exact, fold := Compile(paths...), CompileFold(paths...)
	type want = []string // "" is absent (nil)
	for _, tc := range []struct {
		name      string
		msg       string
		exact     want // nil: an error is expected
		fold      want // nil: same as exact
		err       error
		wantsDeep bool
	}{
		{name: "empty object", msg: `{}`, exact: want{"", "", "", "", ""}},
		{name: "whitespace", msg: " \t\r\n{ \"id\" : 1 ,\n\"method\"\t:\"m\" } \n", exact: want{"1", `"m"`, "", "", ""}},
		{name: "nested", msg: `{"params":{"sessionId":"s1","update":{"sessionUpdate":"plan","x":[1,{"sessionUpdate":2}]}},"id":"a"}`,
			exact: want{`"a"`, "", `"s1"`, `"plan"`, `{"sessionId":"s1","update":{"sessionUpdate":"plan","x":[1,{"sessionUpdate":2}]}}`}},
		{name: "deeper names are not top-level", msg: `{"params":{"id":1,"method":"x"}}`, exact: want{"", "", "", "", `{"id":1,"method":"x"}`}},
		{name: "escaped name", msg: `{"\u0069d":7,"m\u0065thod":"x"}`, exact: want{"7", `"x"`, "", "", ""}},
		{name: "escaped value kept raw", msg: `{"method":"a\u00e9\n"}`, exact: want{"", `"a\u00e9\n"`, "", "", ""}},
		{name: "escaped nested name", msg: `{"params":{"session\u0049d":"s"}}`, exact: want{"", "", `"s"`, "", `{"session\u0049d":"s"}`}},
		{name: "last duplicate wins", msg: `{"id":1,"id":2}`, exact: want{"2", "", "", "", ""}},
		{name: "duplicate parent replaces what was below", msg: `{"params":{"sessionId":"a","update":{"sessionUpdate":"x"}},"params":{"update":{}}}`,
			exact: want{"", "", "", "", `{"update":{}}`}},
		{name: "duplicate parent that is no object", msg: `{"params":{"sessionId":"a"},"params":null}`, exact: want{"", "", "", "", "null"}},
		{name: "path through a non-object", msg: `{"params":["sessionId"]}`, exact: want{"", "", "", "", `["sessionId"]`}},
		{name: "case differs", msg: `{"ID":1,"Method":"m","params":{"SessionId":"s"}}`,
			exact: want{"", "", "", "", `{"SessionId":"s"}`}, fold: want{"1", `"m"`, `"s"`, "", `{"SessionId":"s"}`}},
		{name: "case variants, last wins when folded", msg: `{"id":1,"ID":2}`, exact: want{"1", "", "", "", ""}, fold: want{"2", "", "", "", ""}},
		{name: "exact then case variant", msg: `{"ID":2,"id":1}`, exact: want{"1", "", "", "", ""}, fold: want{"1", "", "", "", ""}},
		{name: "unicode folding (Kelvin sign)", msg: `{"params":{"update":{"sessionUpdate":1}},"PARAMS":{"update":{"session\u212Apdate":2}}}`,
			exact: want{"", "", "", "1", `{"update":{"sessionUpdate":1}}`}, fold: want{"", "", "", "", `{"update":{"session\u212Apdate":2}}`}},
		{name: "unicode folding (long s)", msg: `{"params":{"ſessionId":"s"}}`,
			exact: want{"", "", "", "", `{"ſessionId":"s"}`}, fold: want{"", "", `"s"`, "", `{"ſessionId":"s"}`}},
		{name: "invalid UTF-8 is valid JSON", msg: "{\"method\":\"\xff\",\"\xfe\":1}", exact: want{"", "\"\xff\"", "", "", ""}},
		{name: "depth 10000", msg: `{"params":` + nested(MaxDepth-1, "") + `}`, exact: want{"", "", "", "", nested(MaxDepth-1, "")}},
		{name: "depth 10001", msg: `{"params":` + nested(MaxDepth, "") + `}`, err: ErrTooDeep, wantsDeep: true},
		{name: "array", msg: `[1]`, err: ErrNotObject},
		{name: "string", msg: ` "s" `, err: ErrNotObject},
		{name: "top-level depth 10000", msg: nested(MaxDepth, ""), err: ErrNotObject},
		{name: "top-level depth 10001", msg: nested(MaxDepth+1, ""), err: ErrTooDeep, wantsDeep: true},
		{name: "invalid array", msg: `[1,]`, err: ErrSyntax},
		{name: "empty", msg: ``, err: ErrSyntax},
		{name: "blank", msg: " \n", err: ErrSyntax},
		{name: "trailing data", msg: `{} {}`, err: ErrSyntax},
		{name: "trailing garbage", msg: `{}x`, err: ErrSyntax},
		{name: "trailing comma", msg: `{"a":1,}`, err: ErrSyntax},
		{name: "missing colon", msg: `{"a" 1}`, err: ErrSyntax},
		{name: "bad escape", msg: `{"a":"\x"}`, err: ErrSyntax},
		{name: "control character", msg: "{\"a\":\"\x01\"}", err: ErrSyntax},
		{name: "leading zero", msg: `{"a":01}`, err: ErrSyntax},
		{name: "bad literal", msg: `{"a":tru}`, err: ErrSyntax},
		{name: "unterminated", msg: `{"a":[`, err: ErrSyntax},
		{name: "non-string name", msg: `{1:2}`, err: ErrSyntax},
		{name: "invalid in a skipped member", msg: `{"x":{"y":[1,2,}]}}`, err: ErrSyntax},
		{name: "invalid in a picked member", msg: `{"params":{"sessionId":"s","update":{"sessionUpdate":-}}}`, err: ErrSyntax},
	} {
		for _, im := range impls {
			for _, mode := range []struct {
				name string
				set  *Paths
				want want
			}{{"exact", exact, tc.exact}, {"fold", fold, tc.fold}} {
				t.Run(tc.name+"/"+im.name+"/"+mode.name, func(t *testing.T) {
					if mode.want == nil {
						mode.want = tc.exact
					}
					var p implPicker
					got, err := im.pick(&p, []byte(tc.msg), mode.set)
					if tc.err != nil {
						require.ErrorIs(t, err, tc.err, "pick")
						require.NotEqual(t, errors.Is(err, ErrNotObject), errors.Is(err, ErrSyntax), "error %v: ErrSyntax %v, ErrNotObject %v", err, errors.Is(err, ErrSyntax), errors.Is(err, ErrNotObject))
						require.Equal(t, tc.wantsDeep, errors.Is(err, ErrTooDeep), "error %v, ErrTooDeep %v", err, errors.Is(err, ErrTooDeep))
						return
					}
					require.NoError(t, err, "pick")
					require.Len(t, got, len(mode.want), "%d values", len(got))
					for i, w := range mode.want {
						assert.Equal(t, w, string(got[i]), "%v", paths[i])
						if w == "" {
							assert.Nil(t, got[i], "%v", paths[i])
						}
					}
				})
			}
		}
	}
}

// TestPickReuse: a Picker's earlier picks leave nothing behind.
func TestPickReuse(t *testing.T) {
	for _, im := range impls {
		var p implPicker
		_, err := im.pick(&p, []byte(`{"id":"stale","params":{"sessionId":"stale","update":{"sessionUpdate":"stale"}}}`), agentSet)
		require.NoError(t, err, "pick of a whole message")
		_, err = im.pick(&p, []byte(`{`), agentSet)
		require.Error(t, err, "pick of a truncated message")
		got, err := im.pick(&p, []byte(`{"method":"m"}`), agentSet)
		require.NoError(t, err, "im.pick")
		for i, v := range got {
			if i != 1 {
				assert.Nil(t, v, "%s: %v after reuse", im.name, agentPaths[i])
			}
		}
		// Sub-slices of the message, not copies.
		msg := []byte(`{"method":"m"}`)
		got, _ = im.pick(&p, msg, agentSet)
		assert.Same(t, &msg[10], &got[1][0], "%s: the value is a sub-slice of the message", im.name)
	}
}

// TestPickHuge: a 64 MiB line, and the members after its big one.
func TestPickHuge(t *testing.T) {
	msg := bigUpdate(64 << 20)
	for _, im := range impls {
		var p implPicker
		got, err := im.pick(&p, msg, agentSet)
		require.NoError(t, err, "im.pick")
		s, _ := String(got[7])
		assert.Equal(t, "compaction_update", s, "%s: sessionUpdate %q", im.name, got[7])
		s, _ = String(got[13])
		assert.Equal(t, "completed", s, "%s: status %q", im.name, got[13])
		assert.GreaterOrEqual(t, len(got[11]), 64<<20-1000, "%s: text of %d bytes", im.name, len(got[11]))
	}
}

// TestDepthAsEncodingJSON: the nesting limit is encoding/json's.
func TestDepthAsEncodingJSON(t *testing.T) {
	for _, depth := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1, 2 * MaxDepth} {
		for _, msg := range []string{nested(depth, ""), `{"a":` + nested(depth-1, "") + `}`, `{"a":` + nested(depth-2, `{"b":1}`) + `}`} {
			valid := json.Valid([]byte(msg))
			for _, im := range impls {
				var p implPicker
				_, err := im.pick(&p, []byte(msg), agentSet)
				if assert.NotEqual(t, valid, errors.Is(err, ErrSyntax), "%s: depth %d (%.12s...): error %v, json.Valid %v", im.name, depth, msg, err, valid) {
					assert.NotEqual(t, valid, errors.Is(err, ErrTooDeep), "%s: depth %d (%.12s...): error %v, json.Valid %v", im.name, depth, msg, err, valid)
				}
			}
		}
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{`"plain"`, "plain", true},
		{`"session/update"`, "session/update", true},
		{`"init-é"`, "init-é", true},
		{`"init-\u00e9"`, "init-é", true},
		{`"a\u003cb\u0026c"`, "a<b&c", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"\ud800"`, "\ufffd", true},
		{"\"\xff\"", "\ufffd", true},
		{`""`, "", true},
		{`"\"`, "", false},
		{`"a"b"`, "", false},
		{"\"\x01\"", "", false},
		{`1`, "", false},
		{`null`, "", false},
		{``, "", false},
		{`"`, "", false},
	} {
		got, ok := String([]byte(tc.raw))
		if assert.Equal(t, tc.want, got, "String(%q) , %v", tc.raw, tc.ok) {
			assert.Equal(t, tc.ok, ok, "String(%q) , %v", tc.raw, tc.ok)
		}
		var s string
		if err := json.Unmarshal([]byte(tc.raw), &s); tc.raw != "null" {
			assert.Equal(t, tc.ok, err == nil, "String(%q): encoding/json without an error (%v)", tc.raw, err)
			if ok {
				assert.Equal(t, s, got, "String(%q) against encoding/json", tc.raw)
			}
		}
	}
	method := []byte(`"session/update"`)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = String(method) }), "String of an ACP method: allocations")
}

func TestIsNull(t *testing.T) {
	for raw, want := range map[string]bool{``: true, `null`: true, ` null `: true, `0`: false, `"null"`: false, `{}`: false} {
		assert.Equal(t, want, IsNull([]byte(raw)), "IsNull(%q) = %v", raw, !want)
	}
	assert.True(t, IsNull(nil), "IsNull(nil) = false")
}

func TestIDKey(t *testing.T) {
	same := [][2]string{
		{`"init-é"`, `"init-\u00e9"`}, // the three examples
		{`"a<b&c"`, `"a\u003cb\u0026c"`},
		{`1`, ` 1 `},
		{`"\/"`, `"/"`},
		{`null`, ``},
		{`{"a":1,"b":"é"}`, `{ "b":"\u00e9", "a":1 }`},
		{`{"a":0,"a":1}`, `{"a":1}`},
		{`[true,"x"]`, `[ true , "\u0078" ]`},
		{"\"\xff\"", `"\ufffd"`},
		{`1`, `1.0`}, // numbers by value (TestIDKeyComparesNumbersByValueAsTheClientsDo)
	}
	differ := [][2]string{
		{`1`, `"1"`}, // the issue's
		{`1`, `-1`},
		{`""`, `null`},
		{`"null"`, `null`},
		{`true`, `"true"`},
		{`[1]`, `1`},
		{`{}`, `[]`},
		{`"init-é"`, `"init-e"`},
		{`1`, `01`}, // not JSON: equal to no valid id
	}
	for _, p := range same {
		assert.Equal(t, IDKey([]byte(p[1])), IDKey([]byte(p[0])), "IDKey(%s), IDKey(%s)", p[0], p[1])
	}
	for _, p := range differ {
		assert.NotEqual(t, IDKey([]byte(p[1])), IDKey([]byte(p[0])), "IDKey(%s) = IDKey(%s)", p[0], p[1])
	}
	for raw, want := range map[string]string{
		`"init-\u00e9"`: "s:init-é", `7`: "n:7", `-1.5e3`: "n:-1500", `null`: "", `{"b":1,"a":[true]}`: `x:{"a":[true],"b":1}`, `01`: "?:01",
	} {
		assert.Equal(t, want, IDKey([]byte(raw)), "IDKey(%s)", raw)
	}
}

// TestIDKeyComparesNumbersByValueAsTheClientsDo: a numeric id is the
// double its literal rounds to, compared as a JavaScript Map compares keys
// (SameValueZero: -0 is 0) and as encoding/json's float64 compares, since
// the TypeScript SDK and Go peers decode ids that way: an agent may answer
// id 0 with 0.0 or -0, or prompt 2 with 2e0. The keys spell the double as
// JavaScript's String(number) does (Node's output, pasted).
func TestIDKeyComparesNumbersByValueAsTheClientsDo(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []string // one id, all spellings
		key  string
	}{
		{"one", []string{`1`, `1.0`, `1e0`, `1E0`, `10e-1`, `0.1e1`, `1.000000000000000000000001`, `100e-2`}, "n:1"},
		{"zero and minus zero", []string{`0`, `-0`, `0.0`, `-0.0`, `0e5`, `-0E-5`, `1e-400`, `-1e-400`}, "n:0"},
		{"the prompt", []string{`2`, `2.0`, `2e0`, `0.2e1`, `20e-1`}, "n:2"},
		{"negative", []string{`-7`, `-7.0`, `-0.7e1`}, "n:-7"},
		{"fraction", []string{`2.5`, `25e-1`, `2.50`}, "n:2.5"},
		{"2^53", []string{`9007199254740992`, `9007199254740993`, `9.007199254740993e15`}, "n:9007199254740992"},
		{"past 2^53, rounded to even", []string{`9007199254740995`, `9007199254740996`}, "n:9007199254740996"},
		{"large integer", []string{`12345678901234567890`, `12345678901234567000`, `1.234567890123456789e19`}, "n:12345678901234567000"},
		{"1e20", []string{`1e20`, `100000000000000000000`}, "n:100000000000000000000"},
		{"1e21", []string{`1e21`, `1000000000000000000000`, `10e20`}, "n:1e+21"},
		{"small", []string{`0.000001`, `1e-6`}, "n:0.000001"},
		{"smaller", []string{`1e-7`, `0.0000001`}, "n:1e-7"},
		{"tiny", []string{`1.23e-18`, `123e-20`}, "n:1.23e-18"},
		{"least subnormal", []string{`5e-324`, `4.9406564584124654e-324`}, "n:5e-324"},
		{"largest double", []string{`1.7976931348623157e308`, `1.7976931348623158e308`}, "n:1.7976931348623157e+308"},
		{"too large", []string{`1e400`, `2e400`, `1.7976931348623159e308`, `1e99999999999999999999`}, "n:Infinity"},
		{"too large, negative", []string{`-1e400`, `-1e309`}, "n:-Infinity"},
	} {
		for _, id := range tc.ids {
			assert.Equal(t, tc.key, IDKey([]byte(id)), "%s: IDKey(%s)", tc.name, id)
		}
	}
	for _, p := range [][2]string{
		{`1`, `"1"`}, {`0`, `"0"`}, {`0`, `null`}, {`0`, `false`}, {`1`, `1.0000000000000002`},
		{`9007199254740992`, `9007199254740994`}, {`1e400`, `-1e400`}, {`1.7976931348623157e308`, `1e400`},
		{`5e-324`, `0`}, {`[1]`, `1`}, {`2`, `"2.0"`},
	} {
		assert.NotEqual(t, IDKey([]byte(p[1])), IDKey([]byte(p[0])), "IDKey(%s) = IDKey(%s)", p[0], p[1])
	}
	// One allocation, the key (strconv allocates its range error for a
	// number out of a double's range).
	for _, raw := range []string{`7`, `-0`, `2.0`, `1e300`, `12345678901234567890`, `"prompt-7"`} {
		b := []byte(raw)
		n := testing.AllocsPerRun(100, func() { keySink = IDKey(b) })
		assert.LessOrEqual(t, n, float64(1), "IDKey(%s): %v allocations", raw, n)
	}
}

func TestReadHead(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want Head
		err  error
	}{
		{msg: `{"jsonrpc":"2.0","method":"session/update","params":{}}`, want: Head{Method: "session/update", HasMethod: true}},
		{msg: `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"id":null}}`, want: Head{Method: "session/prompt", HasMethod: true, HasID: true}},
		{msg: `{"id":null,"method":"x"}`, want: Head{Method: "x", HasMethod: true}},
		{msg: `{"id":0,"result":{"method":"x"}}`, want: Head{HasID: true}},
		{msg: `{"m\u0065thod":"session\/update","\u0069d":"1"}`, want: Head{Method: "session/update", HasMethod: true, HasID: true}},
		{msg: `{"Method":"a","METHOD":"b","Id":2}`, want: Head{Method: "b", HasMethod: true, HasID: true}},
		{msg: `{"method":"a","id":1,"id":null}`, want: Head{Method: "a", HasMethod: true}},
		{msg: `{"method":5}`, want: Head{}},
		{msg: `{"method":null}`, want: Head{}},
		{msg: `{"method":"a","x":[}`, err: ErrSyntax},
		{msg: `[{"method":"a"}]`, err: ErrNotObject},
	} {
		for _, im := range impls {
			got, err := im.head([]byte(tc.msg))
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err, "%s: ReadHead(%s) error", im.name, tc.msg)
				continue
			}
			if assert.NoError(t, err, "%s: ReadHead(%s)", im.name, tc.msg) {
				assert.Equal(t, tc.want, got, "%s: ReadHead(%s)", im.name, tc.msg)
			}
		}
		got, err := ReadHead([]byte(tc.msg))
		if assert.Equal(t, tc.want, got, "ReadHead(%s), %v", tc.msg, err) {
			assert.ErrorIs(t, err, tc.err, "ReadHead(%s), %v", tc.msg, err)
		}
	}
	// As the kits' envelope decoding reads it.
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	msg := []byte(`{"Method":"a","METHOD":"b","Id":2}`)
	err := json.Unmarshal(msg, &env)
	if assert.NoError(t, err, "encoding/json reads %+v, %v", env, err) {
		if assert.Equal(t, "b", env.Method, "encoding/json reads %+v, %v", env, err) {
			assert.Equal(t, "2", string(env.ID), "encoding/json reads %+v, %v", env, err)
		}
	}
}

func TestAllocs(t *testing.T) {
	line := smallUpdate()
	for _, im := range impls {
		var p implPicker
		_, _ = im.pick(&p, line, agentSet)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = im.pick(&p, line, agentSet) }), "%s: Pick: allocations", im.name)
		if n := testing.AllocsPerRun(100, func() { _, _ = im.head(line) }); !(raceEnabled && im.name == "jsontext") {
			assert.Zero(t, n, "%s: ReadHead: allocations", im.name)
		}
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = ReadHead(line) }), "ReadHead: allocations")

}

// smallUpdate is a 200-byte agent_message_chunk.
func smallUpdate() []byte {
	head := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	tail := `"}}}}`
	text := strings.Repeat("The user is updating the ACP schema. ", 10)[:200-len(head)-len(tail)]
	return []byte(head + text + tail)
}

// bigUpdate is a compaction_update whose summary makes a line of about n
// bytes, with members after it.
func bigUpdate(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","content":{"type":"text","text":"`)
	para := "## Summary\\n\\nThe user is refactoring the ACP schema: \\\"keep the retained context short\\\"; files touched: a.go, b.go. Café — naïve ☕.\\n"
	for b.Len() < n-200 {
		b.WriteString(para)
	}
	b.WriteString(`"},"status":"completed","trigger":"auto","tokensBefore":180000,"tokensAfter":21000}}}`)
	return b.Bytes()
}

// TestStringEveryByte: each byte value, at each offset from a word
// boundary, inside a string, is judged as encoding/json judges it (the
// skimmer reads strings eight bytes at a time).
func TestStringEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 18; pos++ {
			msg := []byte(`{"k":"` + strings.Repeat("a", pos) + string(rune(0)) + strings.Repeat("b", 9) + `"}`)
			msg[6+pos] = byte(c)
			for _, im := range impls {
				var p implPicker
				_, err := im.pick(&p, msg, agentSet)
				require.Equal(t, json.Valid(msg), err == nil, "%s: %q: error %v, json.Valid %v", im.name, msg, err, json.Valid(msg))
			}
		}
	}
}
