package history

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/acpcompact/acpcompact/protocol"
)

// Memory is a Store that keeps histories in memory, for the life of the
// process: for agents whose sessions end with the process (and tests).
// Safe for concurrent use; a session has one writer at a time (ErrLocked
// for a second).
type Memory struct {
	mu       sync.Mutex
	sessions map[string]*memSession
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{sessions: map[string]*memSession{}} }

type memSession struct {
	entries []Entry
	held    bool
}

// Create makes sessionID's history; ErrExist if it has one.
func (m *Memory) Create(_ context.Context, sessionID string) (Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[sessionID]; ok {
		return nil, fmt.Errorf("history: session %q: %w", sessionID, ErrExist)
	}
	s := &memSession{held: true}
	m.sessions[sessionID] = s
	return &memLog{m: m, s: s}, nil
}

// Open opens sessionID's history for appending: ErrNotFound without one,
// ErrLocked while another Log holds it.
func (m *Memory) Open(_ context.Context, sessionID string) (Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[sessionID]
	switch {
	case !ok:
		return nil, fmt.Errorf("history: session %q: %w", sessionID, ErrNotFound)
	case s.held:
		return nil, fmt.Errorf("history: session %q: %w", sessionID, ErrLocked)
	}
	s.held = true
	return &memLog{m: m, s: s}, nil
}

type memLog struct {
	m      *Memory
	s      *memSession
	closed bool // under m.mu
}

var errMemClosed = errors.New("history: log closed")

func (l *memLog) Append(_ context.Context, e Entry) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.closed {
		return errMemClosed
	}
	if (e.Kind == Start || e.Kind == Final || e.Kind == Void) && e.Record.ID == "" {
		return fmt.Errorf("history: a %v entry without an ID", e.Kind)
	}
	l.s.entries = append(l.s.entries, e)
	return nil
}

func (l *memLog) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.s.held = false
	}
	return nil
}

// Entries yields the history by the reading rules of the package
// documentation.
func (l *memLog) Entries(context.Context) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		l.m.mu.Lock()
		entries := l.s.entries[:len(l.s.entries):len(l.s.entries)]
		l.m.mu.Unlock()
		for _, e := range arrange(entries) {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// arrange applies the reading rules to a history's entries as they were
// appended: what Log.Entries yields, for a store that holds a session's
// entries in memory (Memory) or reads them all at once.
func arrange(entries []Entry) []Entry {
	type comp struct {
		first   int
		start   *Entry
		final   *Entry
		void    bool
		emitted bool
	}
	comps := map[protocol.ID]*comp{}
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case Start, Final, Void:
			c := comps[e.Record.ID]
			if c == nil {
				c = &comp{first: i}
				comps[e.Record.ID] = c
			}
			switch {
			case e.Kind == Start && c.start == nil:
				c.start = e
			case e.Kind == Final && c.final == nil:
				c.final = e
			case e.Kind == Void:
				c.void = true
			}
		}
	}
	out := make([]Entry, 0, len(entries))
	for i, e := range entries {
		switch e.Kind {
		case Update, Data:
			out = append(out, e)
		case Start, Final, Void:
			c := comps[e.Record.ID]
			if c.first != i || c.emitted {
				continue
			}
			c.emitted = true
			switch {
			case c.final != nil:
				out = append(out, Entry{Kind: Final, Record: c.final.Record})
			case c.start != nil && !c.void:
				rec := c.start.Record
				rec.Status, rec.Error, rec.Summary = protocol.Failed, ErrInterrupted.Error(), nil
				out = append(out, Entry{Kind: Final, Record: rec, Interrupted: true})
			}
		}
	}
	return out
}

// Remove forgets sessionID's history (a session the agent closed, whose
// history ends with it). A Log still open on it writes to nothing from
// then on.
func (m *Memory) Remove(sessionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, sessionID)
}
