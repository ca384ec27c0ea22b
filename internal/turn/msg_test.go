package turn

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseReadsWhatTheEngineFollows(t *testing.T) {
	m, ok := Parse([]byte(`{"jsonrpc":"2.0","id":"p\u00e9","method":"session/prompt","params":{"sessionId":"s","_meta":{"traceparent":"tp"}}}`))
	require.True(t, ok)
	assert.Equal(t, "session/prompt", m.Method)
	assert.Equal(t, skimKey(`"pé"`), m.ID)
	assert.Equal(t, "s", m.SessionID)
	assert.Equal(t, "tp", m.Trace.Traceparent)

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`))
	require.True(t, ok)
	assert.Equal(t, "idle", m.State)

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"state_update"}}}}`))
	require.True(t, ok)
	assert.Empty(t, m.State, "a chunk that mentions state_update is no state_update")

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`))
	require.True(t, ok)
	assert.True(t, m.IsResponse())
	assert.True(t, m.Failed)

	m, ok = Parse([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a\u003c"}}`))
	require.True(t, ok)
	assert.Equal(t, skimKey(`"a<"`), m.RequestID)

	_, ok = Parse([]byte(`{"jsonrpc":"2.0","id":1,`))
	assert.False(t, ok)
	_, ok = Parse([]byte(`[{"jsonrpc":"2.0"}]`))
	assert.False(t, ok, "a batch is read with Batch")
}

func TestParseMatchesNamesAsTheGoStacksDo(t *testing.T) {
	// encoding/json, which both Go stacks decode with, matches member
	// names case-insensitively: the engine must see the prompt the stack
	// dispatches.
	m, ok := Parse([]byte(`{"jsonrpc":"2.0","ID":7,"Method":"session/prompt","Params":{"SessionId":"s"}}`))
	require.True(t, ok)
	assert.Equal(t, "session/prompt", m.Method)
	assert.Equal(t, skimKey(`7`), m.ID)
	assert.Equal(t, "s", m.SessionID)
}

func TestBatchVisitsEachMessage(t *testing.T) {
	var got []string
	ok := Batch([]byte(` [{"a":1}, {"b":2}]`), func(e []byte) { got = append(got, string(e)) })
	require.True(t, ok)
	assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, got)
	assert.False(t, Batch([]byte(`[{"a":1},`), func([]byte) {}))
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
