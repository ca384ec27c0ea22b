// Package sqlstore keeps session histories in a SQL database through
// database/sql: a history.Store (agentkit.WithStore) for agents that run
// many processes on many machines, where one directory of files
// (sessionlog, the embedded default) will not do. Its one job is that
// store. It imports no driver: the agent opens its *sql.DB with the driver
// of its database and hands it over.
//
// The same code runs on SQLite and PostgreSQL (its statements use $N
// placeholders, INSERT ... ON CONFLICT DO NOTHING and UPDATE ... RETURNING,
// which both read): tested against modernc.org/sqlite (pure Go) and, when
// one can be started, a PostgreSQL 15 server through github.com/lib/pq;
// github.com/jackc/pgx/v5/stdlib works the same way. docs/records.md ("A
// database: sqlstore") has the set-up of each.
//
//	db, err := sql.Open("pgx", "postgres://agent@db/agents")  // or "sqlite", "file:agents.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
//	store, err := sqlstore.Open(ctx, db)                     // creates its tables if need be
//	kit := agentkit.New(agentkit.WithStore(store))
//
// # Tables
//
// Open creates three tables, if they do not exist, in the database's
// default schema: acpcompact_sessions (one row a session: its ID, its
// writer's fencing token, its creation time), acpcompact_entries (one row
// an entry: the session, its sequence number, its kind, the compaction's
// ID for a start, final or void, and its JSON) and acpcompact_schema (the
// schema's version, 1). A database whose schema is of a later version is
// refused with ErrVersion.
//
// # One writer a session: the last one opened
//
// A history has one writer at a time, as with sessionlog, but the rule
// suits machines that may die without a word: Open takes a session over.
// Each Open (and Create) draws a new fencing token for the session, and
// every append checks it in the same statement, so once another process
// has opened the session, the earlier writer's appends fail with an error
// wrapping history.ErrLocked, and nothing it writes lands. (sessionlog,
// whose writers share a machine, refuses the second writer instead: the
// operating system drops a dead process's lock.)
//
// # Reading
//
// Entries reads the history by package history's rules in one ordered
// query, a row at a time, after a first pass that checks every
// compaction's record (so a record of a version this acpcompact does not
// read is reported before any entry). Memory is bounded by the largest
// entry.
//
// A Store and its Logs are safe for concurrent use. Entries runs its
// queries one after the other, so a database/sql pool of one connection
// serves it.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
)

// SchemaVersion is the version of the tables this package reads and
// writes.
const SchemaVersion = 1

// Sentinel errors, for errors.Is.
var (
	// ErrVersion: the database holds tables of a later schema version, or
	// a record of a version package emitter does not read.
	ErrVersion = errors.New("sqlstore: unsupported version")
	// ErrCorrupt: a row is not what its kind says.
	ErrCorrupt = errors.New("sqlstore: corrupt history")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("sqlstore: history closed")
)

// The statements, in the dialect SQLite and PostgreSQL share.
const (
	createSchema   = `CREATE TABLE IF NOT EXISTS acpcompact_schema (version BIGINT NOT NULL)`
	createSessions = `CREATE TABLE IF NOT EXISTS acpcompact_sessions (
	id TEXT PRIMARY KEY,
	writer BIGINT NOT NULL,
	created TEXT NOT NULL)`
	createEntries = `CREATE TABLE IF NOT EXISTS acpcompact_entries (
	session_id TEXT NOT NULL,
	seq BIGINT NOT NULL,
	kind SMALLINT NOT NULL,
	compaction_id TEXT,
	body TEXT NOT NULL,
	PRIMARY KEY (session_id, seq))`
	createIndex = `CREATE INDEX IF NOT EXISTS acpcompact_entries_compaction ON acpcompact_entries (session_id, compaction_id)`

	insertSession = `INSERT INTO acpcompact_sessions (id, writer, created) VALUES ($1, 1, $2) ON CONFLICT (id) DO NOTHING`
	takeSession   = `UPDATE acpcompact_sessions SET writer = writer + 1 WHERE id = $1 RETURNING writer`
	lastSeq       = `SELECT COALESCE(MAX(seq), 0) FROM acpcompact_entries WHERE session_id = $1`
	insertEntry   = `INSERT INTO acpcompact_entries (session_id, seq, kind, compaction_id, body)
	SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM acpcompact_sessions WHERE id = $1 AND writer = $6)`
	// The compaction rows, for the check before reading.
	selectRecords = `SELECT seq, body FROM acpcompact_entries WHERE session_id = $1 AND kind IN ($2, $3) ORDER BY seq`
	// Every row, each compaction's rows together at the place of its
	// first one.
	selectHistory = `SELECT e.seq, e.kind, e.compaction_id, e.body
	FROM acpcompact_entries e
	LEFT JOIN (SELECT compaction_id, MIN(seq) AS first FROM acpcompact_entries
		WHERE session_id = $1 AND compaction_id IS NOT NULL GROUP BY compaction_id) f
	ON e.compaction_id = f.compaction_id
	WHERE e.session_id = $1
	ORDER BY COALESCE(f.first, e.seq), e.seq`
)

