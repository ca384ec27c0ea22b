// Package kittest is the client side of agentkit's tests, and the tests
// the two kits share. Its client is a sourcegraph/jsonrpc2 connection
// acting as an ACP client that records what it sends and receives in wire
// order (Client), with a raw client that writes lines byte for byte
// (Peer), and checks of the record against the RFD's turn rules
// (CheckTurns, its own reading of them, independent of the wire engine it
// tests) and the official ACP schemas (Validate).
//
// agentkit and agentkit/acpsdk have the same behaviour over the same
// engine, so each test of that behaviour is written here once, against a
// Stack: the kit's half, which serves an Agent on its kit and its stack
// (jsonrpc2, acp-go-sdk) and knows the kit's package-level API. A kit's
// test of the same name calls it with its Stack, so the two kits meet the
// same scripts and the same checks. kittest imports neither kit.
package kittest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/waitlog"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
)

// Event is one message as the client saw it.
type Event struct {
	// Sent is true for a message the client wrote, false for one it read.
	Sent bool
	// Response is true for a response (to a request of the client's).
	Response bool
	// Method is the message's method; for a response, the method of the
	// request it answers.
	Method string
	// ID is the request or response id ("" for a notification).
	ID     string
	Params json.RawMessage
	Result json.RawMessage
	Error  *jsonrpc2.Error

	// SessionID is params.sessionId (for a response, the request's).
	SessionID string
	// Kind, CompactionID, Status and State come from a session/update's
	// update: its sessionUpdate, compactionId, status and state.
	Kind         string
	CompactionID string
	Status       string
	State        string
	Update       json.RawMessage
}

// Compaction reports whether e is a compaction update or chunk.
func (e Event) Compaction() bool {
	return e.Kind == protocol.KindUpdate || e.Kind == protocol.KindSummaryChunk
}

// String formats e for a failure message: its direction, kind, id and
// payload.
func (e Event) String() string {
	dir := "<-"
	if e.Sent {
		dir = "->"
	}
	switch {
	case e.Response:
		return fmt.Sprintf("%s response %s #%s %s", dir, e.Method, e.ID, e.Result)
	case e.Method == "session/update":
		return fmt.Sprintf("%s update %s %s", dir, e.SessionID, e.Update)
	}
	return fmt.Sprintf("%s %s #%s %s", dir, e.Method, e.ID, e.Params)
}

// Wire is the ordered record of one client connection. Safe for concurrent
// use.
type Wire struct {
	log waitlog.Log[Event]
}

func (w *Wire) add(e Event) { w.log.Append(e) }

// Events returns a copy of the record.
func (w *Wire) Events() []Event { return w.log.Items() }

// Wait blocks until an event satisfies pred, and returns it.
func (w *Wire) Wait(ctx context.Context, pred func(Event) bool) (Event, error) {
	e, err := w.log.Wait(ctx, 0, nil, pred)
	if err != nil {
		return Event{}, fmt.Errorf("kittest: waiting on the wire: %w", err)
	}
	return e, nil
}

func decode(e *Event) {
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if json.Unmarshal(e.Params, &p) != nil {
		return
	}
	e.SessionID = p.SessionID
	if e.Method != "session/update" || e.Response {
		return
	}
	e.Update = p.Update
	var u struct {
		Kind         string `json:"sessionUpdate"`
		CompactionID string `json:"compactionId"`
		Status       string `json:"status"`
		State        string `json:"state"`
	}
	if json.Unmarshal(p.Update, &u) == nil {
		e.Kind, e.CompactionID, e.Status, e.State = u.Kind, u.CompactionID, u.Status, u.State
	}
}

func raw(m *json.RawMessage) json.RawMessage {
	if m == nil {
		return nil
	}
	return *m
}

// Client is an ACP client on a jsonrpc2 connection.
type Client struct {
	Conn *jsonrpc2.Conn
	Wire *Wire
}

// NewClient starts a client over rwc. Notifications are recorded in wire
// order; requests from the agent are answered with "method not found".
func NewClient(ctx context.Context, rwc io.ReadWriteCloser) *Client {
	w := &Wire{}
	h := jsonrpc2.HandlerWithError(func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "not supported by the test client"}
	})
	recv := jsonrpc2.OnRecv(func(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
		e := Event{}
		switch {
		case resp != nil:
			e.Response, e.ID, e.Result, e.Error = true, resp.ID.String(), raw(resp.Result), resp.Error
			if req != nil {
				e.Method, e.Params = req.Method, raw(req.Params)
			}
		case req != nil:
			e.Method, e.Params = req.Method, raw(req.Params)
			if !req.Notif {
				e.ID = req.ID.String()
			}
		}
		decode(&e)
		w.add(e)
	})
	send := jsonrpc2.OnSend(func(req *jsonrpc2.Request, _ *jsonrpc2.Response) {
		if req == nil {
			return
		}
		e := Event{Sent: true, Method: req.Method, Params: raw(req.Params)}
		if !req.Notif {
			e.ID = req.ID.String()
		}
		decode(&e)
		w.add(e)
	})
	conn := jsonrpc2.NewConn(ctx, jsonrpc2.NewPlainObjectStream(rwc), h, recv, send, jsonrpc2.SetLogger(discard{}))
	return &Client{Conn: conn, Wire: w}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// Initialize runs the initialize exchange for protocol version 1 or 2; a v1
