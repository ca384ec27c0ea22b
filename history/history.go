// Package history is the contract between the agent kits and a store of
// session histories: what a kit configured with agentkit.WithStore keeps
// of each session (every session update the client saw, each compaction's
// start and final record, the runtime's own data), so that a later
// process replays it on session/load as the client saw it live. Its one
// job is that contract: Store, Log and Entry, and the sentinel errors a
// store's errors wrap.
//
// Two stores implement it: package sessionlog (one append-only,
// checksummed file per session; Store.History), the embedded default, and
// package sqlstore (database/sql: SQLite, PostgreSQL), for agents that
// run many processes on many machines. A store of your own passes
// conformance with sqlstore's and sessionlog's tests of the reading rules
// below (docs/records.md, "The store interface").
//
// # Reading rules
//
// Log.Entries yields a session's history in order: each Update and Data
// entry where it was appended, and each compaction once, as its final
// record (Kind Final), at the place of its first entry (its Start, or its
// Final when it has no start). The first final record of an ID counts;
// later ones are ignored. A compaction whose Start has neither a Final nor
// a Void reads back failed, with ErrInterrupted's text as its error and
// Interrupted set: its process died before it settled, and the client saw
// it start. A Void cancels a Start that opened nothing (the kit wrote the
// start before the compaction was refused): such a compaction is not
// yielded. Nothing reads back in_progress.
//
// A problem the store finds in what it holds (damage, a version it cannot
// read) is yielded as the first and only error, before any entry, so that
// a kit never replays half a history; an I/O error may come later.
//
// # Concurrency
//
// A Store and its Logs are safe for concurrent use. A session's history
// has one writer at a time: the Log that Create or Open returned, until
// its Close; another writer gets an error wrapping ErrLocked (or, for a
// store that lets a later writer take a session over, the earlier
// writer's appends fail with it).
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/acpcompact/acpcompact/emitter"
)

// Kind is what an Entry holds.
type Kind uint8

const (
	// Update is a session update the client saw: the `update` object of a
	// session/update notification, as it was sent (Entry.Update).
	Update Kind = iota + 1
	// Start is a compaction's start: its record while in_progress
	// (Entry.Record), written before the client sees the compaction.
	Start
	// Final is a compaction's final record (Entry.Record): settled, to
	// replay with the emitter's Session.Replay.
	Final
	// Data is the runtime's own data (Entry.Data), never sent: what it
	// needs to restore its state (token counts, its model's messages).
	Data
	// Void cancels the Start of the same ID (Entry.Record.ID): the
	// compaction it announced was refused and never opened.
	Void
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Update:
		return "update"
	case Start:
		return "start"
	case Final:
		return "final"
	case Data:
		return "data"
	case Void:
		return "void"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Entry is one item of a session's history.
type Entry struct {
	Kind Kind
	// Update is the session update of an Update entry: the `update`
	// object of session/update, JSON.
	Update json.RawMessage
	// Record is a compaction's record: in_progress for a Start, settled
	// for a Final; for a Void only its ID counts.
	Record emitter.Record
	// Data is the runtime's own data of a Data entry, JSON.
	Data json.RawMessage
	// Interrupted, when read, says the compaction started and never
	// settled: Record is its start's, failed, with ErrInterrupted's text.
	Interrupted bool
}

// Store keeps the histories of sessions.
type Store interface {
	// Create makes sessionID's history, empty, and opens it for appending.
	// A history that exists already is refused with an error wrapping
	// ErrExist.
	Create(ctx context.Context, sessionID string) (Log, error)
	// Open opens sessionID's existing history for appending (an error
	// wrapping ErrNotFound when there is none). The history is the
	// returned Log's to write until its Close: another writer is refused
	// with an error wrapping ErrLocked (see the package documentation).
	Open(ctx context.Context, sessionID string) (Log, error)
}

// Log is one session's history, open for appending.
type Log interface {
	// Append adds e at the end of the history. It returns once the entry
	// is stored as the store's durability policy says (a process crash
	// loses nothing Append returned for).
	Append(ctx context.Context, e Entry) error
	// Entries yields the history by the reading rules of the package
	// documentation, as it stood when the iteration began.
	Entries(ctx context.Context) iter.Seq2[Entry, error]
	// Close ends the writer's hold on the history; later calls fail.
	Close() error
}

// Sentinel errors; a store's errors that stem from one of them wrap it.
var (
	// ErrNotFound: the store has no history for the session.
	ErrNotFound = errors.New("history: no history for this session")
	// ErrExist: Create found a history for the session already.
	ErrExist = errors.New("history: the session has a history already")
	// ErrLocked: another writer holds the session's history (another
	// process, or another Log of this one).
	ErrLocked = errors.New("history: another writer holds the session's history")
	// ErrInterrupted is the error text of a compaction that started and
	// never settled (see the reading rules).
	ErrInterrupted = errors.New("the agent stopped before the compaction finished")
)
