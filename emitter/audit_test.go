package emitter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

// auditor is a WithAudit function that records what it was asked and
// reports every summary that does not mention "main.go" as losing it.
type auditor struct{ asked []string }

func (a *auditor) audit(_ context.Context, info emitter.Info, summary []protocol.ContentBlock) []emitter.Loss {
	var text strings.Builder
	for _, b := range summary {
		text.WriteString(b.Text)
	}
	a.asked = append(a.asked, info.SessionID+"/"+string(info.ID)+": "+text.String())
	if strings.Contains(text.String(), "main.go") {
		return nil
	}
	return []emitter.Loss{{Kind: "path", Value: "main.go", Where: "msg_3"}}
}

// WithAudit's losses join the record of a completion with a summary, the
// one on the wire under the record key and the one OnFinalRecord gets,
// beside the runtime's own notes; the summary audited is the one the
// client is left holding, streamed or final.
func TestAuditedLossesJoinTheRecord(t *testing.T) {
	ctx := context.Background()
	a := &auditor{}
	var finals []emitter.Record
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithRecords(""), emitter.WithAudit(a.audit),
		emitter.OnFinalRecord(func(_ context.Context, _ string, r emitter.Record) { finals = append(finals, r) }))
	s := em.Session("s1")

	streamed, err := s.Start(ctx, emitter.WithID("streamed"), emitter.UserDisplayable())
	require.NoError(t, err)
	require.NoError(t, streamed.Chunk(ctx, protocol.Text("The user edits ")))
	require.NoError(t, streamed.Chunk(ctx, protocol.Text("the README.")))
	require.NoError(t, streamed.Complete(ctx, emitter.WithDetails(emitter.Details{KnownLoss: []emitter.Loss{{Kind: "note", Value: "tool output dropped"}}})))

	final, err := s.Start(ctx, emitter.WithID("final"), emitter.UserDisplayable())
	require.NoError(t, err)
	require.NoError(t, final.Complete(ctx, emitter.Summary(protocol.Text("The user edits main.go."))))

	failed, err := s.Start(ctx, emitter.WithID("failed"), emitter.UserDisplayable())
	require.NoError(t, err)
	require.NoError(t, failed.Chunk(ctx, protocol.Text("draft")))
	require.NoError(t, failed.Fail(ctx, errors.New("boom")))

	assert.Equal(t, []string{"s1/streamed: The user edits the README.", "s1/final: The user edits main.go."}, a.asked, "summaries audited (completions only)")
	want := []emitter.Loss{{Kind: "note", Value: "tool output dropped"}, {Kind: "path", Value: "main.go", Where: "msg_3"}}
	require.Len(t, finals, 3, "final records")
	assert.Equal(t, want, finals[0].Details.KnownLoss, "the streamed completion's record")
	assert.Empty(t, finals[1].Details.KnownLoss, "a summary that keeps main.go loses nothing")
	var term map[string]any
	for _, u := range rec.Updates() {
		if u["compactionId"] == "streamed" && u["status"] == "completed" {
			term = u
		}
	}
	require.NotNil(t, term, "the streamed completion's terminal update")
	assert.Equal(t, []any{
		map[string]any{"kind": "note", "value": "tool output dropped"},
		map[string]any{"kind": "path", "value": "main.go", "where": "msg_3"},
	}, record(t, term)["knownLoss"], "the record on the wire")
	validateAll(t, rec, 1)
}

// Without records nothing of an audit reaches the client: it is in the
// settled event's Details, for a host that sends records of its own.
func TestAuditReachesTheClientOnlyInARecord(t *testing.T) {
	ctx := context.Background()
	a := &auditor{}
	rec := &wiretest.Recorder{}
	obs := newEvents()
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithAudit(a.audit), emitter.WithObserver(obs))
	c, err := em.Session("s1").Start(ctx, emitter.WithID("c"), emitter.UserDisplayable())
	require.NoError(t, err)
	require.NoError(t, c.Chunk(ctx, protocol.Text("summary")))
	require.NoError(t, c.Complete(ctx))
	assert.Equal(t, []string{"s1/c: summary"}, a.asked, "audits")
	settled := obs.waitFor(t, emitter.EventSettled)
	if assert.NotNil(t, settled.Details, "the settled event's details") {
		assert.Equal(t, []emitter.Loss{{Kind: "path", Value: "main.go", Where: "msg_3"}}, settled.Details.KnownLoss, "the settled event's known loss")
	}
	for _, l := range rec.Lines() {
		assert.NotContains(t, string(l), "knownLoss", "an audit on the wire without records")
	}
}
