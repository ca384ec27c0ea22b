package kittest

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// SessionID is the session the shared tests prompt.
const SessionID = "sess_1"

// Starter opens a compaction: both kits' Session.
type Starter interface {
	Start(ctx context.Context, opts ...emitter.StartOption) (*emitter.Compaction, error)
}

// Session is a kit's Session, as its SessionFrom returns it.
type Session interface {
	Starter
	Compaction(id protocol.ID) (*emitter.Compaction, error)
	Replay(ctx context.Context, rec emitter.Record) error
	Send(ctx context.Context, update any) error
	Keep(ctx context.Context, data any) error
	ReplayHistory(ctx context.Context, restore func(history.Entry) error) error
}

// Errors are a kit's sentinel errors.
type Errors struct {
	NotInitialized error
	UnknownConn    error
	Closed         error
	Store          error
}

// Stack is one kit's half of the shared tests: it serves an Agent on a
// kit of its own, on the transport its tests use, and knows the kit's
// package-level API. The shared tests are written once against it, so the
// two kits meet the same scripts and the same checks; kittest imports
// neither kit.
type Stack interface {
	// Serve starts a kit configured by cfg and an agent on it whose
	// handlers run a's, and returns the connection's client end.
	Serve(cfg Config, a *Agent) Served
	// SessionFrom is the kit's SessionFrom.
	SessionFrom(ctx context.Context, sessionID string) Session
	// Errors are the kit's sentinels.
	Errors() Errors
	// Kit makes a kit of the stack's with store (none when nil), served
	// on no connection: its Record and Shutdown.
	Kit(store history.Store) Kit
}

// Kit is what the shared tests call of a kit that serves no connection.
type Kit interface {
	Record(ctx context.Context, sessionID string, rec emitter.Record) error
	Shutdown(ctx context.Context) error
}

// Config is a kit's configuration, in the options both kits have.
type Config struct {
	// CancelGrace, when not nil, is passed to WithCancelGrace (see Grace).
	CancelGrace *time.Duration
	// Fallbacks are passed to WithFallback one after the other (a nil
	// restores the default).
	Fallbacks []emitter.Renderer
	// Emitter is passed to WithEmitterOptions.
	Emitter []emitter.Option
	// WrapOutput, when not nil, wraps the agent's output: everything the
	// stack writes to the client goes through it.
	WrapOutput func(io.Writer) io.Writer
	// Store, when not nil, is passed to WithStore.
	Store history.Store
	// Audit is passed as WithAudit.
	Audit bool
}

// Grace returns d for Config.CancelGrace.
func Grace(d time.Duration) *time.Duration { return &d }

// Options are cfg as a kit's options, made by its WithCancelGrace,
// WithFallback, WithEmitterOptions, WithStore and WithAudit.
func Options[O any](cfg Config, grace func(time.Duration) O, fallback func(emitter.Renderer) O, em func(...emitter.Option) O,
	store func(history.Store) O, audit func() O) []O {
	var opts []O
	if cfg.Audit {
		opts = append(opts, audit())
	}
	if cfg.CancelGrace != nil {
		opts = append(opts, grace(*cfg.CancelGrace))
	}
	for _, f := range cfg.Fallbacks {
		opts = append(opts, fallback(f))
	}
	if cfg.Emitter != nil {
		opts = append(opts, em(cfg.Emitter...))
	}
	if cfg.Store != nil {
		opts = append(opts, store(cfg.Store))
	}
	return opts
}

// Prompt is a session/prompt as the agent's handler reads it.
type Prompt struct {
	SessionID string
	// Text is the text of the prompt's first block.
	Text string
}

// Agent is the agent of a shared test: the stack's agent runs these
// handlers; one that is nil answers as a minimal agent would.
type Agent struct {
	// Prompt handles session/prompt: it returns the stop reason, or an
	// error the stack answers the prompt with.
	Prompt func(ctx context.Context, c Conn, p Prompt) (stopReason string, err error)
	// Load handles session/load; the stack answers it once Load returns.
	Load func(ctx context.Context, c Conn, sessionID string) error
	// Cancel is called for each session/cancel the agent handles.
	Cancel func(sessionID string)
}

// Conn is the agent's connection, as its stack gives it.
type Conn interface {
	// Message sends sessionID an agent_message_chunk with text, an update
	// of the agent's own, the way the stack's agents send theirs.
	Message(ctx context.Context, sessionID, text string) error
	// Emitter is the kit's Emitter of the connection.
	Emitter() (*emitter.Emitter, error)
}

