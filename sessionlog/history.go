package sessionlog

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/acpcompact/acpcompact/history"
)

// History returns the store as a history.Store, for the agent kits
// (agentkit.WithStore(store.History())): the kit's entries are lines of
// the session's log (a session update an "update" line, the runtime's data
// a "data" line, a cancelled start a "void" line; a compaction's start and
// final record are AppendRecord's lines), read back by the same rules as
// Reader.Entries. A session ID that cannot name a file (ErrSessionID) is
// no session of the store: Open reports it as history.ErrNotFound, Create
// refuses it. A message line (AppendMessage, a runtime's own) reads as
// history.Data, its data as it is.
func (s *Store) History() history.Store { return histories{s} }

// histories is Store as a history.Store. ctx is not used: a log's
// appends are local writes.
type histories struct{ s *Store }

func (h histories) Create(_ context.Context, sessionID string) (history.Log, error) {
	l, err := h.s.Create(sessionID, nil)
	if err != nil {
		return nil, err
	}
	return historyLog{l: l, s: h.s, id: sessionID}, nil
}

func (h histories) Open(_ context.Context, sessionID string) (history.Log, error) {
	l, err := h.s.Append(sessionID)
	if errors.Is(err, ErrSessionID) {
		return nil, fmt.Errorf("%w: %w", history.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return historyLog{l: l, s: h.s, id: sessionID}, nil
}

// historyLog is a Log as a history.Log.
type historyLog struct {
	l  *Log
	s  *Store
	id string
}

func (h historyLog) Append(_ context.Context, e history.Entry) error {
	switch e.Kind {
	case history.Update:
		return h.l.appendPayload(kindUpdate, e.Update)
	case history.Data:
		return h.l.appendPayload(kindData, e.Data)
	case history.Start:
		if e.Record.Status.Terminal() {
			return fmt.Errorf("sessionlog: the start of %s with status %q", e.Record.ID, e.Record.Status)
		}
		return h.l.AppendRecord(e.Record)
	case history.Final:
		if !e.Record.Status.Terminal() {
			return fmt.Errorf("sessionlog: the final record of %s with status %q", e.Record.ID, e.Record.Status)
		}
		return h.l.AppendRecord(e.Record)
	case history.Void:
		return h.l.appendVoid(string(e.Record.ID))
	}
	return fmt.Errorf("sessionlog: an entry of kind %v", e.Kind)
}

func (h historyLog) Entries(context.Context) iter.Seq2[history.Entry, error] {
	return func(yield func(history.Entry, error) bool) {
		r, err := h.s.Read(h.id)
		if err != nil {
			yield(history.Entry{}, err)
			return
		}
		defer r.Close()
		for e, err := range r.Entries() {
			if err != nil {
				yield(history.Entry{}, err)
				return
			}
			var he history.Entry
			switch e.Kind {
			case KindUpdate:
				he = history.Entry{Kind: history.Update, Update: e.Data}
			case KindData, KindMessage:
				he = history.Entry{Kind: history.Data, Data: e.Data}
			case KindCompaction:
				he = history.Entry{Kind: history.Final, Record: e.Record, Interrupted: e.Interrupted}
			default:
				continue
			}
			if !yield(he, nil) {
				return
			}
		}
	}
}

func (h historyLog) Close() error { return h.l.Close() }
