package kittest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Peer is a client that writes each message byte for byte as the test
// spells it, so a test chooses how ids are encoded, and records every line
// in both directions, raw and as Events (an Event's ID is the id's JSON
// value re-encoded, and a response's Method is that of the request with
// the same id by that value). It answers none
// of the agent's requests.
type Peer struct {
	Wire *Wire

	w    io.WriteCloser
	done chan struct{}

	mu       sync.Mutex
	raw      []string
	requests map[string]Event // by canonical id
}

// NewPeer starts a peer on rwc's two halves: it reads from r until EOF.
func NewPeer(r io.Reader, w io.WriteCloser) *Peer {
	p := &Peer{Wire: &Wire{}, w: w, done: make(chan struct{}), requests: map[string]Event{}}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			p.record(sc.Text(), false)
		}
	}()
	return p
}

// Send writes line and a newline.
func (p *Peer) Send(line string) error {
	p.record(line, true)
	_, err := io.WriteString(p.w, line+"\n")
	return err
}

// Close closes the peer's sending half and waits for the agent's output
// to end; hangUp, when not nil, does the closing instead (and whatever the
// transport needs for the agent's output to end).
func (p *Peer) Close(hangUp func()) {
	if hangUp != nil {
		hangUp()
	} else {
		_ = p.w.Close()
	}
	<-p.done
}

// Raw returns the lines read from the agent, as they came.
func (p *Peer) Raw() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.raw...)
}

// WaitResponse waits for the response to the request whose id is rawID
// (by JSON value), and returns it.
func (p *Peer) WaitResponse(ctx context.Context, rawID string) (Event, error) {
	want, err := canonicalID(json.RawMessage(rawID))
	if err != nil {
		return Event{}, err
	}
	return p.Wire.Wait(ctx, func(e Event) bool { return e.Response && e.ID == want })
}

func (p *Peer) record(line string, sent bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return
	}
	e := Event{Sent: sent, Method: m.Method, Params: m.Params}
	key, _ := canonicalID(m.ID)
	if len(m.ID) > 0 && string(m.ID) != "null" {
		e.ID = key // so that CheckTurns matches a response to its request by value
	}
	p.mu.Lock()
	if !sent {
		p.raw = append(p.raw, line)
	}
	switch {
	case sent && m.Method != "" && e.ID != "":
		decode(&e)
		p.requests[key] = e
	case !sent && m.Method == "" && e.ID != "":
		req := p.requests[key]
		e.Response, e.Method, e.Params, e.Result = true, req.Method, req.Params, m.Result
		if len(m.Error) > 0 && string(m.Error) != "null" {
			e.Error = decodeError(m.Error)
		}
		decode(&e)
	default:
		decode(&e)
	}
	p.mu.Unlock()
	p.Wire.add(e)
}

// canonicalID is the JSON value of a raw id, re-encoded: equal for two
// spellings of one value.
func canonicalID(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("kittest: id %s: %w", raw, err)
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func decodeError(raw json.RawMessage) *jsonrpc2.Error {
	e := &jsonrpc2.Error{}
	_ = json.Unmarshal(raw, e)
	return e
}

// Request ids that need escaping: both stacks answer them re-encoded
// (`"init-\u003c1\u003e"`, `"a\u003cb"`), the same ids by JSON value.
const (
	escapedInitID   = `"init-<1>"`
	escapedPromptID = `"a<b"`
)

// RequestIDsMatchByValue: the client's ids need escaping, and the stack
// answers them re-encoded. The re-encoded initialize answer still
// negotiates, and the prompt's open compaction is settled before its
// re-encoded response (see playEscapedIDs).
func RequestIDsMatchByValue(t *testing.T, st Stack) {
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		if _, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return "", err
		}
		return "end_turn", nil // left open: the turn's end settles it
	}}
	served := st.Serve(Config{}, a)
	hangUp := once(served.Close)
	t.Cleanup(hangUp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	playEscapedIDs(ctx, t, NewPeer(served.Client, served.Client), SessionID, hangUp)
}

// playEscapedIDs plays a v1 client with the compaction capability whose
// initialize and session/prompt ids are escapedInitID and escapedPromptID,
// for an agent whose prompt opens cmp_1 and answers without settling it.
// It checks that the stack re-encoded both ids (else the test would prove
// nothing), that the re-encoded initialize answer negotiated the
// capability (the client gets standard compaction updates), and that cmp_1
// was settled failed before the prompt's response (CheckTurns); it hangs
// up (see Peer.Close).
func playEscapedIDs(ctx context.Context, t testing.TB, p *Peer, sessionID string, hangUp func()) {
	t.Helper()
	lines := []struct{ id, line string }{
		{escapedInitID, `{"jsonrpc":"2.0","id":` + escapedInitID + `,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"session":{"compaction":{}}}}}`},
		{escapedPromptID, `{"jsonrpc":"2.0","id":` + escapedPromptID + `,"method":"session/prompt","params":{"sessionId":"` + sessionID + `","prompt":[{"type":"text","text":"hello"}]}}`},
	}
	for _, l := range lines {
		require.NoError(t, p.Send(l.line))
		_, err := p.WaitResponse(ctx, l.id)
		require.NoError(t, err, "no response to %s\n%s", l.id, Dump(p.Wire.Events()))
	}
	p.Close(hangUp)
	for _, l := range lines {
		for _, raw := range p.Raw() {
			assert.NotContains(t, raw, `"id":`+l.id, "the stack answered %s as sent: the ids were not re-encoded, the test proves nothing", l.id)
		}
	}
	evs := p.Wire.Events()
	assert.Equal(t, []string{"in_progress", "failed"}, Statuses(evs, "cmp_1"), "cmp_1 (standard updates, settled at the turn's end)\n%s", Dump(evs))
	assert.NoError(t, CheckTurns(evs, 1), "turn rules broken; wire:\n%s", Dump(evs))
	Validate(t, evs, 1)
}
