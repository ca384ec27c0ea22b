package fallback

import (
	"encoding/json"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// The v1 session updates the renderers send. Field order is fixed by the
// structs and _meta keys are sorted by encoding/json, so the wire is
// deterministic and golden files stay stable.

type agentMessageChunk struct {
	SessionUpdate string                `json:"sessionUpdate"`
	Content       protocol.ContentBlock `json:"content"`
	Meta          protocol.Meta         `json:"_meta,omitempty"`
}

func messageChunk(b protocol.ContentBlock, meta protocol.Meta) *agentMessageChunk {
	return &agentMessageChunk{SessionUpdate: "agent_message_chunk", Content: b, Meta: meta}
}

type sessionInfoUpdate struct {
	SessionUpdate string        `json:"sessionUpdate"`
	Meta          protocol.Meta `json:"_meta"`
}

type toolCallContent struct {
	Type    string                `json:"type"`
	Content protocol.ContentBlock `json:"content"`
}

type toolCall struct {
	SessionUpdate string            `json:"sessionUpdate"`
	ToolCallID    string            `json:"toolCallId"`
	Title         string            `json:"title"`
	Kind          string            `json:"kind"`
	Status        string            `json:"status"`
	Content       []toolCallContent `json:"content,omitempty"`
	Meta          protocol.Meta     `json:"_meta,omitempty"`
}

type toolCallUpdate struct {
	SessionUpdate string `json:"sessionUpdate"`
	ToolCallID    string `json:"toolCallId"`
	Status        string `json:"status,omitempty"`
	// Content replaces the tool call's whole content collection, so the
	// omitted state (keep) must stay distinct from an empty one (clear).
	Content protocol.Patch[[]toolCallContent] `json:"content,omitzero"`
	Meta    protocol.Meta                     `json:"_meta,omitempty"`
}

// Tool call statuses of ACP v1. There is no cancelled status, which is why
// a cancel settles as failed.
const (
	toolInProgress = "in_progress"
	toolCompleted  = "completed"
	toolFailed     = "failed"
)

// withMeta returns a new _meta holding ev's keys plus key=value. The event's
// map is shared with the emitter, its observer and the other renderers of a
// composition, so it is copied, never written. The renderer's own key wins a
// collision: a fallback client must always find the marker.
func withMeta(base protocol.Meta, key string, value json.RawMessage) protocol.Meta {
	out := make(protocol.Meta, len(base)+1)
	for k, v := range base {
		out[k] = v
	}
	if key != "" {
		out[key] = value
	}
	return out
}

// copyMeta returns ev's _meta for a carrier without a key of its own, or
// nil so that the field is left out.
func copyMeta(base protocol.Meta) protocol.Meta {
	if len(base) == 0 {
		return nil
	}
	return withMeta(base, "", nil)
}

// errorText returns the user-facing error text of a terminal event. Event.Err
// is never used: it may hold detail unfit for the user.
func errorText(ev emitter.Event) string {
	s, _ := ev.Error.Get()
	return strings.TrimSpace(s)
}

// isGenericFailure reports whether reason only repeats that compaction
// failed (the emitter's generic text for defects), so that wording such as
// "Compacting failed: {error}" does not print "Compacting failed:
// Compaction failed".
func isGenericFailure(reason string, bare ...string) bool {
	norm := func(s string) string { return strings.ToLower(strings.TrimRight(strings.TrimSpace(s), ".!")) }
	r := norm(reason)
	if r == "" || r == "compaction failed" || r == "compacting failed" {
		return true
	}
	for _, b := range bare {
		if r == norm(b) {
			return true
		}
	}
	return false
}

// appendBlock appends b to bs, merging adjacent plain text blocks: a client
// shows streamed text chunks as one text anyway, and merging keeps both the
// renderer's memory and the number of updates it sends small.
func appendBlock(bs []protocol.ContentBlock, b protocol.ContentBlock) []protocol.ContentBlock {
	if n := len(bs); n > 0 && plainText(bs[n-1]) && plainText(b) {
		bs[n-1].Text += b.Text
		return bs
	}
	return append(bs, b)
}

func plainText(b protocol.ContentBlock) bool { return b.Type == "text" && len(b.Extra) == 0 }

func mergeBlocks(bs []protocol.ContentBlock) []protocol.ContentBlock {
	var out []protocol.ContentBlock
	for _, b := range bs {
		out = appendBlock(out, b)
	}
	return out
}
