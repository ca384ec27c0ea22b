package acpsdk_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	acp "github.com/coder/acp-go-sdk"
)

func TestMain(m *testing.M) { kittest.Main(m, helperEnv, runSignalAgent, runCrashAgent) }

var discard = slog.New(slog.DiscardHandler)

// quiet keeps the kit's logs out of test output.
var quiet = acpsdk.WithLogger(discard)

const session = kittest.SessionID

// stubAgent answers every acp.Agent method but Prompt as a minimal agent
// would.
type stubAgent struct{}

// agent is a host acp.Agent. Prompt and LoadSession run the per-test
// functions.
type agent struct {
	stubAgent
	kit    *acpsdk.Kit
	mu     sync.Mutex
	conn   *acpsdk.Conn
	prompt func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error)
	load   func(ctx context.Context, p acp.LoadSessionRequest) error
	cancel func(p acp.CancelNotification) // called by Cancel
	last   context.Context                // see lastCtx
}

func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	if a.cancel != nil {
		a.cancel(p)
	}
	return nil
}

var _ acp.Agent = (*agent)(nil)
var _ acp.AgentLoader = (*agent)(nil)

func (a *agent) Conn() *acpsdk.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

// lastCtx returns the context of the latest call of Prompt or LoadSession.
func (a *agent) lastCtx() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

func (a *agent) record(ctx context.Context) {
	a.mu.Lock()
	a.last = ctx
	a.mu.Unlock()
}

func (stubAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (stubAgent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber, AgentCapabilities: acp.AgentCapabilities{LoadSession: true}}, nil
}

func (stubAgent) Cancel(context.Context, acp.CancelNotification) error { return nil }

