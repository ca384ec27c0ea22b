package conformance_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsFacts are what node v20.20.2 prints for
// JSON.parse(new TextDecoder().decode(bytes)) (the official TypeScript
// SDK's ndJsonStream decodes a line so), as UTF-16 code units, measured
// with the script of nodeUnits. nil: JSON.parse throws.
var jsFacts = []struct {
	raw   string
	units []uint16
}{
	{`"\ud800"`, []uint16{0xd800}},
	{`"\udc00"`, []uint16{0xdc00}},                      // another lone surrogate: another string
	{`"a\ud800\udc00"`, []uint16{0x61, 0xd800, 0xdc00}}, // a pair: U+10000
	{`"\uD83D\uDE00"`, []uint16{0xd83d, 0xde00}},        // escapes in either case
	{"\"\U0001F600\"", []uint16{0xd83d, 0xde00}},        // the same as raw UTF-8
	{"\"\xff\"", []uint16{0xfffd}},
	{"\"\xfe\"", []uint16{0xfffd}},                         // one string with the above
	{"\"\xe2\x82\"", []uint16{0xfffd}},                     // a sequence cut short: one U+FFFD
	{"\"\xff\xff\"", []uint16{0xfffd, 0xfffd}},             // two bytes: two
	{"\"\xed\xa0\x80\"", []uint16{0xfffd, 0xfffd, 0xfffd}}, // an encoded surrogate: three
	{"\"\xf0\x9f\x98\"", []uint16{0xfffd}},
	{"\"\xc0\xaf\"", []uint16{0xfffd, 0xfffd}},                         // overlong
	{"\"\xf4\x90\x80\x80\"", []uint16{0xfffd, 0xfffd, 0xfffd, 0xfffd}}, // past U+10FFFF
	{"\"\xe0\x80\"", []uint16{0xfffd, 0xfffd}},
	{"\"\xe2\x82A\"", []uint16{0xfffd, 0x41}},
	{`"tab\tq\"\\\/"`, []uint16{'t', 'a', 'b', '\t', 'q', '"', '\\', '/'}},
	{"\"a\tb\"", nil}, // a raw control character
	{`"\x41"`, nil},   // not a JSON escape
	{`"\u12"`, nil},   // a short \u
	{`"\u+123"`, nil}, // not hex
	{`12`, nil},       // no string
	{`"open`, nil},
}

// TestJSStringsAsJSONParseDecodesThem: the checker's reading of an ID is
// JSON.parse's, for the recorded facts.
func TestJSStringsAsJSONParseDecodesThem(t *testing.T) {
	for _, f := range jsFacts {
		units, ok := conformance.JSUnits([]byte(f.raw))
		if f.units == nil {
			assert.False(t, ok, "%q: JSON.parse throws, the checker read %x", f.raw, units)
			continue
		}
		if assert.True(t, ok, "%q", f.raw) {
			assert.Equal(t, f.units, units, "%q", f.raw)
		}
	}
}

// TestJSKeysAreOneExactlyWhenTheStringsAre: two IDs are one to the
// checker exactly when JSON.parse makes them the same string, and the key
// of an ID without lone surrogates or invalid UTF-8 is Go's decoding.
func TestJSKeysAreOneExactlyWhenTheStringsAre(t *testing.T) {
	var raws [][]byte
	for _, f := range jsFacts {
		raws = append(raws, []byte(f.raw))
	}
	raws = append(raws, jsCorpus(500)...)
	type read struct {
		key   string
		units []uint16
	}
	var reads []read
	for _, a := range raws {
		key, ok := conformance.JSKey(a)
		units, _ := conformance.JSUnits(a)
		if !ok {
			continue
		}
		reads = append(reads, read{key, units})
		var s string
		if utf8.Valid(a) && json.Unmarshal(a, &s) == nil && !strings.ContainsRune(s, utf8.RuneError) {
			assert.Equal(t, s, key, "%q", a)
		}
	}
	for _, a := range reads {
		for _, b := range reads {
			require.Equal(t, slices.Equal(a.units, b.units), a.key == b.key, "%x and %x: keys %q and %q", a.units, b.units, a.key, b.key)
		}
	}
}

