package turn

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseReadsWhatTheEngineFollows(t *testing.T) {
	m, ok := Parse([]byte(`{"jsonrpc":"2.0","id":"p\u00e9","method":"session/prompt","params":{"sessionId":"s","_meta":{"traceparent":"tp"}}}`))
	require.True(t, ok, "Parse of a prompt: not a message")
	assert.Equal(t, "session/prompt", m.Method, "prompt: Method")
	assert.Equal(t, skimKey(`"pé"`), m.ID, "prompt: ID (the id's JSON value)")
	assert.Equal(t, "s", m.SessionID, "prompt: SessionID")
	assert.Equal(t, "tp", m.Trace.Traceparent, "prompt: Traceparent")

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`))
	require.True(t, ok, "Parse of a state_update: not a message")
	assert.Equal(t, "idle", m.State, "state_update: State")

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"state_update"}}}}`))
	require.True(t, ok, "Parse of a chunk: not a message")
	assert.Empty(t, m.State, "a chunk that mentions state_update: State")

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`))
	require.True(t, ok, "Parse of an error response: not a message")
	assert.True(t, m.IsResponse(), "an error response: IsResponse = false")
	assert.True(t, m.Failed, "an error response: Failed = false")

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a\u003c"}}`))
	require.True(t, ok, "Parse of a $/cancel_request: not a message")
	assert.Equal(t, skimKey(`"a<"`), m.RequestID, "$/cancel_request: RequestID (the id's JSON value)")

	_, ok = Parse([]byte(`{"jsonrpc":"2.0","id":1,`))
	assert.False(t, ok, "Parse of truncated JSON: ok = true, want false")
	_, ok = Parse([]byte(`[{"jsonrpc":"2.0"}]`))
	assert.False(t, ok, "Parse of a batch: ok = true, want false (a batch is read with Batch)")
}

func TestParseMatchesNamesAsTheGoStacksDo(t *testing.T) {
	// encoding/json, which both Go stacks decode with, matches member
	// names case-insensitively: the engine must see the prompt the stack
	// dispatches.
	m, ok := Parse([]byte(`{"jsonrpc":"2.0","ID":7,"Method":"session/prompt","Params":{"SessionId":"s"}}`))
	require.True(t, ok, "Parse: not a message")
	assert.Equal(t, "session/prompt", m.Method, "Method")
	assert.Equal(t, skimKey(`7`), m.ID, "ID")
	assert.Equal(t, "s", m.SessionID, "SessionID")
}

func TestBatchVisitsEachMessage(t *testing.T) {
	var got []string
	ok := Batch([]byte(` [{"a":1}, {"b":2}]`), func(e []byte) { got = append(got, string(e)) })
	require.True(t, ok, "Batch of a valid array: ok = false")
	assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, got, "Batch visited")
	assert.False(t, Batch([]byte(`[{"a":1},`), func([]byte) {}), "Batch of a truncated array: ok = true, want false")
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
		require.True(t, json.Valid(msg), "Parse accepted invalid JSON %q", msg)
		// Whatever a message says, feeding it to an engine never panics.
		e := New(Config{CancelGrace: -1})
		e.Client(&m)
		e.Ended(e.Agent(&m).End)
	})
}
