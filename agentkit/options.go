package agentkit

import (
	"errors"
	"log/slog"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
)

// Sentinel errors of both kits (agentkit/acpsdk's are the same values);
// errors returned by either kit that stem from one of them wrap it, so
// callers branch with errors.Is. (A call the turn guard judges after a
// turn's end is refused with the emitter's errors: see Session.)
var (
	// ErrNotInitialized: the connection has not yet answered initialize
	// successfully, so it is not known how the client takes compaction.
	ErrNotInitialized = errors.New("agentkit: the connection's initialize exchange has not completed")
	// ErrClosed: the connection has closed; its compactions were settled.
	ErrClosed = errors.New("agentkit: the connection is closed")
	// ErrUnknownConn: there is no kit connection to use: SessionFrom was
	// given a context that no handler of a kit's connection derived, or
	// the Kit does not serve the connection given to it (another Kit
	// created it, or it has closed and the Kit forgot it).
	ErrUnknownConn = errors.New("agentkit: no connection of this kit (not a kit handler's context, another kit's connection, or a closed one)")
	// ErrStore: the session's history could not be written or read (the
	// store's error is wrapped too: history.ErrNotFound, ErrLocked, a
	// store's own), or the kit has no store (WithStore). What it refused
	// did not reach the client: a compaction's start, an update.
	ErrStore = errors.New("agentkit: the session's history could not be written or read")
)

// DefaultCancelGrace is the cancel grace when WithCancelGrace is not
// given: 5 s.
const DefaultCancelGrace = tap.DefaultCancelGrace

// CloseTimeout bounds a connection's close (Kit.Shutdown, Kit.CloseConn,
// the client hanging up): how long settling what is open and writing what
// is queued may wait for a client that does not read, after which what it
// has not taken is dropped. It runs from the close, or from the start of
// the write in progress if that began earlier, so a client that has taken
// nothing for CloseTimeout already is not waited for again.
const CloseTimeout = tap.CloseTimeout

// settings is what the options set.
type settings = tap.Config

// Option configures a Kit: of this package, or of agentkit/acpsdk, whose
// Option is this type.
type Option func(*settings)

// WithFallback sets how a v1 client that did not advertise the compaction
// capability is shown compaction (see package fallback). By default it is
// shown fallback.ToolCall(): a "Compact conversation" tool call that always
// settles, the one form every observed client displays, and the default of
// the proxy and the scenario agent too. fallback.None{} shows it nothing;
// nil restores the default.
func WithFallback(r emitter.Renderer) Option { return func(s *settings) { s.Fallback = r } }

// WithCancelGrace sets the cancel grace: how long the runtime may take,
// after session/cancel, to report the cancelled turn's open compactions
// before the kit settles them as cancelled. It means the same for every
// host of the wire engine (both kits, the proxy, the scenario agent's
// --cancel-grace):
//
//   - d > 0: they are settled d after the cancel (a compaction started
//     after the grace ran out gets a grace of its own);
//   - d == 0: they are settled at once, as soon as the cancel arrives;
//   - d < 0: no deadline: they are settled when the turn ends.
//
// The default is DefaultCancelGrace (5 s). Either way the prompt's
// response still goes out when the agent's handler returns: the kit never
// answers a request on the agent's behalf.
func WithCancelGrace(d time.Duration) Option { return func(s *settings) { s.CancelGrace = d } }

// WithEmitterOptions passes options to each connection's emitter, after the
// kit's own (the negotiation and the fallback), so they may override them.
func WithEmitterOptions(opts ...emitter.Option) Option {
	return func(s *settings) { s.EmitterOptions = append(s.EmitterOptions, opts...) }
}

// WithStore makes the kit keep every session's history in store, by
// itself: each session update the agent sends (before it is sent), a v1
// client's prompts, each compaction's start (before the client sees it)
// and final record, at their places, so that Session.ReplayHistory
// replays, in a later process too, what the client saw live, an
// interrupted compaction failed. The runtime writes no record code. store
// is sessionlog's (sessionlog.Store.History, files: the embedded default)
// or sqlstore's (a SQL database), or any history.Store. An
// emitter.OnFinalRecord among WithEmitterOptions is still called, after the
// store has the record (sinks add up). See
// docs/records.md ("The kit keeps the history") for what is written when,
// and what happens when the store fails.
func WithStore(store history.Store) Option { return func(s *settings) { s.Store = store } }

// WithAudit has the kit audit the summary of every completed compaction
// against the session's history as the connection carried it (prompts,
// agent messages, tool calls: package audit says what is extracted and
// when a reference survives), and add what the summary lost to the
// compaction's record (emitter.Details.KnownLoss: kind, value, where). The
// record goes where it goes without the audit: under the record key of the
// terminal update's _meta with emitter.WithRecords, to the store with
// WithStore, to an emitter.OnFinalRecord sink; a client that did not ask
// for records never gets an audit. Off by default: it reads every message
// the connection carries.
func WithAudit() Option { return func(s *settings) { s.Audit = true } }

// WithLogger sets where the kit logs negotiation diagnostics, settlements it
// performs and panics it sees (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.Logger = l } }

// newSettings returns the defaults with opts applied.
func newSettings(opts ...Option) settings {
	return tap.NewConfig("agentkit", ErrNotInitialized, ErrClosed, ErrStore, opts...)
}
