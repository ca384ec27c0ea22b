package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/sourcegraph/jsonrpc2"
)

// KitTarget plays scenarios on a tiny agent built on sourcegraph/jsonrpc2
// behind agentkit, served over a net.Pipe to a jsonrpc2 client peer. The
// agent runs each turn's steps in its request handler (behind
// agentkit.AsyncHandler) through kit.Session; the kit settles what is open
// at the end of each turn (v1: before the prompt response; v2: before the
// idle state_update, which the agent sends). The cancel grace is disabled
// (negative), so a cancelled turn is settled at its end and no timer is
// involved. The client records the raw lines it writes and reads.
type KitTarget struct {
	// Options are added to the kit's.
	Options []agentkit.Option
	// History asks for Run.History: after the scenario, a new connection
	// whose session/load replays, through the kit, the runtime's records
	// of every compaction it reported.
	History bool
}

// Name implements Target.
func (KitTarget) Name() string { return "agentkit" }

type kitPlay struct {
	sc  Scenario
	run *Run
	kit *agentkit.Kit

	mu         sync.Mutex
	turn       int // the scenario turn the client is playing
	marks      int
	cancelWant chan struct{} // the agent asks the client to send session/cancel
	hist       history       // the runtime's history, across connections
	replaying  []Step        // the history replay's steps, while it plays
}

// Play implements Target.
func (t KitTarget) Play(ctx context.Context, sc Scenario) (*Run, error) {
	if sc.NoKit != "" {
		return nil, fmt.Errorf("%w: %s", ErrNotExpressible, sc.NoKit)
	}
	opts := []agentkit.Option{
		agentkit.WithLogger(slog.New(slog.DiscardHandler)),
		agentkit.WithCancelGrace(-1),
	}
	// The scenario names its fallback, empty for none; the kit's own
	// default (a tool call) must not stand in for "none".
	var r emitter.Renderer = fallback.None{}
	if sc.Fallback != "" {
		var err error
		if r, err = fallback.ByName(sc.Fallback); err != nil {
			return nil, err
		}
	}
	opts = append(opts, agentkit.WithFallback(r))
	p := &kitPlay{sc: sc, run: &Run{}, kit: agentkit.New(append(opts, t.Options...)...), cancelWant: make(chan struct{}, 1)}
	c, err := p.connect(ctx, true)
	if err != nil {
		return nil, err
	}
	defer func() { c.close() }()
	for ti, turn := range sc.Turns {
		p.mu.Lock()
		p.turn = ti
		p.mu.Unlock()
		switch turn.Kind {
		case Reconnect:
			c.close()
			if c, err = p.connect(ctx, false); err != nil {
				return nil, err
			}
		case Prompt:
			if err := c.prompt(ctx, ti); err != nil {
				return p.run, err
			}
		case Load:
			method, params := loadRequest(sc.Client.Version, sessionID)
			var res json.RawMessage
			if err := c.client.Call(ctx, method, params, &res); err != nil {
				return p.run, fmt.Errorf("matrix: turn %d: %s: %w", ti+1, method, err)
			}
		default:
			return nil, fmt.Errorf("matrix: turn %d: unknown kind %d", ti+1, turn.Kind)
		}
	}
	c.close()
	if t.History {
		return p.run, p.history(ctx)
	}
	return p.run, nil
}

// history plays the history replay on a new connection, kept out of
// Run.Conns.
func (p *kitPlay) history(ctx context.Context) error {
	p.mu.Lock()
	p.replaying = p.hist.replaySteps()
	p.turn = len(p.sc.Turns)
	p.mu.Unlock()
	conns := p.run.Conns
	p.run.Conns = nil
	defer func() { p.run.Conns = conns }()
	c, err := p.connect(ctx, false)
	if err != nil {
		return fmt.Errorf("matrix: history: %w", err)
	}
	defer c.close()
	p.mu.Lock()
	before := len(p.run.StepErrors)
	p.mu.Unlock()
	method, params := loadRequest(p.sc.Client.Version, sessionID)
	var res json.RawMessage
	if err := c.client.Call(ctx, method, params, &res); err != nil {
		return fmt.Errorf("matrix: history: %s: %w", method, err)
	}
	c.close()
	p.run.History = p.run.Conns[0]
	p.mu.Lock()
	for i := before; i < len(p.run.StepErrors); i++ {
		p.run.StepErrors[i] = "history: " + p.run.StepErrors[i]
	}
	p.run.Reported = p.hist.IDs()
	p.mu.Unlock()
	return nil
}

