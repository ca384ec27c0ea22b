package fallback_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

// v1NoCapability is the connection every fallback exists for: a v1 client
// whose initialize did not advertise clientCapabilities.session.compaction.
var v1NoCapability = capability.Negotiation{Version: capability.V1}

// newFallbackEmitter returns an emitter for a v1 client without the
// capability that renders with r into a recorder.
func newFallbackEmitter(t testing.TB, r emitter.Renderer, opts ...emitter.Option) (*emitter.Emitter, *wiretest.Recorder) {
	t.Helper()
	rec := &wiretest.Recorder{}
	all := append([]emitter.Option{
		emitter.WithNegotiation(v1NoCapability),
		emitter.WithFallback(r),
	}, opts...)
	em := emitter.New(rec, all...)
	require.Equal(t, capability.Fallback, em.Mode(), "mode ; a v1 client without the capability must get the fallback")
	return em, rec
}

// schemaV1 returns the official v1 validator; without the installed schema
// the schema assertions are skipped, or fail under
// ACPCOMPACT_REQUIRE_SCHEMA=1 (see schematest).
func schemaV1(t testing.TB) *acpschema.Validator {
	t.Helper()
	return schematest.For(t, 1)
}

// requireValidV1 validates each line's params (sessionId plus update) and
// its update against the official v1 schema.
func requireValidV1(t testing.TB, lines [][]byte) {
	t.Helper()
	v := schemaV1(t)
	for _, l := range lines {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		require.NoError(t, json.Unmarshal(l, &msg), "line %s", l)
		require.Equal(t, "2.0", msg.JSONRPC, "jsonrpc in %s", l)
		require.Equal(t, "session/update", msg.Method, "method in %s", l)
		require.NoError(t, v.Notification(msg.Params), "params of %s", l)
		require.NoError(t, v.Update(wiretest.RawUpdate(l)), "update of %s", l)
	}
}

// requireNoStandardUpdates is the capability gate: a client that did not
// advertise the capability never receives a compaction update.
func requireNoStandardUpdates(t testing.TB, updates []map[string]any) {
	t.Helper()
	for _, u := range updates {
		kind := u["sessionUpdate"]
		require.NotEqual(t, protocol.KindUpdate, kind, "%v sent to a client without the capability: %v", kind, u)
		require.NotEqual(t, protocol.KindSummaryChunk, kind, "%v sent to a client without the capability: %v", kind, u)
	}
}

// kinds lists the sessionUpdate discriminators of updates.
func kinds(updates []map[string]any) []string {
	out := make([]string, 0, len(updates))
	for _, u := range updates {
		s, _ := u["sessionUpdate"].(string)
		out = append(out, s)
	}
	return out
}

// texts lists the text of every agent_message_chunk.
func texts(updates []map[string]any) []string {
	var out []string
	for _, u := range updates {
		if u["sessionUpdate"] != "agent_message_chunk" {
			continue
		}
		c, _ := u["content"].(map[string]any)
		s, _ := c["text"].(string)
		out = append(out, s)
	}
	return out
}

