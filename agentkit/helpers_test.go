package agentkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/sourcegraph/jsonrpc2"
)

func TestMain(m *testing.M) { kittest.Main(m, helperEnv, runSignalAgent, runCrashAgent) }

// quiet keeps the kit's logs out of test output.
var quiet = agentkit.WithLogger(slog.New(slog.DiscardHandler))

const session = kittest.SessionID

// agent is a host agent on the jsonrpc2 stack. Its handlers are set per
// test; unset ones answer as a minimal agent would.
type agent struct {
	kit     *agentkit.Kit
	conn    *jsonrpc2.Conn  // set by serve
	version int             // protocol version it answers initialize with (default 1)
	connCtx context.Context // given to NewConn (default context.Background())
	// stream makes the agent's object stream from its end of the pipe
	// (default jsonrpc2.NewPlainObjectStream).
	stream func(net.Conn) jsonrpc2.ObjectStream
	// wrap, when set, wraps the agent's output.
	wrap   func(io.Writer) io.Writer
	prompt func(ctx context.Context, conn *jsonrpc2.Conn, sessionID string) (any, error)
	// promptText, when set, handles prompts instead of prompt, with the
	// text of their first block.
	promptText func(ctx context.Context, conn *jsonrpc2.Conn, sessionID, text string) (any, error)
	load       func(ctx context.Context, conn *jsonrpc2.Conn, sessionID string) error
	cancel     func(sessionID string) // called for each session/cancel
	mu         sync.Mutex
	last       context.Context // the context of the latest handler call
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
	case "session/new":
		return map[string]any{"sessionId": session}, nil
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

// serve starts a kit configured by opts and connects a to it over
// net.Pipe, with its handler behind agentkit.AsyncHandler as a real
// agent's would be.
func (a *agent) serve(opts ...agentkit.Option) kittest.Served {
	a.kit = agentkit.New(append([]agentkit.Option{quiet}, opts...)...)
	agentSide, clientSide := net.Pipe()
	if a.wrap != nil {
		agentSide = outConn{agentSide, a.wrap(agentSide)}
	}
	stream := a.stream
	if stream == nil {
		stream = func(c net.Conn) jsonrpc2.ObjectStream { return jsonrpc2.NewPlainObjectStream(c) }
	}
	connCtx := a.connCtx
	if connCtx == nil {
		connCtx = context.Background()
	}
	conn := a.kit.NewConn(connCtx, stream(agentSide),
		agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)), jsonrpc2.SetLogger(nopLogger{}))
	a.conn = conn
	return kittest.Served{Client: clientSide, Conn: jconn{a.kit, conn}, Close: func() {
		// From the agent's side, so whatever the kit settles on close
		// still reaches the client.
		_ = conn.Close()
		<-conn.DisconnectNotify()
	}, Shutdown: a.kit.Shutdown}
}

// outConn is a net.Conn whose writes go through w.
type outConn struct {
	net.Conn
	w io.Writer
}

func (c outConn) Write(p []byte) (int, error) { return c.w.Write(p) }

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// jconn is a jsonrpc2 connection of the kit as kittest's agents see it.
type jconn struct {
	kit  *agentkit.Kit
	conn *jsonrpc2.Conn
}

func (c jconn) Message(ctx context.Context, sessionID, text string) error {
	return agentMessage(ctx, c.conn, sessionID, text)
}

func (c jconn) Emitter() (*emitter.Emitter, error) { return c.kit.Emitter(c.conn) }

// rig is one agent connection and the client on its other end.
type rig struct {
	*kittest.Rig
	kit   *agentkit.Kit
	agent *jsonrpc2.Conn
}

// newRig serves a (see serve) and connects the client.
func newRig(t *testing.T, a *agent, opts ...agentkit.Option) *rig {
	t.Helper()
	served := a.serve(opts...)
	return &rig{Rig: kittest.NewRig(t, served), kit: a.kit, agent: a.conn}
}

// stack is agentkit's half of kittest's shared tests: an agent (see serve)
// whose handlers run kittest's.
type stack struct {
	// stream is the agent's object stream (see agent.stream).
	stream func(net.Conn) jsonrpc2.ObjectStream
}

func (s stack) Serve(cfg kittest.Config, ka *kittest.Agent) kittest.Served {
	a := &agent{stream: s.stream, wrap: cfg.WrapOutput, cancel: ka.Cancel}
	a.promptText = func(ctx context.Context, conn *jsonrpc2.Conn, sid, text string) (any, error) {
		if ka.Prompt == nil {
			return endTurn()
		}
		stop, err := ka.Prompt(ctx, jconn{a.kit, conn}, kittest.Prompt{SessionID: sid, Text: text})
		if err != nil {
			return nil, rpcError(err)
		}
		return map[string]any{"stopReason": stop}, nil
	}
	if ka.Load != nil {
		a.load = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) error {
			return ka.Load(ctx, jconn{a.kit, conn}, sid)
		}
	}
	opts := kittest.Options(cfg, agentkit.WithCancelGrace, agentkit.WithFallback, agentkit.WithEmitterOptions, agentkit.WithStore, agentkit.WithAudit)
	return a.serve(opts...)
}

func (stack) SessionFrom(ctx context.Context, sessionID string) kittest.Session {
	return agentkit.SessionFrom(ctx, sessionID)
}

func (stack) Errors() kittest.Errors {
	return kittest.Errors{NotInitialized: agentkit.ErrNotInitialized, UnknownConn: agentkit.ErrUnknownConn, Closed: agentkit.ErrClosed, Store: agentkit.ErrStore}
}

func (stack) Kit(store history.Store) kittest.Kit {
	if store == nil {
		return agentkit.New(quiet)
	}
	return agentkit.New(quiet, agentkit.WithStore(store))
}

// rpcError turns a runtime's error into the agent's JSON-RPC error.
func rpcError(err error) error {
	var e *jsonrpc2.Error
	if errors.As(err, &e) {
		return e
	}
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: err.Error()}
}

func endTurn() (any, error) { return map[string]any{"stopReason": "end_turn"}, nil }

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

// driveClient is the stand-in client of the examples.
func driveClient(end net.Conn) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return kittest.Drive(ctx, kittest.NewClient(context.Background(), end), session, nil)
}
