package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// The in-process runtime the kit targets share (KitTarget, AcpsdkTarget):
// a jsonrpc2 client peer that records its bytes, and a tiny agent that
// plays each turn's steps through a kit's Session. Only the agent's
// transport differs between the targets; it is what inprocPlay.dial
// connects.

// sessionReporter is a kit's Session as the runtime steps use it
// (agentkit.Session, acpsdk.Session).
type sessionReporter interface {
	Start(ctx context.Context, opts ...emitter.StartOption) (*emitter.Compaction, error)
	Replay(ctx context.Context, rec emitter.Record) error
}

// agentWire is one connection's agent side, as the scenario agent uses
// it.
type agentWire struct {
	// notify sends a notification; it must not depend on ctx (a
	// cancelled turn may still report).
	notify func(ctx context.Context, method string, params any) error
	// session is the kit's reporter of sessionID on this connection, from
	// a handler's context (SessionFrom).
	session func(ctx context.Context) sessionReporter
	// emitter is the kit's emitter of this connection.
	emitter func() (*emitter.Emitter, error)
}

// inprocPlay is one scenario played on an in-process target.
type inprocPlay struct {
	sc  Scenario
	run *Run
	// dial connects a new agent connection and returns the client's end
	// and the hang-up, which ends the connection from the agent's side
	// (so whatever the kit settles on close still reaches the client) and
	// returns once the agent is done.
	dial func(p *inprocPlay) (client io.ReadWriteCloser, hangUp func(), err error)

	mu         sync.Mutex
	turn       int // the scenario turn the client is playing
	marks      int
	cancelWant chan struct{} // the agent asks the client to send session/cancel
	hist       *history      // the runtime's history, across connections
	replaying  []Step        // the history replay's steps, while it plays
}

// newInprocPlay returns a play of sc; hist is the runtime's history, whose
// final records the kit's emitters hand over (emitter.OnFinalRecord)
// when the target was asked for one.
func newInprocPlay(sc Scenario, hist *history, dial func(p *inprocPlay) (io.ReadWriteCloser, func(), error)) *inprocPlay {
	return &inprocPlay{sc: sc, run: &Run{}, dial: dial, hist: hist, cancelWant: make(chan struct{}, 1)}
}

// play plays the scenario's turns, then the history replay when asked.
func (p *inprocPlay) play(ctx context.Context, withHistory bool) (*Run, error) {
	sc := p.sc
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
	if withHistory {
		return p.run, p.history(ctx)
	}
	return p.run, nil
}

