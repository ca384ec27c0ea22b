package acpsdk_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelperAgent(mode)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

var discard = slog.New(slog.DiscardHandler)

// quiet keeps the kit's logs out of test output.
var quiet = acpsdk.WithLogger(discard)

const session = "sess_1"

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

func (a *agent) message(ctx context.Context, sid acp.SessionId, text string) {
	_ = a.Conn().AgentSideConnection().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateAgentMessageText(text)})
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

// rig is one SDK agent connection and the client on its other end.
type rig struct {
	t      *testing.T
	ctx    context.Context
	kit    *acpsdk.Kit
	pipes  *pipes
	done   <-chan struct{}
	client *kittest.Client
	closed bool
	// wrapOut, when set, wraps the agent's output.
	wrapOut func(io.Writer) io.Writer
}

func newRig(t *testing.T, opts ...acpsdk.Option) *rig {
	t.Helper()
	// A failure detector only: no assertion depends on how long anything
	// takes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	r := &rig{t: t, ctx: ctx, kit: acpsdk.New(append([]acpsdk.Option{quiet}, opts...)...), pipes: newPipes()}
	r.client = kittest.NewClient(context.Background(), clientEnd{r.pipes})
	t.Cleanup(r.close)
	return r
}

// serve connects a typed agent.
func (r *rig) serve(a *agent) {
	a.kit = r.kit
	var out io.Writer = r.pipes.fromAgentW
	if r.wrapOut != nil {
		out = r.wrapOut(out)
	}
	a.mu.Lock()
	a.conn = r.kit.NewAgentSideConnection(a, out, r.pipes.toAgentR)
	a.conn.SetLogger(discard)
	r.done = a.conn.Done()
	a.mu.Unlock()
}

// serveRaw connects a raw method handler; conn is set before any message
// can reach h.
func (r *rig) serveRaw(h func(conn *acpsdk.Conn) acp.MethodHandler) *acpsdk.Conn {
	var (
		mu   sync.Mutex
		conn *acpsdk.Conn
	)
	ready := make(chan struct{})
	conn = r.kit.NewConnection(func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
		<-ready
		mu.Lock()
		c := conn
		mu.Unlock()
		return h(c)(ctx, method, params)
	}, r.pipes.fromAgentW, r.pipes.toAgentR)
	conn.SetLogger(discard)
	close(ready)
	r.done = conn.Done()
	return conn
}

// close hangs up the client's sending half first, so what the kit settles
// when the agent's input ends still reaches the client's record.
func (r *rig) close() {
	if r.closed {
		return
	}
	r.closed = true
	_ = r.pipes.toAgentW.Close()
	if r.done != nil {
		<-r.done
	}
	_ = r.pipes.fromAgentW.Close()
	<-r.client.Conn.DisconnectNotify()
}

func (r *rig) initialize(version int, capable bool) {
	r.t.Helper()
	if _, err := r.client.Initialize(r.ctx, version, capable); err != nil {
		r.t.Fatalf("initialize: %v", err)
	}
}

// finish closes the connection and checks the whole record: the turn rules
// and the official schema.
func (r *rig) finish(version int) []kittest.Event {
	r.t.Helper()
	r.close()
	evs := r.client.Wire.Events()
	if err := kittest.CheckTurns(evs, version); err != nil {
		r.t.Errorf("turn rules broken:\n%v\nwire:\n%s", err, kittest.Dump(evs))
	}
	kittest.Validate(r.t, evs, version)
	return evs
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
