package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var skimSeeds = []string{
	`{}`, ` {"a":1} `, `{"id":1,"method":"x","params":{"sessionId":"s"}}`,
	`{"id":"1","result":null}`, `{"a":[1,2,{"b":[]}],"c":"\u00e9\n\"x\""}`,
	`{"a":-0.5e+10,"b":true,"c":false,"d":null}`, `{"\u0069d":7}`, `{"id":1,"id":2}`,
	`[1]`, `"s"`, `{"a":01}`, `{"a":1,}`, `{"a" 1}`, `{"a":"\x"}`, `{"a":"` + "\x01" + `"}`,
	`{"a":tru}`, `{"a":1} x`, `{"a":"\ud800"}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{`, `{"a":[}`,
	strings.Repeat(`[`, maxDepth) + strings.Repeat(`]`, maxDepth),
	`{"a":` + strings.Repeat(`[`, maxDepth) + strings.Repeat(`]`, maxDepth) + `}`,
	"{\"a\":\"\xff\xfe\"}", `{"a":"\/\b\f\n\r\t"}`, `{"a":"\u12G4"}`,
}

// FuzzMembers holds the skimmer to encoding/json: it accepts exactly the
// objects json.Valid accepts, and finds the same member values.
func FuzzProxyMembers(f *testing.F) {
	for _, s := range skimSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := members(b, "id", "a", "params")
		trimmed := bytes.TrimSpace(b)
		isObject := len(trimmed) > 0 && trimmed[0] == '{'
		valid := json.Valid(b) && isObject
		if (err == nil) != valid {
			t.Fatalf("members(%q) error %v, json.Valid %v (object %v)", b, err, json.Valid(b), isObject)
		}
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", b, err)
		}
		for i, name := range []string{"id", "a", "params"} {
			want, ok := exactMember(b, name)
			if !ok {
				continue // encoding/json matched a case-variant we do not
			}
			if !bytes.Equal(got[i], want) {
				t.Fatalf("member %q of %q: got %q, want %q", name, b, got[i], want)
			}
		}
	})
}

// exactMember finds the last member named exactly name with a
// json.Decoder, the reference reading.
func exactMember(b []byte, name string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var found []byte
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		if k, _ := tok.(string); k == name {
			found = raw
		}
	}
	return found, true
}

// FuzzPick holds the one-pass nested pick to members applied level by
// level.
func FuzzProxyPick(f *testing.F) {
	for _, s := range skimSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"params":{"sessionId":"s","update":{"sessionUpdate":"x","params":1}},"id":3}`))
	f.Add([]byte(`{"params":{"update":{"sessionUpdate":"x"}},"params":{"sessionId":"t"}}`))
	f.Add([]byte(`{"params":{"update":{"sessionUpdate":"x"}},"params":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := pick(b, []string{"id"}, []string{"params"}, []string{"params", "sessionId"},
			[]string{"params", "update"}, []string{"params", "update", "sessionUpdate"})
		_, merr := members(b, "id")
		if (err == nil) != (merr == nil) {
			t.Fatalf("pick(%q) error %v, members error %v", b, err, merr)
		}
		if err != nil {
			return
		}
		// A reused picker (as each pump keeps one) gives the same answer
		// after picking from something else.
		var reused picker
		_, _ = reused.pick([]byte(`{"params":{"update":{"sessionUpdate":"stale"}},"id":"stale"}`), envelopePaths...)
		again, err := reused.pick(b, []string{"id"}, []string{"params"}, []string{"params", "sessionId"},
			[]string{"params", "update"}, []string{"params", "update", "sessionUpdate"})
		if err != nil {
			t.Fatalf("reused picker: %v", err)
		}
		for i := range got {
			if !bytes.Equal(got[i], again[i]) {
				t.Fatalf("reused picker [%d] = %q, fresh %q", i, again[i], got[i])
			}
		}
		params := field(b, "params")
		update := field(params, "update")
		want := [][]byte{field(b, "id"), params, field(params, "sessionId"), update, field(update, "sessionUpdate")}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("pick(%q)[%d] = %q, want %q", b, i, got[i], want[i])
			}
		}
	})
}

func TestProxyMembersMatchesDecoderOnSeeds(t *testing.T) {
	for _, s := range skimSeeds {
		got, err := members([]byte(s), "id", "a")
		if (err == nil) != (json.Valid([]byte(s)) && strings.HasPrefix(strings.TrimSpace(s), "{")) {
			t.Errorf("%q: err %v", s, err)
		}
		if err == nil && s == `{"id":1,"id":2}` && string(got[0]) != "2" {
			t.Errorf("a repeated member keeps its last value, got %s", got[0])
		}
		if err == nil && s == `{"\u0069d":7}` && string(got[0]) != "7" {
			t.Errorf("an escaped member name matches, got %q", got[0])
		}
	}
}

func BenchmarkParse64MiB(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("abcdefgh", 8<<20) + `"}}}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := parse(line); err != nil {
			b.Fatal(err)
		}
	}
}
