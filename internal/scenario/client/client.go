// Package client is a small ACP client that records its connection: every
// JSON-RPC message it writes or reads, byte for byte, in the order it saw
// them. The acpcompact demo drives the scenario agent with it, and the
// scenario agent's tests assert on its record.
//
// The record is written as a transcript in the format package conformance
// reads ("client <json>" / "agent <json>", one message a line), so
// `acpcompact check` can judge it. A message is recorded before it is
// written and as soon as it is read, so the record keeps causality: a
// session/cancel appears before any update the agent sent because of it.
//
// It speaks ACP v1 and v2 (Initialize picks the version) and answers the
// agent's own requests (permissions, file system) with "method not found".
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/waitlog"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// Message is one JSON-RPC message as the client saw it, with the fields a
// test or a timeline needs already decoded.
type Message struct {
	// Seq numbers the messages of the record from 0, in record order.
	Seq int
	// Dir says who sent it: conformance.FromClient or conformance.FromAgent.
	Dir conformance.Direction
	// Raw is the message as written on the wire.
	Raw json.RawMessage

	// Method is the method of a request or notification, and for a
	// response the method of the request it answers.
	Method string
	// ID is the request or response id as compact JSON ("" for a
	// notification).
	ID string
	// Response is true for a response.
	Response bool
	// Result is a successful response's result.
	Result json.RawMessage
	// Error is an error response's error.
	Error *jsonrpc2.Error

	// SessionID is params.sessionId (for a response, the request's).
	SessionID string
	// Update is a session/update's params.update; Kind its sessionUpdate.
	Update json.RawMessage
	Kind   string
	// CompactionID, Status, State, StopReason and ToolCallID are the
	// update's compactionId, status, state, stopReason and toolCallId.
	CompactionID string
	Status       string
	State        string
	StopReason   string
	ToolCallID   string
}

// Line returns the message in transcript form: "client <json>" or
// "agent <json>".
func (m Message) Line() string { return m.Dir.String() + " " + string(m.Raw) }

// Client is one ACP client connection. Safe for concurrent use.
type Client struct {
	conn *jsonrpc2.Conn
	log  waitlog.Log[Message]

	// mu guards calls and version, and makes each record one step: a
	// message's Seq is the record's length when it is appended.
	mu      sync.Mutex
	calls   map[string]call // client requests awaiting a response, by id
	version int
}

type call struct {
	method    string
	sessionID string
}

// New starts a client on rwc. It owns rwc from then on: Close closes it.
func New(ctx context.Context, rwc io.ReadWriteCloser) *Client {
	c := &Client{calls: map[string]call{}, version: 1}
	h := jsonrpc2.HandlerWithError(func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "not supported by this client"}
	})
	stream := &recorder{inner: jsonrpc2.NewPlainObjectStream(rwc), c: c}
	c.conn = jsonrpc2.NewConn(ctx, stream, h, jsonrpc2.SetLogger(discard{}))
	return c
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// recorder is the client's ObjectStream: it records each message in wire
// form on its way through.
type recorder struct {
	inner jsonrpc2.ObjectStream
	c     *Client
}

func (r *recorder) WriteObject(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.c.record(conformance.FromClient, raw)
	return r.inner.WriteObject(json.RawMessage(raw))
}

func (r *recorder) ReadObject(v any) error {
	var raw json.RawMessage
	if err := r.inner.ReadObject(&raw); err != nil {
		return err
	}
	r.c.record(conformance.FromAgent, raw)
	return json.Unmarshal(raw, v)
}

func (r *recorder) Close() error { return r.inner.Close() }

// envelope is the part of a message the record decodes.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc2.Error `json:"error"`
}

