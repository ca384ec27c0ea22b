package proxy

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/jsonedit"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

type trackKey struct {
	session string
	id      protocol.ID
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
	// settled: the compaction reached its one terminal form, by the proxy
	// (byProxy: the agent's later lines for it are dropped) or by the
	// agent (a second terminal from it is dropped too).
	settled, byProxy bool

	// What the agent said about the compaction, for its rendering.
	//
	// trigger is the agent's ("" when it said none: it is left out, not
	// guessed).
	trigger protocol.Trigger
	// facts are the token counts and duration it reported (nil: none).
	facts *agents.Facts
	// record is the compaction record the agent sent itself under the
	// record key; it is kept as sent.
	record json.RawMessage
	// afterFact: reported only once over, so the proxy's timing means
	// nothing.
	afterFact bool
	// background: it outlives its turn (emitter.Background): the client
	// sees nothing of it until it settled, so no heartbeat goes out for it.
	background bool
	// toolID, toolMeta, rawOutput: the agent's own compaction tool call,
	// which a tool call fallback renders in place of its own.
	toolID              string
	toolMeta, rawOutput json.RawMessage
	// h is the emitter's handle of the compaction (nil for a replay's).
	h *emitter.Compaction
}

// trackStatus is how far a followed compaction got.
type trackStatus uint8

const (
	trackNone    trackStatus = iota // not followed
	trackOpen                       // started, not settled
	trackByProxy                    // settled by the proxy for an agent that did not
	trackByAgent                    // settled by the agent
)

// router is the emitter's renderer. The emitter has one renderer per
// connection, but the proxy shows each compaction in the form its source
// calls for, so the router looks the compaction up and delegates. It
// knows nothing of the connection: who settled a compaction comes with
// the settlement (the host's settlements, or a settlement made in
// byProxy), and the proxy's settlements wait in done for the host's
// After hook (conn.afterSettle).
type router struct {
	mu     sync.Mutex
	tracks map[trackKey]*track
	// proxy: a settlement in progress is the proxy's own (byProxy).
	proxy bool
	done  []settled
}

func newRouter() *router { return &router{tracks: map[trackKey]*track{}} }

func (r *router) add(k trackKey, t *track) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tracks[k] = t
}

// addTemp adds t for a one-off rendering (a replay) and returns the
// function that puts back what was there: an open track is left in place.
func (r *router) addTemp(k trackKey, t *track) (undo func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.tracks[k]
	if ok && !old.settled {
		return func() {}
	}
	r.tracks[k] = t
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ok {
			r.tracks[k] = old
		} else {
			delete(r.tracks, k)
		}
	}
}

func (r *router) remove(k trackKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tracks, k)
}

// shown reports how far compaction k got, and whether, the agent's own
// standard one, it is shown through the emitter rather than verbatim (it
// was held between turns), so that its later updates go the same way.
func (r *router) shown(k trackKey) (trackStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tracks[k]
	switch {
	case !ok:
		return trackNone, false
	case !t.settled:
		return trackOpen, t.source == sourceStandard && !t.verbatim
	case t.byProxy:
		return trackByProxy, t.source == sourceStandard && !t.verbatim
	}
	return trackByAgent, t.source == sourceStandard && !t.verbatim
}

// status reports how far compaction k got.
func (r *router) status(k trackKey) trackStatus {
	st, _ := r.shown(k)
	return st
}

// render has the rest of compaction k shown through its renderer rather
// than by the agent's own lines.
func (r *router) render(k trackKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tracks[k]; ok {
		t.verbatim = false
	}
}

// setHandle keeps the emitter's handle of open compaction k.
func (r *router) setHandle(k trackKey, h *emitter.Compaction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tracks[k]; ok {
		t.h = h
	}
}

// handle is the emitter's handle of compaction k; a nil handle's calls
// fail with emitter.ErrNotOpen.
func (r *router) handle(k trackKey) *emitter.Compaction {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tracks[k]; ok {
		return t.h
	}
	return nil
}

// byProxy runs f, a settlement of the proxy's own made through the
// runtime's calls (a failure with the agent's own error text), as one.
func (r *router) byProxy(f func()) {
	r.mu.Lock()
	r.proxy = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.proxy = false
		r.mu.Unlock()
	}()
	f()
}

// takeSettled returns the compactions the proxy settled since the last
// call.
func (r *router) takeSettled() []settled {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.done
	r.done = nil
	return d
}

// learn keeps what a later signal of open compaction k says about it.
func (r *router) learn(k trackKey, sig agents.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tracks[k]
	if !ok {
		return
	}
	if sig.Trigger != "" {
		t.trigger = sig.Trigger
	}
	if sig.Facts != nil {
		t.facts = sig.Facts
	}
	if sig.ToolMeta != nil {
		t.toolMeta = sig.ToolMeta
	}
	if sig.RawOutput != nil {
		t.rawOutput = sig.RawOutput
	}
}

// hasFacts reports whether the agent reported facts about k.
func (r *router) hasFacts(k trackKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tracks[k]
	return ok && t.facts != nil
}

// keepRecord keeps the record the agent sent for k itself.
func (r *router) keepRecord(k trackKey, rec json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tracks[k]; ok {
		t.record = rec
	}
}