// history plays the history replay on a new connection, kept out of
// Run.Conns.
func (p *inprocPlay) history(ctx context.Context) error {
	p.mu.Lock()
	p.run.StepErrors = append(p.run.StepErrors, prefixed("history: ", p.hist.problems())...)
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
	before := len(p.run.StepErrors) // history problems are prefixed already
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

// inprocConn is one connection: the agent's end behind the kit and the
// client's end, whose bytes are recorded.
type inprocConn struct {
	p      *inprocPlay
	hangUp func()
	client *jsonrpc2.Conn
	idle   chan struct{} // v2: the client saw an idle state_update
	once   sync.Once
}

func (p *inprocPlay) connect(ctx context.Context, first bool) (*inprocConn, error) {
	conn := &Conn{}
	p.run.Conns = append(p.run.Conns, conn)
	clientEnd, hangUp, err := p.dial(p)
	if err != nil {
		return nil, err
	}
	c := &inprocConn{p: p, hangUp: hangUp, idle: make(chan struct{}, 16)}
	tee := &teeConn{ReadWriteCloser: clientEnd,
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

// close hangs up from the agent's side and waits for both ends.
func (c *inprocConn) close() {
	c.once.Do(func() {
		c.hangUp()
		<-c.client.DisconnectNotify()
	})
}

// handleClient is the client's handler: it answers permission requests
// and notices the v2 idle state_update.
func (c *inprocConn) handleClient(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	switch req.Method {
	case "session/update":
		if req.Params != nil {
			var p struct {
				Update struct {
					Kind  string `json:"sessionUpdate"`
					State string `json:"state"`
				} `json:"update"`
			}
			if json.Unmarshal(*req.Params, &p) == nil && p.Update.Kind == protocol.KindStateUpdate && p.Update.State == "idle" {
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
func (c *inprocConn) prompt(ctx context.Context, ti int) error {
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

// handle is the tiny agent: it answers initialize and session/new and
// plays the current turn's steps in session/prompt, session/load and
// session/resume. reply sends the request's response (nothing for a
// notification); a v2 prompt replies before its steps, every other
// request after them.
func (p *inprocPlay) handle(ctx context.Context, w agentWire, method string, params json.RawMessage, reply func(result any, err error)) {
	v2 := p.sc.Client.Version == 2
	notify := func(u json.RawMessage) {
		_ = w.notify(ctx, "session/update", map[string]any{"sessionId": sessionID, "update": u})
	}
	switch method {
	case "initialize":
		reply(initResult(p.sc.Client.Version), nil)
	case "session/new":
		reply(map[string]any{"sessionId": sessionID}, nil)
	case "session/cancel":
		// The kit has cancelled the prompt's context already.
	case "session/prompt":
		ti := turnIndex(params)
		if v2 {
			reply(map[string]any{"messageId": fmt.Sprintf("msg_%d", ti+1)}, nil)
			notify(stateUpdate("running", ""))
		}
		p.steps(ctx, w, ti)
		stop := "end_turn"
		if errors.Is(context.Cause(ctx), emitter.ErrCancelled) {
			stop = "cancelled"
		}
		if v2 {
			notify(stateUpdate("idle", stop))
			return
		}
		reply(map[string]any{"stopReason": stop}, nil)
	case "session/load", "session/resume":
		p.mu.Lock()
		ti := p.turn
		p.mu.Unlock()
		p.steps(ctx, w, ti)
		if v2 {
			notify(stateUpdate("idle", "end_turn"))
		}
		reply(map[string]any{}, nil)
	default:
		reply(nil, fmt.Errorf("method not found: %s", method))
	}
}

// turnIndex reads the turn a prompt plays from its text ("turn N").
func turnIndex(params json.RawMessage) int {
	var p struct {
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if params != nil {
		_ = json.Unmarshal(params, &p)
	}
	if len(p.Prompt) > 0 {
		if n, err := strconv.Atoi(strings.TrimPrefix(p.Prompt[0].Text, "turn ")); err == nil {
			return n - 1
		}
	}
	return -1
}

// steps plays turn ti's steps (the history replay's past the last turn).
func (p *inprocPlay) steps(ctx context.Context, w agentWire, ti int) {
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
	sess := w.session(ctx)
	session := func() (*emitter.Session, error) {
		em, err := w.emitter()
		if err != nil {
			return nil, err
		}
		return em.Session(sessionID), nil
	}
	rt := &runtime{
		start:   sess.Start,
		replay:  sess.Replay,
		session: session,
		notify: func(ctx context.Context, u json.RawMessage) error {
			return w.notify(ctx, "session/update", map[string]any{"sessionId": sessionID, "update": u})
		},
		version: p.sc.Client.Version,
		hist:    p.hist,
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
			_ = w.notify(ctx, MarkMethod, map[string]any{"n": n})
		default:
			if msg := checkErr(ti, si, s, rt.do(ctx, s)); msg != "" {
				p.mu.Lock()
				p.run.StepErrors = append(p.run.StepErrors, msg)
				p.mu.Unlock()
			}
		}
	}
}

// prefixed returns ss, each with prefix.
func prefixed(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}

// teeConn records the client's bytes: what it reads came from the agent,
// what it writes goes to it. The pipes are synchronous, so a message is
// recorded before the agent's write of it returns.
type teeConn struct {
	io.ReadWriteCloser
	in, out *lineTap
}

func (t *teeConn) Read(p []byte) (int, error) {
	n, err := t.ReadWriteCloser.Read(p)
	if n > 0 {
		t.in.write(p[:n])
	}
	return n, err
}

func (t *teeConn) Write(p []byte) (int, error) {
	t.out.write(p)
	return t.ReadWriteCloser.Write(p)
}

var _ io.ReadWriteCloser = (*teeConn)(nil)

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
