package matrix

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/protocol"
)

// AgentTarget plays scenarios on an agent binary over stdio (the scenario
// agent, examples/scenario-agent), with a client that writes one JSON-RPC
// message a line and records every line in both directions. It plays a
// scenario's AgentScript: prompts whose text picks the agent's script, an
// optional session/cancel (right behind the prompt, or once the script is
// under way), and session/load (v2: session/resume with replayFrom start). The agent's
// history lives in its process, so a replay happens on the same
// connection: this target cannot reconnect.
type AgentTarget struct {
	// Path is the agent binary.
	Path string
	// Args come before the scenario's flags.
	Args []string
	// Stderr receives the agent's stderr (default: discarded).
	Stderr io.Writer
	// History asks for Run.History: after the script, one more
	// session/load (v2: session/resume), whose messages are recorded
	// apart from the script's.
	History bool
}

// Name implements Target.
func (AgentTarget) Name() string { return "agent" }

// errResponse: the agent answered a request with a JSON-RPC error. A
// prompt may end so (the runtime crashed); the transcript keeps the answer
// for Verify.
var errResponse = errors.New("error response")

type agentPlay struct {
	sc     Scenario
	conn   *Conn
	cmu    sync.Mutex
	cur    *Conn // where messages are recorded: conn, then the history's
	stdin  io.WriteCloser
	wmu    sync.Mutex
	msgs   chan envelope
	nextID int
	sid    string
}

// Play implements Target.
func (t AgentTarget) Play(ctx context.Context, sc Scenario) (*Run, error) {
	if sc.Agent == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotExpressible, sc.NoAgent)
	}
	args := append(append([]string(nil), t.Args...), sc.Agent.Flags...)
	cmd := exec.Command(t.Path, args...)
	cmd.Stderr = t.Stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &agentPlay{sc: sc, conn: &Conn{}, stdin: stdin, msgs: make(chan envelope, 4096)}
	p.cur = p.conn
	run := &Run{Conns: []*Conn{p.conn}, Agent: true}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(p.msgs)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				p.recording().Add(conformance.FromAgent, line)
				p.msgs <- decodeEnvelope(line)
			}
			if err != nil {
				return
			}
		}
	}()
	playErr := p.play(ctx)
	if playErr == nil && t.History {
		run.History, playErr = p.history(ctx)
	}
	// What the agent still writes is recorded, not waited for.
	go func() {
		for range p.msgs {
		}
	}()
	_ = stdin.Close()
	// The agent exits at the end of its input; a hung one is killed.
	exited := make(chan error, 1)
	go func() { <-readDone; exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
	}
	return run, playErr
}

// send writes messages in one write, so that the agent reads them
// together.
func (p *agentPlay) send(msgs ...[]byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	var buf []byte
	for _, m := range msgs {
		p.recording().Add(conformance.FromClient, m)
		buf = append(append(buf, m...), '\n')
	}
	_, err := p.stdin.Write(buf)
	return err
}

// recording returns the transcript messages are recorded in.
func (p *agentPlay) recording() *Conn {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	return p.cur
}

// history replays the session once more, recording the load's messages
// in a transcript of their own. The agent's history lives in its process,
// so the replay is on the same connection.
func (p *agentPlay) history(ctx context.Context) (*Conn, error) {
	h := &Conn{}
	p.cmu.Lock()
	p.cur = h
	p.cmu.Unlock()
	method, params := loadRequest(p.sc.Client.Version, p.sid)
	if _, err := p.call(ctx, method, params, nil); err != nil {
		return h, fmt.Errorf("history: %w", err)
	}
	p.cmu.Lock()
	p.cur = p.conn
	p.cmu.Unlock()
	return h, nil
}

// call sends a request and waits for its response, answering the agent's
// own requests and calling onUpdate for each session/update meanwhile.
func (p *agentPlay) call(ctx context.Context, method string, params json.RawMessage, onUpdate func(envelope)) (envelope, error) {
	id := p.nextID
	p.nextID++
	if err := p.send(request(id, method, params)); err != nil {
		return envelope{}, err
	}
	return p.await(ctx, method, id, onUpdate)
}

