package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/acpcompact/acpcompact/conformance"
)

// MarkMethod is the notification an agent under test sends, at an OpExpect
// step, to mark where the client's timeline is checked. Verify removes
// these lines before the checker and the schema see the transcript.
const MarkMethod = "_matrix/mark"

// Target plays scenarios.
type Target interface {
	// Name names the target in test names ("emitter", "agentkit", "acpsdk", "agent", "proxy").
	Name() string
	// Play runs the scenario and returns what went over the wire. An error
	// wrapping ErrNotExpressible means the target cannot play it; a step
	// whose call did not return its WantErr is reported in Run.StepErrors.
	Play(ctx context.Context, sc Scenario) (*Run, error)
}

// Run is what a target recorded while playing a scenario.
type Run struct {
	// Conns are the connections in order; Reconnect turns start new ones.
	Conns []*Conn
	// Agent is true when the scenario's AgentScript was played (IDs are
	// minted by the agent; see AgentScript.Want).
	Agent bool
	// StepErrors lists steps whose call returned another error than the
	// step wanted.
	StepErrors []string
	// History, when the target was asked for it, is a history replay
	// played after the scenario: the runtime's records of every compaction
	// it reported, replayed by session/load (v2: session/resume) to a
	// client that holds nothing. The in-process targets replay on a new
	// connection (from initialize to the load's response); the agent
	// binary, whose history lives in its process, on its one connection
	// (the load's messages only). VerifyLiveReplay judges it.
	History *Conn
	// Reported lists the compactions the runtime reported through the
	// emitter, whose records History replays; nil for the agent binary,
	// which reports all of its compactions so.
	Reported []string
}

// Conn is the transcript of one connection, as its client saw it.
type Conn struct {
	mu    sync.Mutex
	lines []conformance.Line
}

// Add appends one message; raw is copied.
func (c *Conn) Add(dir conformance.Direction, raw []byte) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, conformance.Line{N: len(c.lines) + 1, Dir: dir, Raw: bytes.Clone(raw)})
}

// Lines returns the recorded messages.
func (c *Conn) Lines() []conformance.Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]conformance.Line(nil), c.lines...)
}

// String renders the transcript in the "client <json>" / "agent <json>"
// format of package conformance.
func (c *Conn) String() string {
	var b strings.Builder
	for _, l := range c.Lines() {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Transcript renders every connection, separated by a comment line.
func (r *Run) Transcript() string {
	var b strings.Builder
	for i, c := range r.Conns {
		if i > 0 {
			b.WriteString("# reconnect\n")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// lineTap splits a byte stream into lines and records each as a message of
// one direction. It is the transcript side of a tee.
type lineTap struct {
	conn *Conn
	dir  conformance.Direction
	mu   sync.Mutex
	buf  []byte
}

func (t *lineTap) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return
		}
		t.conn.Add(t.dir, t.buf[:i])
		t.buf = t.buf[i+1:]
	}
}

// envelope is what the targets read of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func decodeEnvelope(raw []byte) envelope {
	var e envelope
	_ = json.Unmarshal(raw, &e)
	return e
}

// update returns a session/update's params.update and its sessionUpdate.
func update(raw []byte) (json.RawMessage, string, bool) {
	e := decodeEnvelope(raw)
	if e.Method != "session/update" {
		return nil, "", false
	}
	var p struct {
		Update json.RawMessage `json:"update"`
	}
	if json.Unmarshal(e.Params, &p) != nil {
		return nil, "", false
	}
	var h struct {
		Kind string `json:"sessionUpdate"`
	}
	_ = json.Unmarshal(p.Update, &h)
	return p.Update, h.Kind, true
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
