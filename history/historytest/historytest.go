// Package historytest checks a history.Store against package history's
// contract: its reading rules, its errors and its one writer a session.
// sessionlog's and sqlstore's tests run it; so can a store of your own:
//
//	func TestMyStoreKeepsTheContract(t *testing.T) {
//		historytest.Run(t, func(t *testing.T) history.Store { return newMyStore(t) })
//	}
package historytest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Run runs the contract's tests, each on a new, empty store from open.
func Run(t *testing.T, open func(t *testing.T) history.Store) {
	t.Run("CreateRefusesAnExistingHistory", func(t *testing.T) { createRefusesAnExistingHistory(t, open(t)) })
	t.Run("OpenOfAnUnknownSessionIsNotFound", func(t *testing.T) { openOfAnUnknownSessionIsNotFound(t, open(t)) })
	t.Run("EntriesReadBackInOrderWithCompactionsAtTheirStart", func(t *testing.T) { entriesInOrder(t, open(t)) })
	t.Run("AnInterruptedCompactionReadsBackFailed", func(t *testing.T) { interrupted(t, open(t)) })
	t.Run("AVoidedStartIsNotRead", func(t *testing.T) { voided(t, open(t)) })
	t.Run("TheFirstFinalRecordCounts", func(t *testing.T) { firstFinalCounts(t, open(t)) })
	t.Run("AHistoryOutlivesItsWriter", func(t *testing.T) { reopened(t, open(t)) })
	t.Run("OneWriterASession", func(t *testing.T) { oneWriter(t, open(t)) })
	t.Run("AClosedLogRefusesAppends", func(t *testing.T) { closedLog(t, open(t)) })
}

var ctx = context.Background()

func update(text string) history.Entry {
	raw, _ := json.Marshal(map[string]any{"sessionUpdate": "agent_message_chunk", "content": protocol.Text(text)})
	return history.Entry{Kind: history.Update, Update: raw}
}

func start(id string) history.Entry {
	return history.Entry{Kind: history.Start, Record: emitter.Record{ID: protocol.ID(id), Status: protocol.InProgress, Trigger: protocol.Manual, Displayable: true}}
}

func final(id string, status protocol.Status, summary string) history.Entry {
	rec := emitter.Record{ID: protocol.ID(id), Status: status, Trigger: protocol.Manual, Displayable: true}
	if summary != "" {
		rec.Summary = []protocol.ContentBlock{protocol.Text(summary)}
	}
	if status == protocol.Failed {
		rec.Error = "summary request failed"
	}
	return history.Entry{Kind: history.Final, Record: rec}
}

// line is an entry as the tests compare it.
func line(e history.Entry) string {
	switch e.Kind {
	case history.Update:
		var u struct {
			Content protocol.ContentBlock `json:"content"`
		}
		_ = json.Unmarshal(e.Update, &u)
		return "update " + u.Content.Text
	case history.Data:
		return "data " + string(e.Data)
	case history.Final:
		s := "compaction " + string(e.Record.ID) + " " + string(e.Record.Status)
		if len(e.Record.Summary) > 0 {
			s += " " + e.Record.Summary[0].Text
		}
		if e.Record.Error != "" {
			s += ": " + e.Record.Error
		}
		if e.Interrupted {
			s += " (interrupted)"
		}
		return s
	}
	return e.Kind.String()
}

func read(t *testing.T, l history.Log) []string {
	t.Helper()
	var out []string
	for e, err := range l.Entries(ctx) {
		require.NoError(t, err, "reading the history")
		out = append(out, line(e))
	}
	return out
}

func appendAll(t *testing.T, l history.Log, es ...history.Entry) {
	t.Helper()
	for _, e := range es {
		require.NoError(t, l.Append(ctx, e), "appending a %v entry", e.Kind)
	}
}

func createRefusesAnExistingHistory(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	defer l.Close()
	_, err = s.Create(ctx, "sess_1")
	assert.ErrorIs(t, err, history.ErrExist, "a second Create of the session")
}

func openOfAnUnknownSessionIsNotFound(t *testing.T, s history.Store) {
	_, err := s.Open(ctx, "sess_none")
	assert.ErrorIs(t, err, history.ErrNotFound)
}

func entriesInOrder(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	defer l.Close()
	appendAll(t, l,
		update("hello"),
		start("cmp_1"),
		update("while it runs"),
		history.Entry{Kind: history.Data, Data: json.RawMessage(`{"tokens":6000}`)},
		final("cmp_1", protocol.Completed, "## Retained context"),
		update("after it"),
		final("cmp_2", protocol.Completed, "recorded without a connection"),
	)
	assert.Equal(t, []string{
		"update hello",
		"compaction cmp_1 completed ## Retained context",
		"update while it runs",
		`data {"tokens":6000}`,
		"update after it",
		"compaction cmp_2 completed recorded without a connection",
	}, read(t, l), "a compaction is read at its first entry, everything else where it was appended")
	assert.Len(t, read(t, l), 6, "Entries may be ranged over again")
}

func interrupted(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	defer l.Close()
	appendAll(t, l, update("before"), start("cmp_1"), update("after"))
	assert.Equal(t, []string{"update before", "compaction cmp_1 failed: " + history.ErrInterrupted.Error() + " (interrupted)", "update after"}, read(t, l),
		"a start without a final record reads back failed, never in_progress")
}

func voided(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	defer l.Close()
	appendAll(t, l, start("cmp_1"), history.Entry{Kind: history.Void, Record: emitter.Record{ID: "cmp_1"}}, update("after"))
	assert.Equal(t, []string{"update after"}, read(t, l), "a voided start opened nothing")
}

func firstFinalCounts(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	defer l.Close()
	appendAll(t, l, start("cmp_1"), final("cmp_1", protocol.Failed, ""), final("cmp_1", protocol.Completed, "late"))
	assert.Equal(t, []string{"compaction cmp_1 failed: summary request failed"}, read(t, l))
}

func reopened(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	appendAll(t, l, update("one"), start("cmp_1"))
	require.NoError(t, l.Close())
	l, err = s.Open(ctx, "sess_1")
	require.NoError(t, err, "opening the history again")
	defer l.Close()
	appendAll(t, l, update("two"))
	assert.Equal(t, []string{"update one", "compaction cmp_1 failed: " + history.ErrInterrupted.Error() + " (interrupted)", "update two"}, read(t, l))
}

func oneWriter(t *testing.T, s history.Store) {
	a, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	defer a.Close()
	appendAll(t, a, update("by a"))
	b, err := s.Open(ctx, "sess_1")
	if err != nil {
		assert.ErrorIs(t, err, history.ErrLocked, "a second writer is refused")
		return
	}
	defer b.Close()
	// The store lets the later writer take the session over: the earlier
	// one is fenced out.
	assert.ErrorIs(t, a.Append(ctx, update("by a, late")), history.ErrLocked, "the earlier writer's append after a takeover")
	appendAll(t, b, update("by b"))
	assert.Equal(t, []string{"update by a", "update by b"}, read(t, b))
}

func closedLog(t *testing.T, s history.Store) {
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.Error(t, l.Append(ctx, update("late")), "an append after Close")
}