// kitConn is one connection: the agent's end behind the kit and the
// client's end, whose bytes are recorded.
type kitConn struct {
	p      *kitPlay
	agent  *jsonrpc2.Conn
	client *jsonrpc2.Conn
	idle   chan struct{} // v2: the client saw an idle state_update
	once   sync.Once
}

func (p *kitPlay) connect(ctx context.Context, first bool) (*kitConn, error) {
	conn := &Conn{}
	p.run.Conns = append(p.run.Conns, conn)
	agentEnd, clientEnd := net.Pipe()
	c := &kitConn{p: p, idle: make(chan struct{}, 16)}
	c.agent = p.kit.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(agentEnd),
		agentkit.AsyncHandler(&kitAgent{p: p}), jsonrpc2.SetLogger(nopLogger{}))
	tee := &teeConn{Conn: clientEnd,
		in:  &lineTap{conn: conn, dir: conformance.FromAgent},
		out: &lineTap{conn: conn, dir: conformance.FromClient}}
	c.client = jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(tee),
		jsonrpc2.HandlerWithError(c.handleClient), jsonrpc2.SetLogger(nopLogger{}))
	var res json.RawMessage
	if err := c.client.Call(ctx, "initialize", p.sc.Client.InitializeParams(), &res); err != nil {
		c.close()
		return nil, fmt.Errorf("matrix: initialize: %w", err)
	}
	if first {
		if err := c.client.Call(ctx, "session/new", newSessionParams(p.sc.Client.Version), &res); err != nil {
			c.close()
			return nil, fmt.Errorf("matrix: session/new: %w", err)
		}
	}
	return c, nil
}

// close hangs up from the agent's side (so whatever the kit settles on
// close still reaches the client) and waits for both ends.
func (c *kitConn) close() {
	c.once.Do(func() {
		_ = c.agent.Close()
		<-c.agent.DisconnectNotify()
		<-c.client.DisconnectNotify()
	})
}

// handleClient is the client's handler: it answers permission requests
// and notices the v2 idle state_update.
func (c *kitConn) handleClient(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	switch req.Method {
	case "session/update":
		if req.Params != nil {
			var p struct {
				Update struct {
					Kind  string `json:"sessionUpdate"`
					State string `json:"state"`
				} `json:"update"`
			}
			if json.Unmarshal(*req.Params, &p) == nil && p.Update.Kind == "state_update" && p.Update.State == "idle" {
				c.idle <- struct{}{}
			}
		}
		return nil, nil
	case "session/request_permission":
		return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, nil
	}
	return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: req.Method}
}

// prompt plays a prompt turn from the client's side: it sends the prompt,
// sends session/cancel when the agent's runtime asks for it, and waits for
// the end of the turn.
func (c *kitConn) prompt(ctx context.Context, ti int) error {
	done := make(chan error, 1)
	go func() {
		var res json.RawMessage
		done <- c.client.Call(ctx, "session/prompt", promptParams(sessionID, "turn "+strconv.Itoa(ti+1)), &res)
	}()
	var callErr error
	responded := false
	for !responded {
		select {
		case <-c.p.cancelWant:
			if err := c.client.Notify(ctx, "session/cancel", map[string]any{"sessionId": sessionID}); err != nil {
				return err
			}
		case callErr = <-done:
			responded = true
		case <-ctx.Done():
			return fmt.Errorf("matrix: turn %d: %w", ti+1, ctx.Err())
		}
	}
	if callErr != nil {
		return fmt.Errorf("matrix: turn %d: session/prompt: %w", ti+1, callErr)
	}
	if c.p.sc.Client.Version != 2 {
		return nil
	}
	// v2: the response is an acknowledgement; the idle state_update ends
	// the turn (the agent may still ask for a cancel before it).
	for {
		select {
		case <-c.p.cancelWant:
			if err := c.client.Notify(ctx, "session/cancel", map[string]any{"sessionId": sessionID}); err != nil {
				return err
			}
		case <-c.idle:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("matrix: turn %d: waiting for idle: %w", ti+1, ctx.Err())
		}
	}
}

// kitAgent is the tiny agent: it answers initialize and session/new and
// plays the current turn's steps in session/prompt, session/load and
// session/resume.
type kitAgent struct{ p *kitPlay }

