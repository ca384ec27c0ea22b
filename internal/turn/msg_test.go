package turn

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParseReadsWhatTheEngineFollows(t *testing.T) {
	m, ok := Parse([]byte(`{"jsonrpc":"2.0","id":"p\u00e9","method":"session/prompt","params":{"sessionId":"s","_meta":{"traceparent":"tp"}}}`))
	if !ok {
		t.Fatal("Parse of a prompt: not a message")
	}
	if m.Method != "session/prompt" {
		t.Errorf("prompt: Method = %q, want %q", m.Method, "session/prompt")
	}
	if want := skimKey(`"pé"`); m.ID != want {
		t.Errorf("prompt: ID = %q, want %q (the id's JSON value)", m.ID, want)
	}
	if m.SessionID != "s" {
		t.Errorf("prompt: SessionID = %q, want %q", m.SessionID, "s")
	}
	if m.Trace.Traceparent != "tp" {
		t.Errorf("prompt: Traceparent = %q, want %q", m.Trace.Traceparent, "tp")
	}

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`))
	if !ok {
		t.Fatal("Parse of a state_update: not a message")
	}
	if m.State != "idle" {
		t.Errorf("state_update: State = %q, want %q", m.State, "idle")
	}

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"state_update"}}}}`))
	if !ok {
		t.Fatal("Parse of a chunk: not a message")
	}
	if m.State != "" {
		t.Errorf("a chunk that mentions state_update: State = %q, want none", m.State)
	}

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`))
	if !ok {
		t.Fatal("Parse of an error response: not a message")
	}
	if !m.IsResponse() {
		t.Error("an error response: IsResponse = false")
	}
	if !m.Failed {
		t.Error("an error response: Failed = false")
	}

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a\u003c"}}`))
	if !ok {
		t.Fatal("Parse of a $/cancel_request: not a message")
	}
	if want := skimKey(`"a<"`); m.RequestID != want {
		t.Errorf("$/cancel_request: RequestID = %q, want %q (the id's JSON value)", m.RequestID, want)
	}

	if _, ok = Parse([]byte(`{"jsonrpc":"2.0","id":1,`)); ok {
		t.Error("Parse of truncated JSON: ok = true, want false")
	}
	if _, ok = Parse([]byte(`[{"jsonrpc":"2.0"}]`)); ok {
		t.Error("Parse of a batch: ok = true, want false (a batch is read with Batch)")
	}
}

func TestParseMatchesNamesAsTheGoStacksDo(t *testing.T) {
	// encoding/json, which both Go stacks decode with, matches member
	// names case-insensitively: the engine must see the prompt the stack
	// dispatches.
	m, ok := Parse([]byte(`{"jsonrpc":"2.0","ID":7,"Method":"session/prompt","Params":{"SessionId":"s"}}`))
	if !ok {
		t.Fatal("Parse: not a message")
	}
	if m.Method != "session/prompt" {
		t.Errorf("Method = %q, want %q", m.Method, "session/prompt")
	}
	if want := skimKey(`7`); m.ID != want {
		t.Errorf("ID = %q, want %q", m.ID, want)
	}
	if m.SessionID != "s" {
		t.Errorf("SessionID = %q, want %q", m.SessionID, "s")
	}
}

func TestBatchVisitsEachMessage(t *testing.T) {
	var got []string
	ok := Batch([]byte(` [{"a":1}, {"b":2}]`), func(e []byte) { got = append(got, string(e)) })
	if !ok {
		t.Fatal("Batch of a valid array: ok = false")
	}
	if want := []string{`{"a":1}`, `{"b":2}`}; !slices.Equal(got, want) {
		t.Errorf("Batch visited %q, want %q", got, want)
	}
	if Batch([]byte(`[{"a":1},`), func([]byte) {}) {
		t.Error("Batch of a truncated array: ok = true, want false")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`,
		`[1,2]`, `{}`, `null`, `{"id":{"a":[1]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, ok := Parse(msg)
		if !ok {
			return
		}
		if !json.Valid(msg) {
			t.Fatalf("Parse accepted invalid JSON %q", msg)
		}
		// Whatever a message says, feeding it to an engine never panics.
		e := New(Config{CancelGrace: -1})
		e.Client(&m)
		e.Ended(e.Agent(&m).End)
	})
}
