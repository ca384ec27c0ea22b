package kittest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shared tests of a runtime's reports within one turn: what it streams,
// how it fails, what the turn's end settles, and a replay on session/load.

// StreamedCompactionReachesTheClientInOrder: a compaction the runtime
// streams between the agent's own updates reaches the client in the order
// both were produced, before the prompt's response. With final not empty
// the runtime completes it with that summary (emitter.Summary), which the
// terminal update carries; with "" it completes it without one.
func StreamedCompactionReachesTheClientInOrder(t *testing.T, st Stack, final string) {
	a := &Agent{Prompt: func(ctx context.Context, c Conn, p Prompt) (string, error) {
		_ = c.Message(ctx, p.SessionID, "before")
		cmp, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
		if err != nil {
			return "", err
		}
		_ = cmp.Chunk(ctx, protocol.Text("## Retained"))
		_ = c.Message(ctx, p.SessionID, "between")
		_ = cmp.Chunk(ctx, protocol.Text(" context"))
		var opts []emitter.SettleOption
		if final != "" {
			opts = append(opts, emitter.Summary(protocol.Text(final)))
		}
		if err := cmp.Complete(ctx, opts...); err != nil {
			return "", err
		}
		_ = c.Message(ctx, p.SessionID, "after")
		return "end_turn", nil
	}}
	r := Serve(t, st, Config{}, a)
	r.Initialize(1, true)
	res, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err, "prompt")
	require.Equal(t, "end_turn", StopReason(res), "prompt: %s", res)
	evs := r.Finish(1)
	want := []string{
		"agent_message_chunk", "compaction_update:in_progress", "compaction_summary_chunk", "agent_message_chunk",
		"compaction_summary_chunk", "compaction_update:completed", "agent_message_chunk", "response:session/prompt",
	}
	require.Equal(t, want, Summary(evs), "wire order")
	if final == "" {
		return
	}
	text, _ := json.Marshal(final)
	assert.JSONEq(t, `[{"type":"text","text":`+string(text)+`}]`, string(Field(Compactions(evs)[3], "summary")), "the completed update's summary")
}

// RuntimeFailureReachesTheClientAsFailedWithItsMessage: a runtime's Fail
// reaches the client as failed, with the error's text.
func RuntimeFailureReachesTheClientAsFailedWithItsMessage(t *testing.T, st Stack) {
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		c, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return "", err
		}
		_ = c.Fail(ctx, errors.New("provider overloaded"))
		return "end_turn", nil
	}}
	r := Serve(t, st, Config{}, a)
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err)
	evs := r.Finish(1)
	require.Equal(t, []string{"in_progress", "failed"}, Statuses(evs, "cmp_1"), "statuses")
	assert.Equal(t, `"provider overloaded"`, string(Field(Compactions(evs)[1], "error")), "the failed update's error")
}

// TurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse: a
// runtime that forgets its handle has the compaction settled failed
// (emitter.ErrTurnEnded) before the prompt's response.
func TurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse(t *testing.T, st Stack) {
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		if _, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return "", err
		}
		return "end_turn", nil // the runtime forgot its handle
	}}
	r := Serve(t, st, Config{}, a)
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err)
	evs := r.Finish(1)
	want := []string{"compaction_update:in_progress", "compaction_update:failed", "response:session/prompt"}
	require.Equal(t, want, Summary(evs))
	assert.Equal(t, fmt.Sprintf("%q", emitter.ErrTurnEnded.Error()), string(Field(Compactions(evs)[1], "error")), "the failed update's error")
}

// ReplayOnLoadPrecedesTheLoadResponse: a compaction replayed in
// session/load's handler reaches the client between the agent's own
// updates, terminal-first with its summary, before the load's response;
// its ID stays used (a later Start of it is refused with
// emitter.ErrIDReused).
func ReplayOnLoadPrecedesTheLoadResponse(t *testing.T, st Stack) {
	var reuse error
	a := &Agent{
		Load: func(ctx context.Context, c Conn, sid string) error {
			_ = c.Message(ctx, sid, "earlier")
			if err := st.SessionFrom(ctx, sid).Replay(ctx, emitter.Record{
				ID: "cmp_old", Status: protocol.Completed, Trigger: protocol.Auto,
				Summary: []protocol.ContentBlock{protocol.Text("Retained")}, Displayable: true,
			}); err != nil {
				return err
			}
			return c.Message(ctx, sid, "later")
		},
		Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
			_, reuse = st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_old"))
			return "end_turn", nil
		},
	}
	r := Serve(t, st, Config{}, a)
	r.Initialize(1, true)
	require.NoError(t, r.Client.Conn.Call(r.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}}, nil))
	_, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err)
	evs := r.Finish(1)
	want := []string{"agent_message_chunk", "compaction_update:completed", "agent_message_chunk", "response:session/load", "response:session/prompt"}
	require.Equal(t, want, Summary(evs))
	assert.JSONEq(t, `[{"type":"text","text":"Retained"}]`, string(Field(Compactions(evs)[0], "summary")), "the replayed summary")
	assert.ErrorIs(t, reuse, emitter.ErrIDReused, "starting a replayed ID again")
}

// ModeCase is a v1 client, with the compaction capability or without,
// against a kit configured with Fallbacks (see Config): the mode the kit
// picks, and what the client receives (Summary).
type ModeCase struct {
	Name      string
	Capable   bool
	Fallbacks []emitter.Renderer
	Mode      capability.Mode
	Want      []string
}

// CheckModes plays each case in a subtest of its name, against an agent
// whose prompt handler reads its connection's mode (Kit.Emitter) and then
// runs runtime, and checks the mode and what the client received.
func CheckModes(t *testing.T, st Stack, runtime func(context.Context, Session) error, cases []ModeCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var mode capability.Mode
			a := &Agent{Prompt: func(ctx context.Context, c Conn, p Prompt) (string, error) {
				em, err := c.Emitter()
				if err != nil {
					return "", err
				}
				mode = em.Mode()
				if err := runtime(ctx, st.SessionFrom(ctx, p.SessionID)); err != nil {
					return "", err
				}
				return "end_turn", nil
			}}
			r := Serve(t, st, Config{Fallbacks: tc.Fallbacks}, a)
			r.Initialize(1, tc.Capable)
			_, err := r.Client.Prompt(r.Ctx, SessionID, nil)
			require.NoError(t, err)
			evs := r.Finish(1)
			assert.Equal(t, tc.Mode, mode, "mode")
			require.Equal(t, tc.Want, Summary(evs))
		})
	}
}