// forget drops what the router follows of a session the agent closed.
func (r *router) forget(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.tracks {
		if k.session == sid {
			delete(r.tracks, k)
		}
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
	byProxy := false
	if ev.Kind == emitter.EventReplayed && !t.settled {
		// A replay settles what it replays (emitter.Session.Replay): the
		// agent's own report of its ID.
		t.settled = true
	}
	if ev.Kind == emitter.EventSettled {
		// The host's settlements are the emitter's own (SettleAll); a
		// runtime call is the agent's, unless made in byProxy.
		byProxy = ev.ByHost || r.proxy
		t.settled, t.byProxy = true, byProxy
		if byProxy {
			r.done = append(r.done, settled{ev: ev, source: t.source, idless: t.idless})
		}
	}
	snap := *t
	r.mu.Unlock()
	if snap.verbatim && !byProxy {
		if ev.Kind != emitter.EventHeartbeat {
			return nil // the agent's own lines show it
		}
		// The agent's own lines have no progress form but its standard
		// update's and its tool call's: the heartbeat is a field-less
		// in_progress of either (a text or a marker has none that is not
		// a new message).
		switch {
		case snap.source == sourceStandard:
			return emitter.Standard{}.Render(ctx, ev, n)
		case snap.toolID != "":
			return snap.r.Render(ctx, ev, n)
		}
		return nil
	}
	snap.shape(&ev)
	return snap.r.Render(ctx, ev, snap.notifier(n, ev.ID))
}

// shape makes the event say what the agent said: its trigger or none (the
// emitter's default, manual, would be a guess), and on the terminal update
// the record of what it reported, or none.
func (t *track) shape(ev *emitter.Event) {
	ev.Trigger = t.trigger
	if ev.Kind != emitter.EventSettled && ev.Kind != emitter.EventReplayed {
		return
	}
	var meta protocol.Meta
	if len(ev.Meta) > 0 {
		meta = maps.Clone(ev.Meta)
		delete(meta, emitter.DefaultRecordKey)
	}
	if rec := t.recordFor(ev); rec != nil {
		if meta == nil {
			meta = protocol.Meta{}
		}
		meta[emitter.DefaultRecordKey] = rec
	}
	if len(meta) == 0 {
		meta = nil
	}
	ev.Meta = meta
}

// record is the compaction record the proxy sends (the README's keys):
// only what the agent reported, with the status and, for a compaction it
// saw run, the timing.
type record struct {
	Trigger      protocol.Trigger      `json:"trigger,omitempty"`
	Status       protocol.Status       `json:"status,omitempty"`
	TokensBefore int64                 `json:"tokensBefore,omitempty"`
	TokensAfter  int64                 `json:"tokensAfter,omitempty"`
	Source       *emitter.MessageRange `json:"source,omitempty"`
	StartedAt    *time.Time            `json:"startedAt,omitempty"`
	EndedAt      *time.Time            `json:"endedAt,omitempty"`
	DurationMs   *int64                `json:"durationMs,omitempty"`
	// KnownLoss is what an audit found the summary lost (WithAudit).
	KnownLoss []emitter.Loss `json:"knownLoss,omitempty"`
}

// recordFor is the record of a terminal event: the agent's own, one made
// of what it reported, or nil when it reported nothing.
func (t *track) recordFor(ev *emitter.Event) json.RawMessage {
	var lost []emitter.Loss
	if ev.Details != nil {
		lost = ev.Details.KnownLoss
	}
	if t.record != nil {
		// The agent's own record, with what the audit found; one that is
		// not an object goes as it came.
		var m map[string]json.RawMessage
		b, err := json.Marshal(lost)
		if len(lost) == 0 || err != nil || json.Unmarshal(t.record, &m) != nil || m == nil {
			return t.record
		}
		m["knownLoss"] = b
		return jsonedit.Marshal(m)
	}
	f := t.facts
	if f == nil && len(lost) == 0 {
		return nil
	}
	if f == nil {
		f = &agents.Facts{}
	}
	rec := record{Trigger: t.trigger, Status: ev.Status, TokensBefore: f.TokensBefore, TokensAfter: f.TokensAfter, DurationMs: f.DurationMs, KnownLoss: lost}
	if f.Messages > 0 {
		rec.Source = &emitter.MessageRange{Count: f.Messages}
	}
	if d := ev.Details; d != nil && t.facts != nil && f.DurationMs == nil && !t.afterFact && ev.Kind == emitter.EventSettled {
		started, ended, ms := d.StartedAt, d.EndedAt, d.DurationMs
		rec.StartedAt, rec.EndedAt, rec.DurationMs = &started, &ended, &ms
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil
	}
	return b
}

// notifier is where the track's rendering goes: for the agent's own
// compaction tool call rendered by a tool call fallback, the agent's tool
// call ID, _meta and rawOutput are kept instead of the fallback's own.
func (t *track) notifier(n emitter.Notifier, id protocol.ID) emitter.Notifier {
	if t.toolID == "" {
		return n
	}
	return agents.KeepToolCall(n, fallback.ToolCallID(id), t.toolID, t.toolMeta, t.rawOutput)
}
