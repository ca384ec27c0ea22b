package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/history/historytest"
	"github.com/acpcompact/acpcompact/sqlstore"
	_ "github.com/lib/pq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// sqliteDSN is the data source name the documentation gives for SQLite:
// wait for a lock rather than fail at once, and write ahead.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

// openSQLite returns a store in a new SQLite database.
func openSQLite(t testing.TB) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(t.TempDir(), "agents.db")))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s, err := sqlstore.Open(context.Background(), db)
	require.NoError(t, err, "opening the store creates its tables")
	return s
}

func TestSQLiteKeepsTheHistoryContract(t *testing.T) {
	historytest.Run(t, func(t *testing.T) history.Store { return openSQLite(t) })
}

func TestPostgresKeepsTheHistoryContract(t *testing.T) {
	dsn := startPostgres(t)
	var n atomic.Int64
	historytest.Run(t, func(t *testing.T) history.Store {
		return openPostgres(t, dsn, fmt.Sprintf("t%d", n.Add(1)))
	})
}

// openPostgres returns a store in a new schema of the server at dsn.
func openPostgres(t testing.TB, dsn, schema string) *sqlstore.Store {
	t.Helper()
	admin, err := sql.Open("postgres", dsn)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err)
	db, err := sql.Open("postgres", dsn+" search_path="+schema)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s, err := sqlstore.Open(context.Background(), db)
	require.NoError(t, err, "opening the store creates its tables")
	return s
}

func TestOpenRefusesALaterSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.db")
	db, err := sql.Open("sqlite", sqliteDSN(path))
	require.NoError(t, err)
	defer db.Close()
	_, err = sqlstore.Open(context.Background(), db)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO acpcompact_schema (version) VALUES (2)`)
	require.NoError(t, err)
	_, err = sqlstore.Open(context.Background(), db)
	assert.ErrorIs(t, err, sqlstore.ErrVersion, "tables of a later version are not written to")
}

func TestARecordOfALaterVersionIsReportedBeforeAnyEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.db")
	db, err := sql.Open("sqlite", sqliteDSN(path))
	require.NoError(t, err)
	defer db.Close()
	s, err := sqlstore.Open(context.Background(), db)
	require.NoError(t, err)
	ctx := context.Background()
	l, err := s.Create(ctx, "sess_1")
	require.NoError(t, err)
	require.NoError(t, l.Append(ctx, history.Entry{Kind: history.Update, Update: []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`)}))
	_, err = db.Exec(`INSERT INTO acpcompact_entries (session_id, seq, kind, compaction_id, body) VALUES ('sess_1', 2, $1, 'cmp_9', '{"v":9,"compactionId":"cmp_9","status":"completed"}')`, int(history.Final))
	require.NoError(t, err)
	var got []history.Entry
	var errs []error
	for e, err := range l.Entries(ctx) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, e)
	}
	assert.Empty(t, got, "nothing is yielded before the error: no half history")
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], sqlstore.ErrVersion)
}

// startPostgres starts a throwaway PostgreSQL server in a temporary
// directory, listening on a Unix socket there only, and returns its data
// source name (lib/pq's key=value form). It skips the test when it cannot
// (no PostgreSQL installed, no user to run it as), unless
// ACPCOMPACT_REQUIRE_POSTGRES=1, when it fails.
func startPostgres(t *testing.T) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		require.NotEqual(t, "1", os.Getenv("ACPCOMPACT_REQUIRE_POSTGRES"), "PostgreSQL is required (ACPCOMPACT_REQUIRE_POSTGRES=1) but cannot be started: %s", msg)
		t.Skipf("PostgreSQL not started, test skipped (set ACPCOMPACT_REQUIRE_POSTGRES=1 to fail instead): %s", msg)
	}
	bin := postgresBin()
	if bin == "" {
		skip("no initdb found (PATH, /usr/lib/postgresql/*/bin); on Debian: apt-get install postgresql")
	}
	// initdb refuses root: run it and the server as the postgres user.
	var runAs []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skip("running as root and there is no postgres user to run the server as")
		}
		runAs = []string{"runuser", "-u", u.Username, "--"}
		if _, err := exec.LookPath("runuser"); err != nil {
			skip("running as root without runuser")
		}
	}
	dir, err := os.MkdirTemp("", "acpcompact-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) ([]byte, error) {
		cmd := append(append([]string{}, runAs...), append([]string{filepath.Join(bin, name)}, args...)...)
		return exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	}
	if out, err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		skip("initdb: %v: %s", err, out)
	}
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -F", dir)
	if out, err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		skip("pg_ctl start: %v: %s %s", err, out, log)
	}
	t.Cleanup(func() { _, _ = run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") })
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
}

// postgresBin returns the directory of PostgreSQL's server programs, the
// latest installed, or "".
func postgresBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	v := filepath.Base(filepath.Dir(binDir))
	n := 0
	for _, c := range strings.Split(v, ".")[0] {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}