// client advertises clientCapabilities.session.compaction when capable.
func (c *Client) Initialize(ctx context.Context, version int, capable bool) (json.RawMessage, error) {
	params := map[string]any{"protocolVersion": version}
	if version == 2 {
		params["info"] = map[string]any{"name": "kittest", "version": "1.0.0"}
		params["capabilities"] = map[string]any{}
	} else {
		caps := map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}}
		if capable {
			caps["session"] = map[string]any{"compaction": map[string]any{}}
		}
		params["clientCapabilities"] = caps
	}
	var res json.RawMessage
	err := c.Conn.Call(ctx, "initialize", params, &res)
	return res, err
}

// PromptParams returns session/prompt params, with meta as _meta when set.
func PromptParams(sessionID string, meta map[string]any) map[string]any {
	return PromptText(sessionID, "hello", meta)
}

// PromptText returns session/prompt params whose one text block is text,
// with meta as _meta when set.
func PromptText(sessionID, text string, meta map[string]any) map[string]any {
	p := map[string]any{
		"sessionId": sessionID,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	}
	if meta != nil {
		p["_meta"] = meta
	}
	return p
}

// Prompt sends session/prompt and waits for its response.
func (c *Client) Prompt(ctx context.Context, sessionID string, meta map[string]any) (json.RawMessage, error) {
	var res json.RawMessage
	err := c.Conn.Call(ctx, "session/prompt", PromptParams(sessionID, meta), &res)
	return res, err
}

// Cancel sends session/cancel.
func (c *Client) Cancel(ctx context.Context, sessionID string) error {
	return c.Conn.Notify(ctx, "session/cancel", map[string]any{"sessionId": sessionID})
}

// StopReason reads a prompt result's stopReason.
func StopReason(res json.RawMessage) string {
	var r struct {
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(res, &r)
	return r.StopReason
}

// Compactions returns the compaction updates of the record, in order.
func Compactions(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		if !e.Sent && e.Compaction() {
			out = append(out, e)
		}
	}
	return out
}

// Statuses lists "kind:status" (chunks as "chunk") of the compaction
// updates for id, in wire order.
func Statuses(evs []Event, id string) []string {
	var out []string
	for _, e := range Compactions(evs) {
		if e.CompactionID != id {
			continue
		}
		if e.Kind == protocol.KindSummaryChunk {
			out = append(out, "chunk")
		} else {
			out = append(out, e.Status)
		}
	}
	return out
}

// Field returns a top-level field of a compaction update's JSON.
func Field(e Event, name string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(e.Update, &m)
	return m[name]
}

// Terminal reports whether status ends a compaction.
func Terminal(status string) bool { return protocol.Status(status).Terminal() }

