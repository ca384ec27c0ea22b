package acpsdk_test

import (
	"context"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSignalAgent is the agent process of the signal tests: a
// kittest.SignalAgent on acpsdk.
func runSignalAgent() {
	kit := acpsdk.New(quiet)
	a := &agent{kit: kit}
	a.prompt = hangPrompt(nil)
	kittest.SignalAgent(func(in io.ReadCloser, out io.WriteCloser) <-chan struct{} {
		a.mu.Lock()
		a.conn = kit.NewAgentSideConnection(a, out, in)
		a.conn.SetLogger(discard)
		a.mu.Unlock()
		return a.Conn().Done()
	}, kit.Shutdown, acpsdk.CloseTimeout)
}

// hangPrompt runs kittest.OpenUntilEnd, and sends the cause it returns on
// cause (when not nil).
func hangPrompt(cause chan<- error) func(context.Context, acp.PromptRequest) (acp.PromptResponse, error) {
	return func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		err := kittest.OpenUntilEnd(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
		if cause != nil {
			cause <- err
		}
		return cancelled()
	}
}

// TestSignalSettlesThenTheAgentExits: an agent on acp-go-sdk that gets
// SIGINT or SIGTERM with a compaction open writes its terminal update
// before it exits (a real process, real pipes, a real signal).
func TestSignalSettlesThenTheAgentExits(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			kittest.CheckSignalSettles(t, helperEnv+"=signal", session, sig)
		})
	}
}

// TestShutdownSettlesAndWritesBeforeReturning: Shutdown settles the open
// compaction as failed (emitter.ErrConnectionClosed), ends the prompt's
// context with that cause, and has written the settlement when it returns;
// compactions are refused from then on.
func TestShutdownSettlesAndWritesBeforeReturning(t *testing.T) {
	r := newRig(t)
	a := &agent{}
	cause := make(chan error, 1)
	a.prompt = hangPrompt(cause)
	r.serve(a)
	r.Initialize(1, true)
	r.StartPrompt()
	require.NoError(t, r.kit.Shutdown(r.Ctx), "Shutdown")
	_, err := r.Client.Wire.Wait(r.Ctx, func(e kittest.Event) bool { return e.CompactionID == "cmp_1" && e.Status == "failed" })
	require.NoError(t, err)
	assert.ErrorIs(t, <-cause, emitter.ErrConnectionClosed, "the prompt's context ended with")
	_, err = acpsdk.SessionFrom(a.lastCtx(), session).Start(r.Ctx, emitter.WithID("cmp_2"))
	assert.Error(t, err, "a compaction opened after Shutdown")
	assert.NoError(t, r.kit.CloseConn(r.Ctx, a.Conn()), "CloseConn after Shutdown")
	evs := r.Finish(1)
	assert.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(evs, "cmp_1"), "statuses")
}
