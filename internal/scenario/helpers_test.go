package scenario_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangGuard bounds each test; no assertion depends on timing.
const hangGuard = 20 * time.Second

// config returns the agent configuration of a test: no heartbeat and no
// watchdog unless the test asks, so the wire is exactly the script's.
func config(mut ...func(*scenario.Config)) scenario.Config {
	cfg := scenario.Config{
		Heartbeat:         -1,
		CompactionTimeout: -1,
		Logger:            slog.New(slog.DiscardHandler),
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

func newAgent(t *testing.T, mut ...func(*scenario.Config)) *scenario.Agent {
	t.Helper()
	a, err := scenario.New(config(mut...))
	require.NoError(t, err, "scenario.New")
	return a
}

// mode is how the test client takes compaction.
type mode struct {
	name    string
	version int
	capable bool
}

var (
	capableV1 = mode{"v1 with the capability", 1, true}
	plainV1   = mode{"v1 without the capability", 1, false}
	v2        = mode{"v2", 2, false}
)

// bothModes are the two v1 capability modes every script is tested in.
var bothModes = []mode{capableV1, plainV1}

// rig is one client connection to an agent over net.Pipe.
type rig struct {
	t      *testing.T
	ctx    context.Context
	m      mode
	cl     *client.Client
	served chan error
	closed bool
}

// connect serves a new connection of a and initializes the client.
func connect(t *testing.T, a *scenario.Agent, m mode) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	agentEnd, clientEnd := net.Pipe()
	r := &rig{t: t, ctx: ctx, m: m, served: make(chan error, 1)}
	go func() { r.served <- a.Serve(context.Background(), agentEnd) }()
	r.cl = client.New(context.Background(), clientEnd)
	t.Cleanup(r.close)
	_, err := r.cl.Initialize(ctx, m.version, m.capable)
	require.NoError(t, err, "initialize")
	return r
}

// session creates a session.
func (r *rig) session() string {
	r.t.Helper()
	from := r.cl.Len()
	sid, err := r.cl.NewSession(r.ctx, "/work")
	require.NoError(r.t, err, "session/new")
	if r.m.version == 1 {
		// v1 advertises its commands right after the response; wait for
		// them, so they are not part of the first turn's record.
		r.waitFor(from, "available_commands_update", func(m client.Message) bool {
			return m.Kind == "available_commands_update" && m.SessionID == sid
		})
	}
	return sid
}

// prompt runs one prompt to its end and returns the outcome and the
// messages of the turn.
func (r *rig) prompt(sid, text string) (client.Outcome, []client.Message) {
	r.t.Helper()
	turn, err := r.cl.StartPrompt(r.ctx, sid, text)
	require.NoError(r.t, err, "prompt %q", text)
	return r.wait(turn)
}

func (r *rig) wait(turn *client.Turn) (client.Outcome, []client.Message) {
	r.t.Helper()
	o, err := turn.Wait(r.ctx)
	require.NoError(r.t, err, "waiting for the turn\nwire:\n%s", dump(r.cl.Messages()))
	return o, r.cl.Messages()[turn.From():]
}

// waitFor waits for an agent message from Seq from on that satisfies pred.
func (r *rig) waitFor(from int, what string, pred func(client.Message) bool) {
	r.t.Helper()
	_, err := r.cl.Wait(r.ctx, from, func(m client.Message) bool { return m.Dir == conformance.FromAgent && pred(m) })
	require.NoError(r.t, err, "waiting for %s\nwire:\n%s", what, dump(r.cl.Messages()))
}

// close hangs up and waits for the agent's Serve to return.
func (r *rig) close() {
	if r.closed {
		return
	}
	r.closed = true
	_ = r.cl.Close()
	select {
	case err := <-r.served:
		assert.NoError(r.t, err, "Serve's return after the client hung up")
	case <-time.After(hangGuard):
		assert.Fail(r.t, "Serve did not return after the client hung up")
	}
}

// finish hangs up and checks the whole record: the conformance checker
// with the official schema finds nothing, and every message of either side
// validates against the schema of the negotiated version. It returns the
// record.
func (r *rig) finish() []client.Message {
	r.t.Helper()
	r.close()
	msgs := r.cl.Messages()
	checkRecord(r.t, msgs, r.m.version)
	return msgs
}

// checkRecord runs the checks of finish on a record.
func checkRecord(t *testing.T, msgs []client.Message, version int) {
	t.Helper()
	v1, v2 := schematest.For(t, 1), schematest.For(t, 2)
	var transcript bytes.Buffer
	for _, m := range msgs {
		transcript.WriteString(m.Line() + "\n")
	}
	vs, err := conformance.CheckTranscript(&transcript, conformance.WithSchema(v1, v2), conformance.WithStrictReplay())
	require.NoError(t, err, "conformance.CheckTranscript")
	assert.Empty(t, vs, "conformance violations")
	schema := v1
	if version == 2 {
		schema = v2
	}
	for _, m := range msgs {
		assert.NoError(t, schema.Message(m.Raw), "message %d does not match the v%d schema", m.Seq, version)
	}
	if t.Failed() {
		t.Logf("wire:\n%s", dump(msgs))
	}
}

func dump(msgs []client.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%3d %s\n", m.Seq, m.Line())
	}
	return b.String()
}

