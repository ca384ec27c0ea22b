package tap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
)

// Persistence (agentkit.WithStore). A Kit with a store keeps one Book, which
// its connections' taps share: the histories of the sessions the kit
// writes, open for appending while a connection of the kit holds them (a
// session it created, loaded, or recorded anything of), closed when the
// last such connection ends, when the session closes, and at the kit's
// Shutdown. What the Book keeps per session is what placing the next
// entry needs: the open Log, and the entries it could not write yet.
//
// Which entries, and when (docs/records.md, "The kit keeps the history"):
//
//   - every session/update the agent writes, before it is written (a
//     failure refuses the write: the client sees nothing the history lacks),
//     but for the session's state (the kinds in notHistory) and for what a
//     replay in flight sends (it replays what is recorded);
//   - a v1 client's prompt, as the user_message_chunk updates a replay
//     shows it by, when the kit reads it (v2 agents send user_message
//     themselves);
//   - a compaction's start, before the compaction opens (a failure refuses
//     the start), and a Void when the emitter then refused it;
//   - a compaction's final record, when it settles (OnFinalRecord);
//   - the runtime's data (Session.Keep) and records it makes without a
//     connection (Kit.Record).
//
// What cannot be refused (a prompt the client sent, the final record of a
// compaction the client saw settle) and cannot be written after the
// retries is kept in memory, up to maxPendingEntries entries a session, and
// written before the session's next entry; while it waits, everything the
// runtime records in the session (Start, Send, Keep) is refused with
// ErrStore, so that nothing the history cannot hold reaches the client.

// ErrNoStore: the kit has no store (agentkit.WithStore).
var ErrNoStore = errors.New("no store configured (agentkit.WithStore)")

// StoreTimeout bounds one call of the store.
const StoreTimeout = 5 * time.Second

// maxPendingEntries bounds the entries a session keeps in memory when its store
// fails; past it they are dropped, and logged.
const maxPendingEntries = 64

// retryDelays are the pauses between the attempts of one write.
var retryDelays = [...]time.Duration{10 * time.Millisecond, 100 * time.Millisecond}

// Book is a kit's open session histories. Safe for concurrent use.
type Book struct {
	store history.Store
	log   *slog.Logger
	// errStore is the public package's sentinel, which every error of the
	// book's wraps.
	errStore error

	mu    sync.Mutex
	hists map[string]*hist
}

// NewBook returns the book of a kit whose store is store; errStore is the
// public package's sentinel (agentkit.ErrStore).
func NewBook(store history.Store, log *slog.Logger, errStore error) *Book {
	if log == nil {
		log = slog.Default()
	}
	return &Book{store: store, log: log, errStore: errStore, hists: map[string]*hist{}}
}

// hist is one session's history as the book keeps it.
type hist struct {
	id string

	mu      sync.Mutex // serializes the session's appends
	log     history.Log
	pending []history.Entry // written before the next entry
	dropped int             // pending entries lost past maxPending
	// running are the compactions whose start this process wrote and
	// whose final record it has not: a replay skips them (the emitter's
	// Replay skips a running compaction), where the store reads them
	// back interrupted.
	running map[protocol.ID]struct{}
	holders map[*Tap]struct{} // under Book.mu
	// gone: closed and forgotten by the book (set under Book.mu, before
	// the close takes mu): a writer that finds it set takes the session's
	// new hist instead.
	gone atomic.Bool
}

// how says how an entry's session is opened when the book has not opened
// it yet.
type how uint8

const (
	// openExisting: only a session the store has (a client's prompt: a
	// prompt for an unknown session must not make one).
	openExisting how = iota
	// openOrCreate: the runtime (or the client, through a compaction it
	// saw) says the session exists.
	openOrCreate
	// create: the agent has just created it (session/new).
	create
)

// get returns the book's hist of sessionID, making it if need be, held by
// t (nil: by nobody; it is closed after the caller's entry).
func (b *Book) get(t *Tap, sessionID string) *hist {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hists[sessionID]
	if h == nil {
		h = &hist{id: sessionID, holders: map[*Tap]struct{}{}}
		b.hists[sessionID] = h
	}
	if t != nil {
		if _, ok := h.holders[t]; !ok {
			h.holders[t] = struct{}{}
			t.held(h)
		}
	}
	return h
}