// TestJSStringsMatchNode asks node itself, when it is on PATH, about the
// recorded facts and 2,000 generated strings (escapes, lone and paired
// surrogates, invalid UTF-8 of every kind).
func TestJSStringsMatchNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH; TestJSStringsAsJSONParseDecodesThem holds what it printed")
	}
	var raws [][]byte
	for _, f := range jsFacts {
		raws = append(raws, []byte(f.raw))
	}
	raws = append(raws, jsCorpus(2000)...)
	got := nodeUnits(t, node, raws)
	for i, raw := range raws {
		units, ok := conformance.JSUnits(raw)
		if got[i] == nil {
			assert.False(t, ok, "%q: JSON.parse throws, the checker read %x", raw, units)
			continue
		}
		if assert.True(t, ok, "%q: JSON.parse reads %x", raw, got[i]) {
			assert.Equal(t, got[i], units, "%q", raw)
		}
	}
}

// nodeUnits runs node on raws (JSON string values as bytes) and returns,
// for each, the UTF-16 code units of
// JSON.parse(new TextDecoder().decode(raw)), or nil where it throws or
// gives no string.
func nodeUnits(t *testing.T, node string, raws [][]byte) [][]uint16 {
	t.Helper()
	const script = `
let input = "";
process.stdin.on("data", (d) => { input += d; });
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((b64) => {
    try {
      const v = JSON.parse(new TextDecoder().decode(Buffer.from(b64, "base64")));
      if (typeof v !== "string") return null;
      return Array.from({ length: v.length }, (_, i) => v.charCodeAt(i));
    } catch { return null; }
  });
  process.stdout.write(JSON.stringify(out));
});`
	enc := make([]string, len(raws))
	for i, r := range raws {
		enc[i] = base64.StdEncoding.EncodeToString(r)
	}
	in, err := json.Marshal(enc)
	require.NoError(t, err)
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	require.NoError(t, err, "node")
	var res [][]uint16
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res, len(raws))
	return res
}

// jsCorpus returns n JSON string values, generated from a fixed seed:
// ASCII, escapes of every kind (surrogates lone, paired and reversed),
// multi-byte UTF-8 and invalid byte sequences, and a few broken ones.
func jsCorpus(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Z", "_", "0", " ", `\"`, `\\`, `\/`, `\n`, `\t`, `\u0041`, `\u00e9`, "é", "€", "\U0001F600",
		`\ud800`, `\udbff`, `\udc00`, `\udfff`, `\uD83D\uDE00`, `\ude00\ud83d`, "\xff", "\xfe", "\xc0", "\xc2", "\xe2\x82", "\xe0\x80",
		"\xed\xa0\x80", "\xed\x9f\xbf", "\xf0\x9f\x98", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5", "\x80", "\xbf"}
	out := make([][]byte, 0, n)
	for range n {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		switch rng.IntN(40) {
		case 0:
			b.WriteString(`\u12`) // broken escape
		case 1:
			b.WriteByte('\t') // raw control character
		}
		if rng.IntN(50) != 0 {
			b.WriteByte('"')
		}
		out = append(out, []byte(b.String()))
	}
	return out
}

// FuzzJSString reads arbitrary bytes as an ID (seeds in
// testdata/fuzz/FuzzJSString): it never panics, takes what encoding/json
// takes as a string and nothing else, and where the bytes are UTF-8
// without surrogate escapes reads what encoding/json reads.
func FuzzJSString(f *testing.F) {
	for _, fact := range jsFacts {
		f.Add([]byte(fact.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		key, ok := conformance.JSKey(raw)
		var s string
		goOK := json.Unmarshal(raw, &s) == nil && bytes.HasPrefix(bytes.TrimLeft(raw, " \t\n\r"), []byte(`"`))
		require.Equal(t, goOK, ok, "%q: the checker reads a string; encoding/json", raw)
		if ok && utf8.Valid(raw) && !surrogateEscape(raw) {
			require.Equal(t, s, key, "%q: key against encoding/json", raw)
		}

	})
}

// surrogateEscape reports a \uD800-\uDFFF escape in raw.
func surrogateEscape(raw []byte) bool {
	l := bytes.ToLower(raw)
	for i := 0; i+3 < len(l); i++ {
		if l[i] == '\\' && l[i+1] == 'u' && l[i+2] == 'd' && strings.IndexByte("89abcdef", l[i+3]) >= 0 {
			return true
		}
	}
	return false
}