// await waits for the response to request id (see call).
func (p *agentPlay) await(ctx context.Context, method string, id int, onUpdate func(envelope)) (envelope, error) {
	want := fmt.Sprint(id)
	for {
		m, err := p.next(ctx, onUpdate)
		if err != nil {
			return envelope{}, fmt.Errorf("%s: %w", method, err)
		}
		if m.Method == "" && string(m.ID) == want {
			if len(m.Error) > 0 && string(m.Error) != "null" {
				return m, fmt.Errorf("%s: %w %s", method, errResponse, m.Error)
			}
			return m, nil
		}
	}
}

// next returns the agent's next message that is not its own request.
func (p *agentPlay) next(ctx context.Context, onUpdate func(envelope)) (envelope, error) {
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				return envelope{}, errors.New("the agent closed its output")
			}
			switch {
			case m.Method == "session/update":
				if onUpdate != nil {
					onUpdate(m)
				}
			case m.Method != "" && len(m.ID) > 0:
				// A request of the agent's: permissions are refused, the
				// rest is not supported by this client.
				if m.Method == "session/request_permission" {
					_ = p.send(mustJSON(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}}))
				} else {
					_ = p.send(mustJSON(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}}))
				}
				continue
			}
			return m, nil
		case <-ctx.Done():
			return envelope{}, ctx.Err()
		}
	}
}

func (p *agentPlay) play(ctx context.Context) error {
	v := p.sc.Client.Version
	if _, err := p.call(ctx, "initialize", p.sc.Client.InitializeParams(), nil); err != nil {
		return err
	}
	res, err := p.call(ctx, "session/new", newSessionParams(v), nil)
	if err != nil {
		return err
	}
	var ns struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res.Result, &ns); err != nil || ns.SessionID == "" {
		return fmt.Errorf("session/new: no sessionId in %s", res.Result)
	}
	p.sid = ns.SessionID
	for ti, turn := range p.sc.Agent.Turns {
		if turn.Load {
			method, params := loadRequest(v, p.sid)
			if _, err := p.call(ctx, method, params, nil); err != nil {
				return fmt.Errorf("turn %d: %w", ti+1, err)
			}
			continue
		}
		if err := p.prompt(ctx, turn); err != nil {
			return fmt.Errorf("turn %d: %w", ti+1, err)
		}
	}
	return nil
}

// turnProgress are the updates that show a prompt's script under way (a
// compaction, its fallback form, the agent's text), as opposed to session
// state such as available_commands_update, which may arrive before the
// agent has even read the prompt. AgentTurn.Cancel waits for one.
var turnProgress = map[string]bool{
	"compaction_update": true, "compaction_summary_chunk": true, "tool_call": true, "tool_call_update": true,
	"session_info_update": true, "agent_message_chunk": true, "agent_message": true,
}

// prompt plays one prompt turn: v1 ends with the response, v2 with the
// idle state_update after the response.
func (p *agentPlay) prompt(ctx context.Context, turn AgentTurn) error {
	cancelled := false
	idle := false
	onUpdate := func(m envelope) {
		var u struct {
			Update struct {
				Kind  string `json:"sessionUpdate"`
				State string `json:"state"`
			} `json:"update"`
		}
		_ = json.Unmarshal(m.Params, &u)
		if turn.Cancel && !cancelled && turnProgress[u.Update.Kind] {
			cancelled = true
			_ = p.send(notification("session/cancel", map[string]any{"sessionId": p.sid}))
		}
		if u.Update.Kind == protocol.KindStateUpdate && u.Update.State == "idle" {
			idle = true
		}
	}
	id := p.nextID
	p.nextID++
	msgs := [][]byte{request(id, "session/prompt", promptParams(p.sid, turn.Prompt))}
	if turn.CancelEarly {
		cancelled = true
		msgs = append(msgs, notification("session/cancel", map[string]any{"sessionId": p.sid}))
	}
	if err := p.send(msgs...); err != nil {
		return err
	}
	if _, err := p.await(ctx, "session/prompt", id, onUpdate); err != nil && !errors.Is(err, errResponse) {
		return err
	}
	if p.sc.Client.Version != 2 {
		return nil
	}
	for !idle {
		if _, err := p.next(ctx, onUpdate); err != nil {
			return fmt.Errorf("waiting for idle: %w", err)
		}
	}
	return nil
}