func (c *Client) record(dir conformance.Direction, raw []byte) {
	m := Message{Dir: dir, Raw: bytes.Clone(raw)}
	var env envelope
	_ = json.Unmarshal(raw, &env)
	if id := bytes.TrimSpace(env.ID); len(id) > 0 && !bytes.Equal(id, []byte("null")) {
		var b bytes.Buffer
		if json.Compact(&b, id) == nil {
			m.ID = b.String()
		}
	}
	m.Method, m.Result, m.Error = env.Method, env.Result, env.Error
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	_ = json.Unmarshal(env.Params, &p)
	m.SessionID = p.SessionID
	if m.Method == "session/update" {
		m.Update = p.Update
		var u struct {
			Kind         string `json:"sessionUpdate"`
			CompactionID string `json:"compactionId"`
			Status       string `json:"status"`
			State        string `json:"state"`
			StopReason   string `json:"stopReason"`
			ToolCallID   string `json:"toolCallId"`
		}
		if json.Unmarshal(p.Update, &u) == nil {
			m.Kind, m.CompactionID, m.Status, m.State, m.StopReason, m.ToolCallID =
				u.Kind, u.CompactionID, u.Status, u.State, u.StopReason, u.ToolCallID
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case dir == conformance.FromClient && m.Method != "" && m.ID != "":
		c.calls[m.ID] = call{method: m.Method, sessionID: m.SessionID}
	case dir == conformance.FromAgent && m.Method == "" && m.ID != "":
		m.Response = true
		if cl, ok := c.calls[m.ID]; ok {
			delete(c.calls, m.ID)
			m.Method, m.SessionID = cl.method, cl.sessionID
		}
		if m.Method == "initialize" && m.Error == nil {
			var res struct {
				ProtocolVersion int `json:"protocolVersion"`
			}
			if json.Unmarshal(m.Result, &res) == nil && res.ProtocolVersion == 2 {
				c.version = 2
			}
		}
	}
	m.Seq = c.log.Len()
	c.log.Append(m)
}

// Messages returns a copy of the record.
func (c *Client) Messages() []Message { return c.log.Items() }

// Len returns how many messages the record holds, the Seq the next one
// will get.
func (c *Client) Len() int { return c.log.Len() }

// Wait blocks until a message with Seq >= from satisfies pred, and returns
// it. It gives up when ctx ends, or when the connection has ended and no
// message recorded by then satisfies pred.
func (c *Client) Wait(ctx context.Context, from int, pred func(Message) bool) (Message, error) {
	m, err := c.log.Wait(ctx, from, c.conn.DisconnectNotify(), pred)
	switch {
	case errors.Is(err, waitlog.ErrStopped):
		return Message{}, fmt.Errorf("client: connection closed while waiting: %w", jsonrpc2.ErrClosed)
	case err != nil:
		return Message{}, fmt.Errorf("client: waiting on the wire: %w", err)
	}
	return m, nil
}

// WriteTranscript writes the record in transcript form, one line a message.
func (c *Client) WriteTranscript(w io.Writer) error {
	for _, m := range c.Messages() {
		if _, err := io.WriteString(w, m.Line()+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Version returns the protocol version the agent answered initialize with
// (1 until then).
func (c *Client) Version() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Close hangs up and waits for the connection to end.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.conn.DisconnectNotify()
	if errors.Is(err, jsonrpc2.ErrClosed) {
		return nil
	}
	return err
}

// Done is closed when the connection has ended, from either side.
func (c *Client) Done() <-chan struct{} { return c.conn.DisconnectNotify() }

// Call sends a request and decodes its result into result (which may be
// nil). An error response is returned as a *jsonrpc2.Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.conn.Call(ctx, method, params, result)
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	return c.conn.Notify(ctx, method, params)
}

// Initialize runs the initialize exchange asking for protocol version 1 or
// 2. A v1 client advertises clientCapabilities.session.compaction ({}) when
// capable; v2 has no such capability.
func (c *Client) Initialize(ctx context.Context, version int, capable bool) (json.RawMessage, error) {
	params := map[string]any{"protocolVersion": version}
	info := map[string]any{"name": "acpcompact-demo-client", "version": "1.0.0"}
	if version >= 2 {
		params["info"] = info
		params["capabilities"] = map[string]any{}
	} else {
		caps := map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false}
		if capable {
			caps["session"] = map[string]any{"compaction": map[string]any{}}
		}
		params["clientCapabilities"] = caps
		params["clientInfo"] = info
	}
	var res json.RawMessage
	err := c.conn.Call(ctx, "initialize", params, &res)
	return res, err
}

// NewSession creates a session with working directory cwd and returns its
// ID.
func (c *Client) NewSession(ctx context.Context, cwd string) (string, error) {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.conn.Call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, &res); err != nil {
		return "", err
	}
	return res.SessionID, nil
}

