package acpsdk_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/acpcompact/acpcompact/sqlstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// stores are the two stores a kit persists through: sessionlog's files and
// sqlstore on SQLite.
func stores(t *testing.T) map[string]func(t *testing.T) history.Store {
	return map[string]func(t *testing.T) history.Store{
		"sessionlog": func(t *testing.T) history.Store {
			s, err := sessionlog.Open(t.TempDir())
			require.NoError(t, err)
			return s.History()
		},
		"sqlite": func(t *testing.T) history.Store {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "h.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := sqlstore.Open(context.Background(), db)
			require.NoError(t, err)
			return s
		},
	}
}

func TestHistoryReplaysWhatTheClientSaw(t *testing.T) {
	for name, open := range stores(t) {
		for _, capable := range []bool{true, false} {
			t.Run(name+map[bool]string{true: "/capable", false: "/fallback"}[capable], func(t *testing.T) {
				kittest.HistoryReplaysWhatTheClientSaw(t, stack{}, open(t), capable)
			})
		}
	}
}

func TestStoreFailuresKeepLiveAndReplayAgreeing(t *testing.T) {
	s, err := sessionlog.Open(t.TempDir())
	require.NoError(t, err)
	kittest.StoreFailuresKeepLiveAndReplayAgreeing(t, stack{}, s.History())
}

func TestKeptDataIsHandedBackInItsPlace(t *testing.T) {
	s, err := sessionlog.Open(t.TempDir())
	require.NoError(t, err)
	kittest.KeptDataIsHandedBackInItsPlace(t, stack{}, s.History())
}

func TestRecordWithoutAConnectionIsReplayedOnTheNextLoad(t *testing.T) {
	s, err := sessionlog.Open(t.TempDir())
	require.NoError(t, err)
	store := s.History()
	r := kittest.Serve(t, stack{}, kittest.Config{Store: store}, kittest.HistoryAgent(stack{}))
	r.Initialize(1, true)
	r.NewSession()
	_, err = r.Client.Call(r.Ctx, "session/prompt", kittest.PromptText(session, "hello", nil))
	require.NoError(t, err)
	r.Finish(1)

	// The runtime applies a late summary after its kit's Shutdown.
	kit := acpsdk.New(quiet, acpsdk.WithStore(store))
	require.NoError(t, kit.Shutdown(context.Background()))
	late := emitter.Record{Status: protocol.Completed, Trigger: protocol.Auto, Displayable: true, Summary: []protocol.ContentBlock{protocol.Text("applied after Shutdown")}}
	require.NoError(t, kit.Record(context.Background(), session, late), "a record without a connection")
	assert.ErrorIs(t, kit.Record(context.Background(), session, emitter.Record{Status: protocol.InProgress}), acpsdk.ErrStore, "only a settled compaction is recorded")
	assert.ErrorIs(t, acpsdk.New(quiet).Record(context.Background(), session, late), acpsdk.ErrStore, "a kit without a store records nothing")

	replay := kittest.ReplayedTimeline(t, stack{}, store)
	require.Len(t, replay, 3)
	assert.Equal(t, []string{"[user] hello", "[agent] echo: hello"}, replay[:2])
	assert.Contains(t, replay[2], "completed  summary: applied after Shutdown", "the late record replays at the end of the history")
}