// seq describes what the agent sent, one word per message: a session
// update's kind with its entity's ID and status (or state and stop
// reason), a response's result. Runs of the same word are collapsed to
// "word*N".
func seq(msgs []client.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Dir != conformance.FromAgent {
			continue
		}
		out = append(out, word(m))
	}
	return collapse(out)
}

func word(m client.Message) string {
	switch {
	case m.Response && m.Error != nil:
		return fmt.Sprintf("error:%d", m.Error.Code)
	case m.Response && m.Method == "session/prompt":
		var r struct {
			StopReason string `json:"stopReason"`
			MessageID  string `json:"messageId"`
		}
		_ = json.Unmarshal(m.Result, &r)
		if r.StopReason != "" {
			return "response:" + r.StopReason
		}
		return "response:messageId"
	case m.Response:
		return "response:" + m.Method
	case m.Kind == "compaction_update":
		return "compaction_update:" + m.CompactionID + ":" + m.Status
	case m.Kind == "compaction_summary_chunk":
		return "chunk:" + m.CompactionID
	case m.Kind == "tool_call" || m.Kind == "tool_call_update":
		return m.Kind + ":" + m.ToolCallID + ":" + m.Status
	case m.Kind == "state_update":
		return strings.TrimSuffix("state_update:"+m.State+":"+m.StopReason, ":")
	case m.Kind != "":
		return m.Kind
	}
	return m.Method
}

func collapse(words []string) []string {
	var out []string
	for i := 0; i < len(words); {
		j := i + 1
		for j < len(words) && words[j] == words[i] {
			j++
		}
		if n := j - i; n > 1 {
			out = append(out, fmt.Sprintf("%s*%d", words[i], n))
		} else {
			out = append(out, words[i])
		}
		i = j
	}
	return out
}

// wantSeq fails the test when got differs from want.
func wantSeq(t *testing.T, got []client.Message, want ...string) {
	t.Helper()
	if len(want) == 0 {
		want = nil // as seq has it: no messages, whatever the caller's empty slice
	}
	assert.Equal(t, want, seq(got), "what the agent sent\nwire:\n%s", dump(got))
}

// noStandardUpdates fails the test when a v1 client without the
// capability got a compaction_update or compaction_summary_chunk.
func noStandardUpdates(t *testing.T, msgs []client.Message) {
	t.Helper()
	for _, m := range msgs {
		assert.NotContains(t, []string{"compaction_update", "compaction_summary_chunk"}, m.Kind,
			"message %d is a standard compaction update sent to a client without the capability: %s", m.Seq, m.Raw)
	}
}

// field returns a top-level field of a session update.
func field(m client.Message, name string) json.RawMessage {
	var u map[string]json.RawMessage
	_ = json.Unmarshal(m.Update, &u)
	return u[name]
}

// find returns the first agent message of msgs that satisfies pred.
func find(t *testing.T, msgs []client.Message, what string, pred func(client.Message) bool) client.Message {
	t.Helper()
	for _, m := range msgs {
		if m.Dir == conformance.FromAgent && pred(m) {
			return m
		}
	}
	require.FailNow(t, "no "+what+" on the wire", "wire:\n%s", dump(msgs))
	return client.Message{}
}

func update(kind, id, status string) func(client.Message) bool {
	return func(m client.Message) bool {
		return m.Kind == kind && (m.CompactionID == id || m.ToolCallID == id) && m.Status == status
	}
}