func (stubAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (stubAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}

func (stubAgent) NewSession(context.Context, acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	return acp.NewSessionResponse{SessionId: session}, nil
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.record(ctx)
	if a.prompt == nil {
		return endTurn()
	}
	return a.prompt(ctx, p)
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	a.record(ctx)
	if a.load != nil {
		if err := a.load(ctx, p); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	return acp.LoadSessionResponse{}, nil
}

func (stubAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, nil
}

func (stubAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}

func (stubAgent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

func endTurn() (acp.PromptResponse, error) {
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func cancelled() (acp.PromptResponse, error) {
	return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
}

// pipes is the two one-way pipes between agent and client, so each side
// can hang up its sending half alone.
type pipes struct {
	toAgentR, fromAgentR *io.PipeReader
	toAgentW, fromAgentW *io.PipeWriter
}

func newPipes() *pipes {
	p := &pipes{}
	p.toAgentR, p.toAgentW = io.Pipe()
	p.fromAgentR, p.fromAgentW = io.Pipe()
	return p
}

// clientEnd is the client's io.ReadWriteCloser.
type clientEnd struct{ p *pipes }

func (c clientEnd) Read(b []byte) (int, error)  { return c.p.fromAgentR.Read(b) }
func (c clientEnd) Write(b []byte) (int, error) { return c.p.toAgentW.Write(b) }
func (c clientEnd) Close() error {
	_ = c.p.toAgentW.Close()
	return c.p.fromAgentR.Close()
}

// link is an agent connection on a kit and the pipes to its client.
type link struct {
	kit   *acpsdk.Kit
	pipes *pipes
	done  <-chan struct{} // the connection's Done, once served
	// wrapOut, when set, wraps the agent's output.
	wrapOut func(io.Writer) io.Writer
}

func newLink(opts ...acpsdk.Option) *link {
	return &link{kit: acpsdk.New(append([]acpsdk.Option{quiet}, opts...)...), pipes: newPipes()}
}

// serve connects a typed agent.
func (l *link) serve(a *agent) {
	a.kit = l.kit
	var out io.Writer = l.pipes.fromAgentW
	if l.wrapOut != nil {
		out = l.wrapOut(out)
	}
	a.mu.Lock()
	a.conn = l.kit.NewAgentSideConnection(a, out, l.pipes.toAgentR)
	a.conn.SetLogger(discard)
	l.done = a.conn.Done()
	a.mu.Unlock()
}

// serveRaw connects a raw method handler; conn is set before any message
// can reach h.
func (l *link) serveRaw(h func(conn *acpsdk.Conn) acp.MethodHandler) *acpsdk.Conn {
	var (
		mu   sync.Mutex
		conn *acpsdk.Conn
	)
	ready := make(chan struct{})
	conn = l.kit.NewConnection(func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
		<-ready
		mu.Lock()
		c := conn
		mu.Unlock()
		return h(c)(ctx, method, params)
	}, l.pipes.fromAgentW, l.pipes.toAgentR)
	conn.SetLogger(discard)
	close(ready)
	l.done = conn.Done()
	return conn
}

// hangUp hangs up the client's sending half first, so what the kit
// settles when the agent's input ends still reaches the client, and waits
// for the connection to end.
func (l *link) hangUp() {
	_ = l.pipes.toAgentW.Close()
	if l.done != nil {
		<-l.done
	}
	_ = l.pipes.fromAgentW.Close()
}

// served is the link as kittest serves it: conn is the agent's
// connection (nil while no typed agent is served).
func (l *link) served(conn kittest.Conn) kittest.Served {
	return kittest.Served{Client: clientEnd{l.pipes}, Conn: conn, Close: l.hangUp, Shutdown: l.kit.Shutdown}
}

// sdkConn is a typed agent's connection as kittest's agents see it.
type sdkConn struct{ a *agent }

func (c sdkConn) Message(ctx context.Context, sessionID, text string) error {
	return c.a.Conn().AgentSideConnection().SessionUpdate(ctx, acp.SessionNotification{SessionId: acp.SessionId(sessionID), Update: acp.UpdateAgentMessageText(text)})
}

func (c sdkConn) Emitter() (*emitter.Emitter, error) { return c.a.kit.Emitter(c.a.Conn()) }

// rig is one SDK agent connection and the client on its other end; the
// test serves an agent or a raw handler on it.
type rig struct {
	*kittest.Rig
	*link
}

func newRig(t *testing.T, opts ...acpsdk.Option) *rig {
	t.Helper()
	l := newLink(opts...)
	return &rig{Rig: kittest.NewRig(t, l.served(nil)), link: l}
}

// serve connects a typed agent.
func (r *rig) serve(a *agent) {
	r.link.serve(a)
	r.Served.Conn = sdkConn{a}
}

// stack is acpsdk's half of kittest's shared tests: a typed acp.Agent
// (agent) on its own kit, whose methods run kittest's handlers.
type stack struct{}

func (stack) Serve(cfg kittest.Config, ka *kittest.Agent) kittest.Served {
	opts := kittest.Options(cfg, acpsdk.WithCancelGrace, acpsdk.WithFallback, acpsdk.WithEmitterOptions, acpsdk.WithStore, acpsdk.WithAudit)
	l := newLink(opts...)
	l.wrapOut = cfg.WrapOutput
	a := &agent{}
	if ka.Prompt != nil {
		a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
			text := ""
			if len(p.Prompt) > 0 && p.Prompt[0].Text != nil {
				text = p.Prompt[0].Text.Text
			}
			stop, err := ka.Prompt(ctx, sdkConn{a}, kittest.Prompt{SessionID: string(p.SessionId), Text: text})
			return acp.PromptResponse{StopReason: acp.StopReason(stop)}, err
		}
	}
	if ka.Load != nil {
		a.load = func(ctx context.Context, p acp.LoadSessionRequest) error {
			return ka.Load(ctx, sdkConn{a}, string(p.SessionId))
		}
	}
	if ka.Cancel != nil {
		a.cancel = func(p acp.CancelNotification) { ka.Cancel(string(p.SessionId)) }
	}
	l.serve(a)
	return l.served(sdkConn{a})
}

func (stack) SessionFrom(ctx context.Context, sessionID string) kittest.Session {
	return acpsdk.SessionFrom(ctx, sessionID)
}

func (stack) Errors() kittest.Errors {
	return kittest.Errors{NotInitialized: acpsdk.ErrNotInitialized, UnknownConn: acpsdk.ErrUnknownConn, Closed: acpsdk.ErrClosed, Store: acpsdk.ErrStore}
}

func (stack) Kit(store history.Store) kittest.Kit {
	if store == nil {
		return acpsdk.New(quiet)
	}
	return acpsdk.New(quiet, acpsdk.WithStore(store))
}

// stdio is the stand-in stdin and stdout of the examples, and the client
// on their other end: client plays one prompt, hangs up, waits for done and
// returns what it received.
func stdio() (io.Reader, io.Writer, func(done <-chan struct{}) []string) {
	p := newPipes()
	c := kittest.NewClient(context.Background(), clientEnd{p})
	return p.toAgentR, p.fromAgentW, func(done <-chan struct{}) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return kittest.Drive(ctx, c, session, func() {
			_ = p.toAgentW.Close()
			<-done
			_ = p.fromAgentW.Close()
		})
	}
}
