package kittest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// AuditedLossReachesTheRecord: with WithAudit and records on, the summary
// of a completed compaction is audited against the session's history as
// the connection carried it (the first prompt's path and URL, the agent's
// commit hash), and the record of its terminal update names what the
// summary lost, with where the history held it; what it kept is not named.
func AuditedLossReachesTheRecord(t *testing.T, st Stack) {
	prompts := 0
	a := &Agent{Prompt: func(ctx context.Context, c Conn, p Prompt) (string, error) {
		prompts++
		if prompts == 1 {
			return "end_turn", c.Message(ctx, p.SessionID, "Fixed it in commit 3f2a9c1d.")
		}
		cmp, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
		if err != nil {
			return "", err
		}
		if err := cmp.Chunk(ctx, protocol.Text("The user asked to fix the parser in internal/skim/prefix.go.")); err != nil {
			return "", err
		}
		return "end_turn", cmp.Complete(ctx)
	}}
	r := Serve(t, st, Config{Audit: true, Emitter: []emitter.Option{emitter.WithRecords("")}}, a)
	r.Initialize(1, true)
	var res json.RawMessage
	require.NoError(t, r.Client.Conn.Call(r.Ctx, "session/prompt",
		PromptText(SessionID, "Fix the parser in internal/skim/prefix.go, see https://example.com/issue/7", nil), &res), "prompt 1")
	require.NoError(t, r.Client.Conn.Call(r.Ctx, "session/prompt", PromptText(SessionID, "/compact", nil), &res), "prompt 2")
	evs := r.Finish(1)
	var term *Event
	for i, e := range evs {
		if e.CompactionID == "cmp_1" && e.Status == "completed" {
			term = &evs[i]
		}
	}
	require.NotNil(t, term, "cmp_1's terminal update:\n%s", Dump(evs))
	var meta map[string]struct {
		KnownLoss []emitter.Loss `json:"knownLoss"`
	}
	require.NoError(t, json.Unmarshal(Field(*term, "_meta"), &meta), "the terminal update's _meta")
	lost := map[string]emitter.Loss{}
	for _, l := range meta[emitter.DefaultRecordKey].KnownLoss {
		lost[l.Kind] = l
	}
	assert.Equal(t, "https://example.com/issue/7", lost["url"].Value, "the URL the summary lost: %v", lost)
	assert.Contains(t, lost["url"].Where, "client message", "where the URL was")
	assert.Equal(t, "3f2a9c1d", lost["commit"].Value, "the commit the summary lost: %v", lost)
	assert.Contains(t, lost["commit"].Where, "agent message", "where the commit was")
	assert.NotContains(t, lost, "path", "the path the summary kept")
}