// CheckTurns checks the record against the turn rules: every compaction
// update of a session arrives inside one of its turns (or a session/load),
// a compaction is never updated after its terminal status, and nothing is
// open when the message ending a turn arrives. In v1 a turn is the running
// session/prompt's, and only its response ends it: a prompt sent while
// another runs waits behind it, and its response before its turn began (an
// agent rejecting it) ends nothing. In v2 a turn runs from the prompt to an
// idle state_update.
func CheckTurns(evs []Event, version int) error {
	type sess struct {
		running string   // v1: the id of the prompt whose turn runs ("" for none)
		queue   []string // v1: prompts sent while it runs, in order
		active  bool     // v2: a turn runs
		loads   int
		open    map[string]bool
	}
	ss := map[string]*sess{}
	get := func(id string) *sess {
		s, ok := ss[id]
		if !ok {
			s = &sess{open: map[string]bool{}}
			ss[id] = s
		}
		return s
	}
	settled := map[string]bool{}
	var errs []error
	for i, e := range evs {
		s := get(e.SessionID)
		switch {
		case e.Sent && e.Method == "session/prompt":
			switch {
			case version == 2:
				s.active = true
			case s.running == "":
				s.running = e.ID
			default:
				s.queue = append(s.queue, e.ID)
			}
		case e.Sent && e.Method == "session/load":
			s.loads++
		case e.Response && e.Method == "session/load":
			s.loads--
		case e.Response && e.Method == "session/prompt" && version != 2:
			if j := slices.Index(s.queue, e.ID); j >= 0 {
				s.queue = slices.Delete(s.queue, j, j+1) // answered before its turn: ends nothing
				break
			}
			if e.ID != s.running {
				break
			}
			if len(s.open) > 0 {
				errs = append(errs, fmt.Errorf("event %d: prompt response #%s arrived with compactions open: %v", i, e.ID, keys(s.open)))
			}
			s.running = ""
			if len(s.queue) > 0 {
				s.running, s.queue = s.queue[0], s.queue[1:]
			}
		case !e.Sent && e.Kind == protocol.KindStateUpdate && e.State == "idle" && version == 2:
			if len(s.open) > 0 {
				errs = append(errs, fmt.Errorf("event %d: idle state_update arrived with compactions open: %v", i, keys(s.open)))
			}
			s.active = false
		case !e.Sent && e.Compaction():
			key := e.SessionID + "/" + e.CompactionID
			if s.running == "" && !s.active && s.loads <= 0 {
				errs = append(errs, fmt.Errorf("event %d: compaction update outside a turn: %s", i, e))
			}
			if settled[key] {
				errs = append(errs, fmt.Errorf("event %d: update after the terminal status: %s", i, e))
			}
			if e.Kind == protocol.KindUpdate && Terminal(e.Status) {
				settled[key] = true
				delete(s.open, e.CompactionID)
			} else {
				s.open[e.CompactionID] = true
			}
		}
	}
	return errors.Join(errs...)
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return strings.Join(ks, ",")
}

// Validate checks every session/update the client received against the
// official ACP schema of version (when it is installed: see schematest),
// and every compaction update against the protocol package's decoder.
func Validate(t testing.TB, evs []Event, version int) {
	t.Helper()
	v := schematest.For(t, version)
	for i, e := range evs {
		if e.Sent || e.Response || e.Method != "session/update" {
			continue
		}
		assert.NoError(t, v.Notification(e.Params), "event %d does not match the v%d schema", i, version)
		if e.Compaction() {
			_, err := protocol.UnmarshalUpdate(e.Update)
			assert.NoError(t, err, "event %d", i)
		}
	}
}

// Dump formats the record for a failure message.
func Dump(evs []Event) string {
	var b strings.Builder
	for i, e := range evs {
		fmt.Fprintf(&b, "%3d %s\n", i, e)
	}
	return b.String()
}

// Summary lists what the client received after initialize, one word per
// message: a session update's kind (a compaction_update's with
// ":"+status, a state_update's with ":"+state), a response's
// "response:"+method.
func Summary(evs []Event) []string {
	var out []string
	for _, e := range evs {
		switch {
		case e.Sent || e.Method == "initialize":
		case e.Response:
			out = append(out, "response:"+e.Method)
		case e.Kind == protocol.KindUpdate:
			out = append(out, e.Kind+":"+e.Status)
		case e.Kind == protocol.KindStateUpdate:
			out = append(out, e.Kind+":"+e.State)
		case e.Kind != "":
			out = append(out, e.Kind)
		default:
			out = append(out, e.Method)
		}
	}
	return out
}

// Transcript renders what the client received after initialize, for
// examples: "compaction_update <id> <status>", "compaction_summary_chunk
// <id>", other updates by kind, and "response <method> <stopReason>".
func Transcript(evs []Event) []string {
	var out []string
	for _, e := range evs {
		switch {
		case e.Sent || e.Method == "initialize":
		case e.Response:
			out = append(out, strings.TrimSpace("response "+e.Method+" "+StopReason(e.Result)))
		case e.Kind == protocol.KindUpdate:
			out = append(out, e.Kind+" "+e.CompactionID+" "+e.Status)
		case e.Kind == protocol.KindSummaryChunk:
			out = append(out, e.Kind+" "+e.CompactionID)
		default:
			out = append(out, e.Kind)
		}
	}
	return out
}

// Drive plays a v1 client that advertises the compaction capability: it
// initializes, sends one prompt for sessionID, hangs up, and returns the
// transcript. hangUp ends the client's half of the connection and waits
// for the agent to finish; nil closes the client connection.
func Drive(ctx context.Context, c *Client, sessionID string, hangUp func()) []string {
	if _, err := c.Initialize(ctx, 1, true); err != nil {
		return []string{"initialize: " + err.Error()}
	}
	if _, err := c.Prompt(ctx, sessionID, nil); err != nil {
		return []string{"prompt: " + err.Error()}
	}
	if hangUp != nil {
		hangUp()
	} else {
		_ = c.Conn.Close()
	}
	<-c.Conn.DisconnectNotify()
	return Transcript(c.Wire.Events())
}
