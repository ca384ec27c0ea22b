package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/acpcompact/acpcompact/sqlstore"
	"github.com/stretchr/testify/require"
)

// BenchmarkStore measures the two stores side by side through
// history.Store, as the kit uses them (make bench's table: "Store"):
// appending one session update (an agent_message_chunk of 160 bytes of
// text), with each store's default durability and with a sync to disk on
// every append, and loading a history of 10,000 entries (9,800 updates,
// 100 compactions, each a start and a final record with a summary).
//
//	sessionlog: one file per session, SyncNone (default) or SyncEach
//	sqlite:     sqlstore on modernc.org/sqlite, WAL, synchronous=NORMAL
//	            (default) or synchronous=FULL (a sync on every commit)
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	stores := []struct {
		name string
		open func(b *testing.B) history.Store
	}{
		{"sessionlog", func(b *testing.B) history.Store { return openLog(b, sessionlog.SyncNone) }},
		{"sessionlog-syncEach", func(b *testing.B) history.Store { return openLog(b, sessionlog.SyncEach) }},
		{"sqlite", func(b *testing.B) history.Store { return openSQL(b, "NORMAL") }},
		{"sqlite-syncFull", func(b *testing.B) history.Store { return openSQL(b, "FULL") }},
	}
	upd := update(160)
	for _, st := range stores {
		b.Run("append/"+st.name, func(b *testing.B) {
			l, err := st.open(b).Create(ctx, "sess_bench")
			require.NoError(b, err)
			defer l.Close()
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Append(ctx, upd); err != nil {
					require.NoError(b, err)
				}
			}
		})
	}
	for _, st := range []int{0, 2} { // load: the default durability of each
		s := stores[st]
		b.Run("load10k/"+s.name, func(b *testing.B) {
			l, err := s.open(b).Create(ctx, "sess_bench")
			require.NoError(b, err)
			defer l.Close()
			fill(b, l, 10_000)
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for _, err := range l.Entries(ctx) {
					if err != nil {
						require.NoError(b, err)
					}
					n++
				}
				require.Equal(b, 9_900, n, "entries read")
			}
		})
	}
}

func update(n int) history.Entry {
	text := make([]byte, n)
	for i := range text {
		text[i] = 'a' + byte(i%26)
	}
	raw, _ := json.Marshal(map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": "msg_agent_1", "content": protocol.Text(string(text))})
	return history.Entry{Kind: history.Update, Update: raw}
}

// fill appends n entries: per 100, 98 updates and one compaction's start
// and final record.
func fill(b *testing.B, l history.Log, n int) {
	ctx := context.Background()
	upd := update(160)
	for i := range n / 100 {
		id := protocol.ID(fmt.Sprintf("cmp_%d", i+1))
		for j := range 98 {
			if err := l.Append(ctx, upd); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err)
			}
			if j == 49 {
				if err := l.Append(ctx, history.Entry{Kind: history.Start, Record: emitter.Record{ID: id, Status: protocol.InProgress, Trigger: protocol.Auto}}); err != nil { // require only on failure: its t.Helper would be timed
					require.NoError(b, err)
				}
			}
		}
		require.NoError(b, l.Append(ctx, history.Entry{Kind: history.Final, Record: emitter.Record{ID: id, Status: protocol.Completed, Trigger: protocol.Auto, Displayable: true,
			Summary: []protocol.ContentBlock{protocol.Text("## Retained context\n\n- A summary of the conversation so far, a few hundred bytes long, as a model would write it.\n")}}}))
	}
}

func openLog(b *testing.B, p sessionlog.SyncPolicy) history.Store {
	s, err := sessionlog.Open(b.TempDir(), sessionlog.WithSync(p))
	require.NoError(b, err)
	return s.History()
}

func openSQL(b *testing.B, synchronous string) history.Store {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "h.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous("+synchronous+")")
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	s, err := sqlstore.Open(context.Background(), db)
	require.NoError(b, err)
	return s
}
