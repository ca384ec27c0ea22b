package agentkit_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/acpcompact/acpcompact/sqlstore"
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