func (a *kitAgent) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	p := a.p
	reply := func(result any, err error) {
		if req.Notif {
			return
		}
		if err != nil {
			_ = conn.ReplyWithError(ctx, req.ID, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()})
			return
		}
		_ = conn.Reply(ctx, req.ID, result)
	}
	v2 := p.sc.Client.Version == 2
	switch req.Method {
	case "initialize":
		reply(initResult(p.sc.Client.Version), nil)
	case "session/new":
		reply(map[string]any{"sessionId": sessionID}, nil)
	case "session/cancel":
		// The kit has cancelled the prompt's context already.
	case "session/prompt":
		ti := a.turnIndex(req)
		if v2 {
			reply(map[string]any{"messageId": fmt.Sprintf("msg_%d", ti+1)}, nil)
			a.notify(ctx, conn, stateUpdate("running", ""))
		}
		a.steps(ctx, conn, ti)
		stop := "end_turn"
		if errors.Is(context.Cause(ctx), emitter.ErrCancelled) {
			stop = "cancelled"
		}
		if v2 {
			a.notify(ctx, conn, stateUpdate("idle", stop))
			return
		}
		reply(map[string]any{"stopReason": stop}, nil)
	case "session/load", "session/resume":
		p.mu.Lock()
		ti := p.turn
		p.mu.Unlock()
		a.steps(ctx, conn, ti)
		if v2 {
			a.notify(ctx, conn, stateUpdate("idle", "end_turn"))
		}
		reply(map[string]any{}, nil)
	default:
		reply(nil, fmt.Errorf("method not found: %s", req.Method))
	}
}

// turnIndex reads the turn a prompt plays from its text ("turn N").
func (a *kitAgent) turnIndex(req *jsonrpc2.Request) int {
	var p struct {
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if req.Params != nil {
		_ = json.Unmarshal(*req.Params, &p)
	}
	if len(p.Prompt) > 0 {
		if n, err := strconv.Atoi(strings.TrimPrefix(p.Prompt[0].Text, "turn ")); err == nil {
			return n - 1
		}
	}
	return -1
}

func (a *kitAgent) notify(ctx context.Context, conn *jsonrpc2.Conn, u json.RawMessage) {
	// A cancelled turn may still report: the send must not depend on ctx.
	_ = conn.Notify(context.WithoutCancel(ctx), "session/update", map[string]any{"sessionId": sessionID, "update": u})
}

func (a *kitAgent) steps(ctx context.Context, conn *jsonrpc2.Conn, ti int) {
	p := a.p
	steps := []Step(nil)
	switch {
	case ti >= 0 && ti < len(p.sc.Turns):
		steps = p.sc.Turns[ti].Steps
	case ti == len(p.sc.Turns):
		p.mu.Lock()
		steps = p.replaying
		p.mu.Unlock()
	default:
		return
	}
	sess := p.kit.Session(conn, sessionID)
	rt := &runtime{
		start:  sess.Start,
		fail:   sess.Fail,
		replay: sess.Replay,
		session: func() (*emitter.Session, error) {
			em, err := p.kit.Emitter(conn)
			if err != nil {
				return nil, err
			}
			return em.Session(sessionID), nil
		},
		notify: func(ctx context.Context, u json.RawMessage) error {
			return conn.Notify(context.WithoutCancel(ctx), "session/update", map[string]any{"sessionId": sessionID, "update": u})
		},
		version: p.sc.Client.Version,
		hist:    &p.hist,
	}
	for si, s := range steps {
		switch s.Op {
		case OpUserCancel:
			p.cancelWant <- struct{}{}
			// The runtime notices the cancel through its context, as a
			// real one would.
			<-ctx.Done()
		case OpExpect:
			p.mu.Lock()
			n := p.marks
			p.marks++
			p.mu.Unlock()
			_ = conn.Notify(context.WithoutCancel(ctx), MarkMethod, map[string]any{"n": n})
		default:
			if msg := checkErr(ti, si, s, rt.do(ctx, s)); msg != "" {
				p.mu.Lock()
				p.run.StepErrors = append(p.run.StepErrors, msg)
				p.mu.Unlock()
			}
		}
	}
}

// teeConn records the client's bytes: what it reads came from the agent,
// what it writes goes to it. net.Pipe is synchronous, so a message is
// recorded before the agent's write of it returns.
type teeConn struct {
	net.Conn
	in, out *lineTap
}

func (t *teeConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.in.write(p[:n])
	}
	return n, err
}

func (t *teeConn) Write(p []byte) (int, error) {
	t.out.write(p)
	return t.Conn.Write(p)
}

var _ io.ReadWriteCloser = (*teeConn)(nil)

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