// markers returns the values stored under key in session_info_update _meta.
func markers(updates []map[string]any, key string) []map[string]any {
	var out []map[string]any
	for _, u := range updates {
		if u["sessionUpdate"] != "session_info_update" {
			continue
		}
		meta, _ := u["_meta"].(map[string]any)
		if m, ok := meta[key].(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// form is the role a session update plays in one compaction's lifecycle
// as a fallback renders it.
type form int

const (
	formOther    form = iota // not a compaction form (e.g. history)
	formStart                // opens a live compaction
	formProgress             // heartbeat or content update of an open one
	formTerminal             // the one outcome
	formContent              // summary text following the outcome (Text with WithSummary)
)

var formNames = [...]string{"other", "start", "progress", "terminal", "content"}

func (f form) String() string { return formNames[f] }

// markerKeys are the _meta keys the tests' markers use.
var markerKeys = []string{fallback.DefaultMarkerKey, fallback.OpencodeMarkerKey, "example.com/compaction"}

// lineInfo is what one session/update line means to a fallback client.
type lineInfo struct {
	kind    string // the sessionUpdate discriminator
	carrier string // "text", "toolcall" or "marker:<key>"
	form    form
	id      string // the compaction or tool call ID the line names, "" for prose
}

// classify reads one notification line, from the wire alone. Text is
// classified by its default wording. It decodes into a fixed struct rather
// than a map because the property test classifies a few hundred thousand
// lines under -race.
func classify(line []byte) (lineInfo, error) {
	var n struct {
		Params struct {
			Update struct {
				SessionUpdate string                     `json:"sessionUpdate"`
				Content       json.RawMessage            `json:"content"`
				Status        string                     `json:"status"`
				ToolCallID    string                     `json:"toolCallId"`
				Meta          map[string]json.RawMessage `json:"_meta"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &n); err != nil {
		return lineInfo{}, err
	}
	u := n.Params.Update
	li := lineInfo{kind: u.SessionUpdate}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		var c struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(u.Content, &c)
		li.carrier, li.form = "text", formContent
		switch {
		case c.Text == "Compacting...":
			li.form = formStart
		case strings.HasPrefix(c.Text, "\n\nCompacting "):
			li.form = formTerminal
		}
	case "session_info_update":
		for _, k := range markerKeys {
			raw, ok := u.Meta[k]
			if !ok {
				continue
			}
			var m struct {
				Status       string `json:"status"`
				CompactionID string `json:"compactionId"`
				MessageID    string `json:"messageId"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return li, err
			}
			li.carrier, li.form, li.id = "marker:"+k, formTerminal, m.CompactionID+m.MessageID
			if m.Status == "started" {
				li.form = formStart
			}
			break
		}
	case "tool_call":
		li.carrier, li.form, li.id = "toolcall", formTerminal, u.ToolCallID
		if u.Status == "in_progress" {
			li.form = formStart
		}
	case "tool_call_update":
		li.carrier, li.form, li.id = "toolcall", formProgress, u.ToolCallID
		if u.Status == "completed" || u.Status == "failed" {
			li.form = formTerminal
		}
	}
	return li, nil
}

// renderEvents feeds events straight to r, as the emitter would, and
// returns what reached the wire, validated against the v1 schema.
func renderEvents(t testing.TB, r emitter.Renderer, evs ...emitter.Event) []map[string]any {
	t.Helper()
	rec := &wiretest.Recorder{}
	for _, ev := range evs {
		if ev.SessionID == "" {
			ev.SessionID = "sess_1"
		}
		if ev.Version == 0 {
			ev.Version = 1
		}
		require.NoError(t, r.Render(context.Background(), ev, rec), "render %v event for %s", ev.Kind, ev.ID)
	}
	requireValidV1(t, rec.Lines())
	return rec.Updates()
}

func started(id protocol.ID, trigger protocol.Trigger) emitter.Event {
	return emitter.Event{Kind: emitter.EventStarted, ID: id, Trigger: trigger, Status: protocol.InProgress}
}

func settled(id protocol.ID, status protocol.Status) emitter.Event {
	return emitter.Event{Kind: emitter.EventSettled, ID: id, Trigger: protocol.Auto, Status: status}
}

func failedWith(id protocol.ID, text string) emitter.Event {
	ev := settled(id, protocol.Failed)
	ev.Error = protocol.Set(text)
	ev.Err = errors.New("cause with internal detail: dial tcp 10.0.0.7:443")
	return ev
}

func replayed(id protocol.ID, status protocol.Status) emitter.Event {
	ev := settled(id, status)
	ev.Kind = emitter.EventReplayed
	return ev
}

type jsonRaw = json.RawMessage

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err, "marshal %T", v)
	return b
}

func sessionEvent(ev emitter.Event) emitter.Event {
	ev.SessionID, ev.Version = "sess_1", 1
	return ev
}