// Store is a history.Store in a SQL database. Safe for concurrent use.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

var _ history.Store = (*Store)(nil)

// Open returns the store in db, creating its tables if need be. It fails
// with ErrVersion for tables of a later schema version.
func Open(ctx context.Context, db *sql.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlstore: no database")
	}
	for _, stmt := range []string{createSchema, createSessions, createEntries, createIndex} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("sqlstore: creating the tables: %w", err)
		}
	}
	if err := checkVersion(ctx, db); err != nil {
		return nil, err
	}
	return &Store{db: db, now: time.Now}, nil
}

// checkVersion records the schema's version in a new database and checks
// it in an existing one.
func checkVersion(ctx context.Context, db *sql.DB) error {
	var v int64
	err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM acpcompact_schema`).Scan(&sqlNullInt{&v})
	if err != nil {
		return fmt.Errorf("sqlstore: reading the schema version: %w", err)
	}
	switch {
	case v == 0:
		if _, err := db.ExecContext(ctx, `INSERT INTO acpcompact_schema (version) VALUES ($1)`, SchemaVersion); err != nil {
			return fmt.Errorf("sqlstore: recording the schema version: %w", err)
		}
	case v > SchemaVersion:
		return fmt.Errorf("%w: the tables are of schema version %d; this acpcompact reads version %d", ErrVersion, v, SchemaVersion)
	}
	return nil
}

// sqlNullInt scans a nullable integer into *v (0 for NULL).
type sqlNullInt struct{ v *int64 }

func (n *sqlNullInt) Scan(src any) error {
	var x sql.NullInt64
	if err := x.Scan(src); err != nil {
		return err
	}
	*n.v = x.Int64
	return nil
}

// Create makes sessionID's history and opens it for appending; an
// existing one is refused with an error wrapping history.ErrExist.
func (s *Store) Create(ctx context.Context, sessionID string) (history.Log, error) {
	if sessionID == "" {
		return nil, errors.New("sqlstore: an empty session ID")
	}
	res, err := s.db.ExecContext(ctx, insertSession, sessionID, s.now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: session %q: %w", sessionID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("sqlstore: session %q: %w", sessionID, err)
	} else if n == 0 {
		return nil, fmt.Errorf("sqlstore: session %q: %w", sessionID, history.ErrExist)
	}
	return &Log{s: s, id: sessionID, writer: 1}, nil
}

// Open takes sessionID's existing history over for appending (an error
// wrapping history.ErrNotFound when there is none): from now on the
// history's earlier writer, if any, is fenced out (see the package
// documentation).
func (s *Store) Open(ctx context.Context, sessionID string) (history.Log, error) {
	var writer int64
	err := s.db.QueryRowContext(ctx, takeSession, sessionID).Scan(&writer)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlstore: session %q: %w", sessionID, history.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: session %q: %w", sessionID, err)
	}
	var seq int64
	if err := s.db.QueryRowContext(ctx, lastSeq, sessionID).Scan(&seq); err != nil {
		return nil, fmt.Errorf("sqlstore: session %q: %w", sessionID, err)
	}
	return &Log{s: s, id: sessionID, writer: writer, seq: seq}, nil
}

// Log is one session's history, open for appending. Safe for concurrent
// use: appends are serialized.
type Log struct {
	s      *Store
	id     string
	writer int64 // the fencing token Create or Open drew

	mu     sync.Mutex
	seq    int64 // the last sequence number written
	closed bool
}

var _ history.Log = (*Log)(nil)

// Append writes e as the history's next row, unless another writer has
// opened the session since this Log was (an error wrapping
// history.ErrLocked).
func (l *Log) Append(ctx context.Context, e history.Entry) error {
	cid, body, err := encode(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("sqlstore: session %q: %w", l.id, ErrClosed)
	}
	res, err := l.s.db.ExecContext(ctx, insertEntry, l.id, l.seq+1, int(e.Kind), cid, body, l.writer)
	if err != nil {
		return fmt.Errorf("sqlstore: session %q: %w", l.id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlstore: session %q: %w", l.id, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlstore: session %q: another process opened it since this one did: %w", l.id, history.ErrLocked)
	}
	l.seq++
	return nil
}

// encode returns an entry's compaction ID (NULL for an update or data)
// and its JSON.
func encode(e history.Entry) (sql.NullString, string, error) {
	switch e.Kind {
	case history.Update, history.Data:
		raw := e.Update
		if e.Kind == history.Data {
			raw = e.Data
		}
		if !json.Valid(raw) {
			return sql.NullString{}, "", fmt.Errorf("sqlstore: a %v entry that is not JSON", e.Kind)
		}
		return sql.NullString{}, string(raw), nil
	case history.Start, history.Final:
		if e.Record.Status.Terminal() != (e.Kind == history.Final) {
			return sql.NullString{}, "", fmt.Errorf("sqlstore: a %v entry of %s with status %q", e.Kind, e.Record.ID, e.Record.Status)
		}
		raw, err := e.Record.MarshalJSON()
		if err != nil {
			return sql.NullString{}, "", fmt.Errorf("sqlstore: %w", err)
		}
		return sql.NullString{String: string(e.Record.ID), Valid: true}, string(raw), nil
	case history.Void:
		if e.Record.ID == "" {
			return sql.NullString{}, "", errors.New("sqlstore: a void entry without an ID")
		}
		return sql.NullString{String: string(e.Record.ID), Valid: true}, "", nil
	}
	return sql.NullString{}, "", fmt.Errorf("sqlstore: an entry of kind %v", e.Kind)
}

// Close ends this Log; later appends fail with ErrClosed. The session's
// fencing token stays: the next Open draws a new one.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

// Entries yields the history by package history's reading rules.
func (l *Log) Entries(ctx context.Context) iter.Seq2[history.Entry, error] {
	return func(yield func(history.Entry, error) bool) {
		if err := l.check(ctx); err != nil {
			yield(history.Entry{}, err)
			return
		}
		rows, err := l.s.db.QueryContext(ctx, selectHistory, l.id)
		if err != nil {
			yield(history.Entry{}, fmt.Errorf("sqlstore: session %q: %w", l.id, err))
			return
		}
		defer rows.Close()
		var g group
		for rows.Next() {
			var seq int64
			var kind int
			var cid sql.NullString
			var body string
			if err := rows.Scan(&seq, &kind, &cid, &body); err != nil {
				yield(history.Entry{}, fmt.Errorf("sqlstore: session %q: %w", l.id, err))
				return
			}
			k := history.Kind(kind)
			switch k {
			case history.Update, history.Data:
				if e, ok := g.end(); ok && !yield(e, nil) {
					return
				}
				e := history.Entry{Kind: k}
				if k == history.Update {
					e.Update = json.RawMessage(body)
				} else {
					e.Data = json.RawMessage(body)
				}
				if !yield(e, nil) {
					return
				}
			case history.Start, history.Final, history.Void:
				if g.id != cid.String {
					if e, ok := g.end(); ok && !yield(e, nil) {
						return
					}
					g = group{id: cid.String}
				}
				e, ok, err := g.add(k, body)
				if err != nil {
					yield(history.Entry{}, fmt.Errorf("sqlstore: session %q, entry %d: %w", l.id, seq, err))
					return
				}
				if ok && !yield(e, nil) {
					return
				}
			default:
				// A kind of a later writer's: skipped.
			}
		}
		if err := rows.Err(); err != nil {
			yield(history.Entry{}, fmt.Errorf("sqlstore: session %q: %w", l.id, err))
			return
		}
		if e, ok := g.end(); ok {
			yield(e, nil)
		}
	}
}

// check decodes every compaction record of the history, so that a record
// this acpcompact cannot read is reported before any entry.
func (l *Log) check(ctx context.Context) error {
	rows, err := l.s.db.QueryContext(ctx, selectRecords, l.id, int(history.Start), int(history.Final))
	if err != nil {
		return fmt.Errorf("sqlstore: session %q: %w", l.id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			return fmt.Errorf("sqlstore: session %q: %w", l.id, err)
		}
		if _, err := decode(body); err != nil {
			return fmt.Errorf("sqlstore: session %q, entry %d: %w", l.id, seq, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlstore: session %q: %w", l.id, err)
	}
	return nil
}

// group is what the reading keeps of the compaction whose rows it is
// reading: its start's record, until a final record or the end of its
// rows decides what it yields.
type group struct {
	id    string
	start string // the start's JSON, "" if none yet
	done  bool   // its final record was yielded
	void  bool
}

// add reads one row of the group: the first final record is yielded.
func (g *group) add(k history.Kind, body string) (history.Entry, bool, error) {
	switch {
	case k == history.Void:
		g.void = true
	case k == history.Start && g.start == "":
		g.start = body
	case k == history.Final && !g.done:
		rec, err := decode(body)
		if err != nil {
			return history.Entry{}, false, err
		}
		g.done = true
		return history.Entry{Kind: history.Final, Record: rec}, true, nil
	}
	return history.Entry{}, false, nil
}

// end closes the group: a compaction that started and neither settled nor
// was voided is yielded failed, interrupted.
func (g *group) end() (history.Entry, bool) {
	defer func() { *g = group{} }()
	if g.id == "" || g.done || g.void || g.start == "" {
		return history.Entry{}, false
	}
	rec, err := decode(g.start)
	if err != nil {
		return history.Entry{}, false // checked before reading: cannot happen
	}
	rec.Status, rec.Error, rec.Summary = protocol.Failed, history.ErrInterrupted.Error(), nil
	return history.Entry{Kind: history.Final, Record: rec, Interrupted: true}, true
}

// decode reads a record's JSON.
func decode(body string) (emitter.Record, error) {
	var rec emitter.Record
	if err := json.Unmarshal([]byte(body), &rec); err != nil {
		if errors.Is(err, emitter.ErrRecordVersion) {
			return rec, fmt.Errorf("%w: %w", ErrVersion, err)
		}
		return rec, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return rec, nil
}
