package kittest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shared tests of a cancelled turn: who settles the compaction the
// client's session/cancel interrupts, and when.

// CancelScenario runs one prompt, on a kit configured by cfg, that the
// client cancels once a compaction is in progress on the wire. It returns
// the prompt's result and the record (see Rig.Finish).
func CancelScenario(t *testing.T, st Stack, cfg Config, a *Agent) (json.RawMessage, []Event) {
	t.Helper()
	r := Serve(t, st, cfg, a)
	r.Initialize(1, true)
	call := r.StartPrompt()
	require.NoError(t, r.Client.Cancel(r.Ctx, SessionID))
	var res json.RawMessage
	require.NoError(t, call.Wait(r.Ctx, &res))
	return res, r.Finish(1)
}

// checkCancelledBeforeTheResponse checks that the client received the
// compaction in progress, then cancelled, then the prompt's response, and
// nothing else.
func checkCancelledBeforeTheResponse(t *testing.T, evs []Event) {
	t.Helper()
	want := []string{"compaction_update:in_progress", "compaction_update:cancelled", "response:session/prompt"}
	require.Equal(t, want, Summary(evs))
}

// CancelReportedByTheRuntimeReachesTheClientBeforeTheResponse: the
// client's session/cancel ends the prompt's context with cause
// emitter.ErrCancelled, and the runtime's Cancel reaches the client before
// the prompt's response.
func CancelReportedByTheRuntimeReachesTheClientBeforeTheResponse(t *testing.T, st Stack) {
	var cause error
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		c, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return "", err
		}
		<-ctx.Done() // session/cancel cancels the prompt's context
		cause = context.Cause(ctx)
		_ = c.Cancel(ctx)
		return "cancelled", nil
	}}
	res, evs := CancelScenario(t, st, Config{}, a)
	assert.Equal(t, "cancelled", StopReason(res), "stopReason of %s", res)
	assert.ErrorIs(t, cause, emitter.ErrCancelled, "the prompt context's cause")
	checkCancelledBeforeTheResponse(t, evs)
}

// CancelTheRuntimeNeverReportsIsSettledAsCancelledAtTheGraceDeadline: a
// runtime that does not report after session/cancel has its compaction
// settled cancelled by the kit once the cancel grace is over, while the
// turn still runs; the runtime's late report is refused
// (emitter.ErrSettled).
func CancelTheRuntimeNeverReportsIsSettledAsCancelledAtTheGraceDeadline(t *testing.T, st Stack) {
	settled := make(chan emitter.Event, 1)
	obs := emitter.ObserverFunc(func(_ context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled {
			settled <- ev
		}
	})
	var late error
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		c, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return "", err
		}
		<-ctx.Done()
		<-settled // the kit, not the runtime, settles it; the turn is still open
		late = c.Complete(ctx)
		return "cancelled", nil
	}}
	cfg := Config{CancelGrace: Grace(50 * time.Millisecond), Emitter: []emitter.Option{emitter.WithObserver(obs)}}
	_, evs := CancelScenario(t, st, cfg, a)
	assert.ErrorIs(t, late, emitter.ErrSettled, "the runtime's late Complete")
	checkCancelledBeforeTheResponse(t, evs)
}

// CancelledTurnEndingWithAnOpenCompactionSettlesItAsCancelled: with a
// negative cancel grace (the kit leaves the runtime the whole turn), a
// cancelled turn whose runtime returns without settling has its compaction
// settled cancelled, not failed, before the response.
func CancelledTurnEndingWithAnOpenCompactionSettlesItAsCancelled(t *testing.T, st Stack) {
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		if _, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return "", err
		}
		<-ctx.Done()
		return "cancelled", nil // returns promptly but never settles
	}}
	_, evs := CancelScenario(t, st, Config{CancelGrace: Grace(-1)}, a)
	checkCancelledBeforeTheResponse(t, evs)
}
