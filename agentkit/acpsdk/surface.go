package acpsdk

import (
	"context"
	"log/slog"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
)

// The reporting surface is package agentkit's, written there once: the
// names below are agentkit's own (aliases, the same values, forwarding
// functions), kept so that code written against this import path compiles
// unchanged. Their documentation is agentkit's.

// Session is agentkit.Session: the reporter of one ACP session on the
// connection of the handler that got it from SessionFrom (Start,
// Compaction, Replay; see agentkit.Session for the turn guard and the
// errors).
type Session = agentkit.Session

// Option configures a Kit: it is agentkit.Option, so the options of both
// kits are the same values.
type Option = agentkit.Option

// SessionFrom is agentkit.SessionFrom: the reporter of session sessionID on
// the connection whose handler ctx belongs to. Every method of the agent
// the kit runs, a raw MethodHandler included, gets such a context, and so
// does every context derived from it.
func SessionFrom(ctx context.Context, sessionID string) *Session {
	return agentkit.SessionFrom(ctx, sessionID)
}

// Recover is agentkit.Recover: `defer acpsdk.Recover(ctx)` first thing in
// goroutines of your own that run with a kit handler's context settles the
// connection's open compactions as failed (emitter.ErrAgentCrashed) when
// the goroutine panics, then panics again with the same value. (It calls
// recover itself: recover stops a panic only when the deferred function
// calls it directly, so it cannot forward to agentkit.Recover.)
func Recover(ctx context.Context) {
	if v := recover(); v != nil {
		if t := tap.From(ctx); t != nil {
			t.Crash()
		}
		panic(v)
	}
}

// The sentinel errors are agentkit's (errors.Is matches either name).
var (
	// ErrNotInitialized is agentkit.ErrNotInitialized.
	ErrNotInitialized = agentkit.ErrNotInitialized
	// ErrClosed is agentkit.ErrClosed.
	ErrClosed = agentkit.ErrClosed
	// ErrUnknownConn is agentkit.ErrUnknownConn.
	ErrUnknownConn = agentkit.ErrUnknownConn
	// ErrStore is agentkit.ErrStore.
	ErrStore = agentkit.ErrStore
)

// DefaultCancelGrace is agentkit.DefaultCancelGrace.
const DefaultCancelGrace = agentkit.DefaultCancelGrace

// CloseTimeout is agentkit.CloseTimeout: the bound of a connection's
// close (Kit.Shutdown, Kit.CloseConn, the client hanging up).
const CloseTimeout = agentkit.CloseTimeout

// WithFallback is agentkit.WithFallback: how a v1 client without the
// compaction capability is shown compaction (default fallback.ToolCall()).
func WithFallback(r emitter.Renderer) Option { return agentkit.WithFallback(r) }

// WithCancelGrace is agentkit.WithCancelGrace: how long the runtime has,
// after session/cancel, to settle the cancelled turn's compactions itself
// (default DefaultCancelGrace).
func WithCancelGrace(d time.Duration) Option { return agentkit.WithCancelGrace(d) }

// WithEmitterOptions is agentkit.WithEmitterOptions: options for each
// connection's emitter, after the kit's own.
func WithEmitterOptions(opts ...emitter.Option) Option {
	return agentkit.WithEmitterOptions(opts...)
}

// WithStore is agentkit.WithStore: the kit keeps every session's history
// in store by itself (Session.ReplayHistory replays it).
func WithStore(store history.Store) Option { return agentkit.WithStore(store) }

// WithAudit is agentkit.WithAudit: each completed compaction's summary is
// audited against the session's history, and what it lost joins the record.
func WithAudit() Option { return agentkit.WithAudit() }

// WithLogger is agentkit.WithLogger: where the kit logs (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return agentkit.WithLogger(l) }

// newSettings applies opts as agentkit.New does: they are agentkit's
// options, and both kits configure the same engine host (the tap), with
// agentkit's sentinels, through tap.NewConfig.
func newSettings(opts ...Option) tap.Config {
	return tap.NewConfig("agentkit", ErrNotInitialized, ErrClosed, ErrStore, opts...)
}