// Load asks a v1 agent to replay session sessionID (session/load) and waits
// for the response, which follows the replay.
func (c *Client) Load(ctx context.Context, sessionID, cwd string) error {
	return c.conn.Call(ctx, "session/load", map[string]any{"sessionId": sessionID, "cwd": cwd, "mcpServers": []any{}}, nil)
}

// Resume resumes session sessionID on a v2 agent (session/resume), asking
// for the whole history to be replayed when replay is true.
func (c *Client) Resume(ctx context.Context, sessionID, cwd string, replay bool) error {
	p := map[string]any{"sessionId": sessionID, "cwd": cwd, "mcpServers": []any{}}
	if replay {
		p["replayFrom"] = map[string]any{"type": "start"}
	}
	return c.conn.Call(ctx, "session/resume", p, nil)
}

// Cancel sends session/cancel for sessionID.
func (c *Client) Cancel(ctx context.Context, sessionID string) error {
	return c.conn.Notify(ctx, "session/cancel", map[string]any{"sessionId": sessionID})
}

// PromptParams returns session/prompt params carrying text as one text
// block.
func PromptParams(sessionID, text string) map[string]any {
	return map[string]any{
		"sessionId": sessionID,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	}
}

// Turn is a prompt in flight.
type Turn struct {
	c         *Client
	sessionID string
	from      int // record length before the prompt was sent
	call      jsonrpc2.Waiter
}

// Outcome is how a turn ended.
type Outcome struct {
	// StopReason is the v1 prompt response's stopReason, or the stopReason
	// of the v2 idle state_update that ended the turn.
	StopReason string
	// Response is the session/prompt result: {stopReason} in v1,
	// {messageId} in v2.
	Response json.RawMessage
	// Err is the JSON-RPC error the prompt was answered with, if any.
	Err *jsonrpc2.Error
	// IdleError is the error object of a v2 idle state_update with
	// stopReason "error".
	IdleError json.RawMessage
}

// StartPrompt sends session/prompt with text and returns without waiting.
func (c *Client) StartPrompt(ctx context.Context, sessionID, text string) (*Turn, error) {
	from := c.Len()
	w, err := c.conn.DispatchCall(ctx, "session/prompt", PromptParams(sessionID, text))
	if err != nil {
		return nil, err
	}
	return &Turn{c: c, sessionID: sessionID, from: from, call: w}, nil
}

// From returns the Seq of the first message recorded for the turn (its
// session/prompt request).
func (t *Turn) From() int { return t.from }

// Wait waits for the turn to end: in v1 for the prompt response, in v2 for
// the acknowledgement and then the idle state_update.
func (t *Turn) Wait(ctx context.Context) (Outcome, error) {
	var o Outcome
	var res json.RawMessage
	if err := t.call.Wait(ctx, &res); err != nil {
		var rpcErr *jsonrpc2.Error
		if errors.As(err, &rpcErr) {
			o.Err = rpcErr
			return o, nil
		}
		return o, err
	}
	o.Response = res
	if t.c.Version() != 2 {
		var r struct {
			StopReason string `json:"stopReason"`
		}
		_ = json.Unmarshal(res, &r)
		o.StopReason = r.StopReason
		return o, nil
	}
	idle, err := t.c.Wait(ctx, t.from, func(m Message) bool {
		return m.Dir == conformance.FromAgent && m.Kind == protocol.KindStateUpdate && m.State == "idle" && m.SessionID == t.sessionID
	})
	if err != nil {
		return o, err
	}
	o.StopReason = idle.StopReason
	var u struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(idle.Update, &u)
	o.IdleError = u.Error
	return o, nil
}

// Prompt sends session/prompt with text and waits for the turn to end (see
// Turn.Wait).
func (c *Client) Prompt(ctx context.Context, sessionID, text string) (Outcome, error) {
	t, err := c.StartPrompt(ctx, sessionID, text)
	if err != nil {
		return Outcome{}, err
	}
	return t.Wait(ctx)
}
