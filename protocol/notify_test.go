package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AppendNotification over MarshalUpdate writes exactly what the generic
// encoding of the envelope writes, into a fresh or a used buffer.
func TestAppendNotificationMatchesEncodingJSON(t *testing.T) {
	generic := func(sessionID string, update any) ([]byte, error) {
		type params struct {
			SessionID string `json:"sessionId"`
			Update    any    `json:"update"`
		}
		return json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			Params  params `json:"params"`
		}{"2.0", "session/update", params{sessionID, update}})
	}
	var nilUpdate *CompactionUpdate
	updates := []any{
		&CompactionSummaryChunk{CompactionID: "cmp_1", Content: Text("## a <b> & \u2028 \xff\n")},
		CompactionUpdate{CompactionID: "cmp_1", Status: Failed, Error: Set("boom <")},
		UsageUpdate{Used: 10, Size: 100},
		map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "<&>"}},
		nilUpdate, nil,
	}
	for _, sid := range append(jsonStrings, "sess_1") {
		for _, u := range updates {
			want, err := generic(sid, u)
			require.NoError(t, err, "generic")
			b, err := MarshalUpdate(u)
			require.NoError(t, err, "MarshalUpdate")
			assert.Equal(t, string(want), string(AppendNotification(nil, sid, b)), "%q %T", sid, u)
			got := AppendNotification([]byte("x\n"), sid, b)
			assert.Equal(t, "x\n"+string(want), string(got), "%q %T appended: got %s", sid, u, got)
		}
	}
}

// AppendBlocks writes what json.Marshal writes for the slice, plain blocks
// and blocks with verbatim extra members alike.
func TestAppendBlocksIsWhatJSONMarshalWrites(t *testing.T) {
	blocks := []ContentBlock{
		Text("a <b> & \"c\"\n\x01\xff"),
		{Type: "resource_link", Extra: map[string]json.RawMessage{"uri": json.RawMessage(` "file:///x<y>" `), "name": json.RawMessage(`{ "a" : 1 }`)}},
	}
	want, err := json.Marshal(blocks)
	require.NoError(t, err, "json.Marshal")
	got, err := AppendBlocks(nil, blocks)
	require.NoError(t, err, "AppendBlocks")
	assert.Equal(t, string(want), string(got), "AppendBlocks\n%s\n%s", got, want)
}
