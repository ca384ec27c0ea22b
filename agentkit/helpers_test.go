package agentkit_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelperAgent(mode)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// quiet keeps the kit's logs out of test output.
var quiet = agentkit.WithLogger(slog.New(slog.DiscardHandler))

const session = "sess_1"

// agent is a host agent on the jsonrpc2 stack. Its handlers are set per
// test; unset ones answer as a minimal agent would.
type agent struct {
	kit     *agentkit.Kit
	version int             // protocol version it answers initialize with (default 1)
	connCtx context.Context // given to NewConn (default context.Background())
	prompt  func(ctx context.Context, conn *jsonrpc2.Conn, sessionID string) (any, error)
	// promptText, when set, handles prompts instead of prompt, with the
	// text of their first block.
	promptText func(ctx context.Context, conn *jsonrpc2.Conn, sessionID, text string) (any, error)
	load       func(ctx context.Context, conn *jsonrpc2.Conn, sessionID string) error
	cancel     func(sessionID string) // called for each session/cancel
	// wrap, when set, wraps the agent's end of the pipe.
	wrap func(net.Conn) net.Conn
	mu   sync.Mutex
	last context.Context // the context of the latest handler call
}

// lastCtx returns the context of the latest handler call.
func (a *agent) lastCtx() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

func (a *agent) handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	a.mu.Lock()
	a.last = ctx
	a.mu.Unlock()
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if req.Params != nil {
		_ = json.Unmarshal(*req.Params, &p)
	}
	switch req.Method {
	case "initialize":
		if a.version == 2 {
			return map[string]any{"protocolVersion": 2, "info": map[string]any{"name": "agent", "version": "1.0.0"}}, nil
		}
		return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{"loadSession": true}, "authMethods": []any{}}, nil
	case "session/prompt":
		if a.promptText != nil {
			text := ""
			if len(p.Prompt) > 0 {
				text = p.Prompt[0].Text
			}
			return a.promptText(ctx, conn, p.SessionID, text)
		}
		if a.prompt == nil {
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return a.prompt(ctx, conn, p.SessionID)
	case "session/load":
		if a.load != nil {
			if err := a.load(ctx, conn, p.SessionID); err != nil {
				return nil, err
			}
		}
		return map[string]any{}, nil
	case "session/cancel":
		if a.cancel != nil {
			a.cancel(p.SessionID)
		}
		return nil, nil
	}
	return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: req.Method}
}

// rig is one agent connection and the client on its other end.
type rig struct {
	t      *testing.T
	ctx    context.Context
	kit    *agentkit.Kit
	agent  *jsonrpc2.Conn
	client *kittest.Client
	closed bool
}

// newRig connects a over net.Pipe, with its handler behind
// agentkit.AsyncHandler as a real agent's would be.
func newRig(t *testing.T, a *agent, opts ...agentkit.Option) *rig {
	t.Helper()
	// A failure detector only: no assertion depends on how long anything
	// takes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	a.kit = agentkit.New(append([]agentkit.Option{quiet}, opts...)...)
	agentSide, clientSide := net.Pipe()
	if a.wrap != nil {
		agentSide = a.wrap(agentSide)
	}
	r := &rig{t: t, ctx: ctx, kit: a.kit}
	connCtx := a.connCtx
	if connCtx == nil {
		connCtx = context.Background()
	}
	r.agent = a.kit.NewConn(connCtx, jsonrpc2.NewPlainObjectStream(agentSide),
		agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)), jsonrpc2.SetLogger(nopLogger{}))
	r.client = kittest.NewClient(context.Background(), clientSide)
	t.Cleanup(r.close)
	return r
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// close hangs up from the agent's side, so whatever the kit settles on
// close still reaches the client's record, and waits for both ends.
func (r *rig) close() {
	if r.closed {
		return
	}
	r.closed = true
	_ = r.agent.Close()
	<-r.agent.DisconnectNotify()
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

func agentMessage(ctx context.Context, conn *jsonrpc2.Conn, sessionID, text string) error {
	return conn.Notify(ctx, "session/update", map[string]any{
		"sessionId": sessionID,
		"update": map[string]any{
			"sessionUpdate": "agent_message_chunk",
			"messageId":     "msg_agent",
			"content":       map[string]any{"type": "text", "text": text},
		},
	})
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

// driveClient is the stand-in client of the examples.
func driveClient(end net.Conn) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return kittest.Drive(ctx, kittest.NewClient(context.Background(), end), session, nil)
}
