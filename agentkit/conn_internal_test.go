package agentkit

import (
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
)

// Only notifications that end no turn and are fully encoded skip the tap's
// look at their bytes.
func TestPassableNotifications(t *testing.T) {
	params := func(s string) *json.RawMessage { r := json.RawMessage(s); return &r }
	for _, tc := range []struct {
		name string
		req  *jsonrpc2.Request
		want bool
	}{
		{"agent message", &jsonrpc2.Request{Method: "session/update", Notif: true, Params: params(`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk"}}`)}, true},
		{"other notification", &jsonrpc2.Request{Method: "x/y", Notif: true, Params: params(`{"a":"state_update"}`)}, true},
		{"no params", &jsonrpc2.Request{Method: "session/update", Notif: true}, true},
		{"v2 state_update", &jsonrpc2.Request{Method: "session/update", Notif: true, Params: params(`{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}`)}, false},
		{"request", &jsonrpc2.Request{Method: "session/request_permission", ID: jsonrpc2.ID{Num: 3}}, false},
		{"extra fields", &jsonrpc2.Request{Method: "x/y", Notif: true, ExtraFields: []jsonrpc2.RequestField{{Name: "k", Value: 1}}}, false},
		{"a response (no request)", nil, false},
	} {
		assert.Equal(t, tc.want, passable(tc.req), "%s: passable", tc.name)
	}
}