// openLocked opens h's log as m says; h.mu is held. It reports false,
// with no error, for a session the store does not have when m is
// openExisting.
func (b *Book) openLocked(ctx context.Context, h *hist, m how) (bool, error) {
	if h.log != nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StoreTimeout)
	defer cancel()
	var l history.Log
	var err error
	if m == create {
		l, err = b.store.Create(ctx, h.id)
		if errors.Is(err, history.ErrExist) {
			l, err = b.store.Open(ctx, h.id)
		}
	} else {
		l, err = b.store.Open(ctx, h.id)
		if errors.Is(err, history.ErrNotFound) {
			if m == openExisting {
				return false, nil
			}
			l, err = b.store.Create(ctx, h.id)
		}
	}
	if err != nil {
		return false, err
	}
	h.log = l
	return true, nil
}

// wrap names the session in a store error, wrapping the public sentinel.
func (b *Book) wrap(sessionID string, err error) error {
	return fmt.Errorf("%w: session %s: %w", b.errStore, sessionID, err)
}

// lock returns sessionID's hist, held by t (nil: by nobody), with its mu
// locked.
func (b *Book) lock(t *Tap, sessionID string) *hist {
	for {
		h := b.get(t, sessionID)
		h.mu.Lock()
		if !h.gone.Load() {
			return h
		}
		h.mu.Unlock()
	}
}

// open opens sessionID's history for t as m says, and returns its log, or
// nil for a session the store does not have (openExisting), with the
// compactions this process has open in it (see hist.running). The log
// stays open while t holds it. What the session keeps pending is written
// first, if it can be: a replay reads the store.
func (b *Book) open(ctx context.Context, t *Tap, sessionID string, m how) (history.Log, map[protocol.ID]bool, error) {
	h := b.lock(t, sessionID)
	_, err := b.openLocked(ctx, h, m)
	l := h.log
	if l != nil {
		_ = b.flushLocked(ctx, h)
	}
	running := make(map[protocol.ID]bool, len(h.running))
	for id := range h.running {
		running[id] = true
	}
	idle := l == nil && len(h.pending) == 0
	h.mu.Unlock()
	if idle {
		b.release(h, t) // nothing to keep of it
	}
	if err != nil {
		return nil, nil, b.wrap(sessionID, err)
	}
	return l, running, nil
}

// write appends e to sessionID's history for t, its pending entries
// first, opening the history as m says; each write is retried. refusable
// says the caller refuses what e describes when it cannot be written (it
// is then dropped); otherwise e is kept pending. A session the store does
// not have, when m is openExisting, is not written to.
func (b *Book) write(ctx context.Context, t *Tap, sessionID string, e history.Entry, m how, refusable bool) error {
	h := b.lock(t, sessionID)
	err := b.writeLocked(ctx, h, e, m, refusable)
	idle := h.log == nil && len(h.pending) == 0
	h.mu.Unlock()
	if t == nil || idle {
		// Closed unless a connection holds it; and nothing is kept of a
		// session the store does not have (a prompt for an unknown
		// session), so that memory follows the live sessions.
		b.release(h, t)
	}
	return err
}

func (b *Book) writeLocked(ctx context.Context, h *hist, e history.Entry, m how, refusable bool) error {
	ok, err := b.openLocked(ctx, h, m)
	if err == nil && !ok {
		return nil // not a session of the store's
	}
	if err == nil {
		err = b.flushLocked(ctx, h)
	}
	if err == nil {
		err = b.appendLocked(ctx, h, e)
	}
	if err == nil {
		h.track(e)
		return nil
	}
	if refusable {
		return b.wrap(h.id, err)
	}
	if len(h.pending) < maxPendingEntries {
		h.pending = append(h.pending, e)
		b.log.Error("agentkit: an entry of the session's history could not be written; it is kept in memory and written before the session's next entry, and until then the runtime's records in the session are refused",
			"session", h.id, "entry", e.Kind.String(), "compaction", string(e.Record.ID), "status", string(e.Record.Status), "error", err)
	} else {
		h.dropped++
		b.log.Error("agentkit: an entry of the session's history could not be written and is lost: the session's replay will lack it",
			"session", h.id, "entry", e.Kind.String(), "compaction", string(e.Record.ID), "status", string(e.Record.Status), "error", err)
	}
	return b.wrap(h.id, err)
}