// Served is an agent connection as a Stack serves it.
type Served struct {
	// Client is the client's end of the connection.
	Client io.ReadWriteCloser
	// Conn is the agent's connection.
	Conn Conn
	// Close ends the connection the way the stack's tests hang up, so that
	// what the kit settles at the connection's end still reaches the
	// client, and returns once the agent's side is done.
	Close func()
	// Shutdown is the kit's Shutdown.
	Shutdown func(ctx context.Context) error
}

// Rig is one served agent connection and the Client on its other end.
type Rig struct {
	T testing.TB
	// Ctx bounds the test (see Within). A failure detector only: no
	// assertion depends on how long anything takes.
	Ctx    context.Context
	Client *Client
	Served Served
	closed bool
}

// NewRig connects a Client to served; the test's cleanup closes them.
func NewRig(t testing.TB, served Served) *Rig {
	t.Helper()
	r := &Rig{T: t, Served: served}
	r.Within(30 * time.Second)
	r.Client = NewClient(context.Background(), served.Client)
	t.Cleanup(r.Close)
	return r
}

// Serve serves a on st, with cfg, and returns the rig on the connection.
func Serve(t testing.TB, st Stack, cfg Config, a *Agent) *Rig {
	t.Helper()
	return NewRig(t, st.Serve(cfg, a))
}

// Within gives the rest of the test d (Ctx).
func (r *Rig) Within(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	r.T.Cleanup(cancel)
	r.Ctx = ctx
}

// Close hangs up (Served.Close) and waits for the client to see the end.
// It may be called more than once.
func (r *Rig) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Served.Close()
	<-r.Client.Conn.DisconnectNotify()
}

// Initialize runs the client's initialize for protocol version (v1 with the
// compaction capability when capable), or fails the test.
func (r *Rig) Initialize(version int, capable bool) {
	r.T.Helper()
	_, err := r.Client.Initialize(r.Ctx, version, capable)
	require.NoError(r.T, err, "initialize")
}

// Finish closes the connection and checks the whole record: the turn rules
// (CheckTurns) and the official schema (Validate). It returns the record.
func (r *Rig) Finish(version int) []Event {
	r.T.Helper()
	r.Close()
	evs := r.Client.Wire.Events()
	assert.NoError(r.T, CheckTurns(evs, version), "turn rules broken; wire:\n%s", Dump(evs))
	Validate(r.T, evs, version)
	return evs
}

// StartPrompt sends a session/prompt for SessionID and waits until a
// compaction is in progress on the wire. It returns the prompt's pending
// response.
func (r *Rig) StartPrompt() jsonrpc2.Waiter {
	r.T.Helper()
	call, err := r.Client.Conn.DispatchCall(r.Ctx, "session/prompt", PromptParams(SessionID, nil))
	require.NoError(r.T, err)
	_, err = r.Client.Wire.Wait(r.Ctx, func(e Event) bool { return e.Status == "in_progress" })
	require.NoError(r.T, err)
	return call
}

// V2Turn plays a v2 client's turn: initialize, a session/prompt (its
// answer acknowledges it; the turn runs on), and, once the turn's idle
// state_update has arrived and runtimeDone (which waits for the agent's
// runtime) has returned, Finish. It returns what the client received
// (Summary).
func (r *Rig) V2Turn(runtimeDone func()) []string {
	r.T.Helper()
	r.Initialize(2, false)
	_, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(r.T, err)
	_, err = r.Client.Wire.Wait(r.Ctx, func(e Event) bool { return e.State == "idle" })
	require.NoError(r.T, err)
	runtimeDone()
	return Summary(r.Finish(2))
}

// Main is a kit's TestMain. In a child that StartChild started (env is
// set), it runs the agent of the mode env names instead of the tests, then
// exits: signal for "signal" (see CheckSignalSettles), else crash with the
// mode (see CheckCrashSettles). Otherwise it runs the tests and fails them
// when a goroutine outlives them.
func Main(m *testing.M, env string, signal func(), crash func(mode string)) {
	switch mode := os.Getenv(env); mode {
	case "":
		goleak.VerifyTestMain(m)
	case "signal":
		signal()
		os.Exit(0)
	default:
		crash(mode)
		os.Exit(0)
	}
}

// once makes f safe to call more than once.
func once(f func()) func() {
	var o sync.Once
	return func() { o.Do(f) }
}
