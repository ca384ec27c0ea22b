package proxy

import (
	"context"
	"slices"
	"sync"

	"github.com/acpcompact/acpcompact/emitter"
)

type trackKey struct {
	session string
	id      emitter.ID
}

// track is how the client sees one compaction the proxy follows.
type track struct {
	// source is the translator, or "standard" for the agent's own
	// compaction updates; it names the compaction in logs.
	source string
	// idless: the agent's signal carries no ID, so the proxy minted one.
	idless bool
	// r renders the compaction's lifecycle events.
	r emitter.Renderer
	// verbatim: the agent's own lines, forwarded unchanged, already show
	// the start, progress and outcome; r only renders a terminal form the
	// proxy has to add because the agent never sent one.
	verbatim bool
	// byAgent is set just before the agent's own outcome is applied, so
	// that the settlement is not mistaken for one the proxy made.
	byAgent bool
	// settled: the proxy settled it; the agent's later lines for it are
	// dropped, since the client already holds its one terminal form.
	settled bool
}

// router is the emitter's renderer. The emitter has one renderer per
// connection, but the proxy shows each compaction in the form its source
// calls for, so the router looks the compaction up and delegates.
type router struct {
	c      *conn
	mu     sync.Mutex
	tracks map[trackKey]*track
}

func (r *router) add(k trackKey, t *track) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tracks[k] = t
}

// addTemp adds t for a one-off rendering (a replay) and returns the
// function that removes it again; an existing track is left in place.
func (r *router) addTemp(k trackKey, t *track) (undo func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tracks[k]; ok {
		return func() {}
	}
	r.tracks[k] = t
	return func() { r.remove(k) }
}

func (r *router) remove(k trackKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tracks, k)
}

// state reports whether k is open and whether the proxy settled it.
func (r *router) state(k trackKey) (open, settledByProxy bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tracks[k]
	if !ok {
		return false, false
	}
	return !t.settled, t.settled
}

// markAgent records that the next settlement of k is the agent's own.
func (r *router) markAgent(k trackKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tracks[k]; ok {
		t.byAgent = true
	}
}

// openSessions lists the sessions with an open compaction, sorted so that
// settlement order does not depend on map iteration.
func (r *router) openSessions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, t := range r.tracks {
		if !t.settled && !slices.Contains(out, k.session) {
			out = append(out, k.session)
		}
	}
	slices.Sort(out)
	return out
}

// Render implements emitter.Renderer.
func (r *router) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	k := trackKey{ev.SessionID, ev.ID}
	r.mu.Lock()
	t, ok := r.tracks[k]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	rend, verbatim := t.r, t.verbatim
	byProxy := false
	switch ev.Kind {
	case emitter.EventSettled:
		if t.byAgent {
			delete(r.tracks, k)
		} else {
			t.settled, byProxy = true, true
		}
	}
	source, idless := t.source, t.idless
	r.mu.Unlock()
	if byProxy {
		r.c.settledByProxy(ev, source, idless)
	}
	if verbatim && !byProxy {
		return nil
	}
	return rend.Render(ctx, ev, n)
}