// flushLocked writes the entries h keeps pending, in order.
func (b *Book) flushLocked(ctx context.Context, h *hist) error {
	for len(h.pending) > 0 {
		if err := b.appendLocked(ctx, h, h.pending[0]); err != nil {
			return fmt.Errorf("an earlier entry is still unwritten: %w", err)
		}
		b.log.Info("agentkit: an entry of the session's history written late", "session", h.id, "entry", h.pending[0].Kind.String(), "compaction", string(h.pending[0].Record.ID))
		h.track(h.pending[0])
		h.pending[0] = history.Entry{}
		h.pending = h.pending[1:]
	}
	h.pending = nil
	return nil
}

// appendLocked appends one entry, retrying a failed write twice.
func (b *Book) appendLocked(ctx context.Context, h *hist, e history.Entry) error {
	var err error
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StoreTimeout)
		err = h.log.Append(actx, e)
		cancel()
		if err == nil || attempt == len(retryDelays) {
			return err
		}
		time.Sleep(retryDelays[attempt])
	}
}

// track notes a compaction's start, or its end, once written.
func (h *hist) track(e history.Entry) {
	switch e.Kind {
	case history.Start:
		if h.running == nil {
			h.running = map[protocol.ID]struct{}{}
		}
		h.running[e.Record.ID] = struct{}{}
	case history.Final, history.Void:
		delete(h.running, e.Record.ID)
	}
}

// release lets go of h for t (nil: nobody): the last holder closes it,
// writing what it keeps pending first.
func (b *Book) release(h *hist, t *Tap) {
	b.mu.Lock()
	if t != nil {
		delete(h.holders, t)
		t.unheld(h)
	}
	last := len(h.holders) == 0 && !h.gone.Load()
	if last {
		h.gone.Store(true)
		if b.hists[h.id] == h {
			delete(b.hists, h.id)
		}
	}
	b.mu.Unlock()
	if last {
		b.closeHist(h)
	}
}

// closeSession closes sessionID's history: the agent closed the session.
func (b *Book) closeSession(sessionID string) {
	b.mu.Lock()
	h := b.hists[sessionID]
	if h != nil {
		h.gone.Store(true)
		delete(b.hists, sessionID)
		for t := range h.holders {
			t.unheld(h)
		}
	}
	b.mu.Unlock()
	if h != nil {
		b.closeHist(h)
	}
}

// closeHist writes what h keeps pending, once more, and closes its log.
func (b *Book) closeHist(h *hist) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.log == nil {
		return
	}
	if err := b.flushLocked(context.Background(), h); err != nil {
		b.log.Error("agentkit: the session's history is closed with entries unwritten: its replay will lack them",
			"session", h.id, "entries", len(h.pending), "error", err)
	}
	if h.dropped > 0 {
		b.log.Error("agentkit: the session's history lacks entries that could not be written", "session", h.id, "entries", h.dropped)
	}
	if err := h.log.Close(); err != nil {
		b.log.Warn("agentkit: the session's history did not close cleanly", "session", h.id, "error", err)
	}
	h.log = nil
}

// Close closes every history the book holds (the kit's Shutdown).
func (b *Book) Close() {
	b.mu.Lock()
	hs := make([]*hist, 0, len(b.hists))
	for _, h := range b.hists {
		h.gone.Store(true)
		for t := range h.holders {
			t.unheld(h)
		}
		hs = append(hs, h)
	}
	clear(b.hists)
	b.mu.Unlock()
	for _, h := range hs {
		b.closeHist(h)
	}
}

// Record writes a compaction's final record to sessionID's history without
// a connection (Kit.Record): the runtime applied a compaction while no
// client was connected, or after Shutdown. A record without an ID gets a
// new one.
func (b *Book) Record(ctx context.Context, sessionID string, rec emitter.Record) error {
	if b == nil {
		return ErrNoStore
	}
	if !rec.Status.Terminal() {
		return fmt.Errorf("%w: session %s: a record without a terminal status (%q) is no compaction's final record", b.errStore, sessionID, rec.Status)
	}
	if rec.ID == "" {
		rec.ID = protocol.ID(newID())
	}
	return b.write(ctx, nil, sessionID, history.Entry{Kind: history.Final, Record: rec}, openOrCreate, true)
}

// newID returns a compaction ID for a record that came without one.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "cmp_" + hex.EncodeToString(b[:])
}
