package acpsdk_test

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
)

// runSignalAgent is the agent process of the signal tests, written as the
// package documentation says an agent should stop: its prompt opens cmp_1
// and waits for its context; SIGINT or SIGTERM shuts the kit down, then
// the process exits.
func runSignalAgent() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	in, out := kittest.ChildStdio()
	kit := acpsdk.New(quiet)
	a := &agent{kit: kit}
	a.prompt = hangPrompt(a, nil)
	a.mu.Lock()
	a.conn = kit.NewAgentSideConnection(a, out, in)
	a.conn.SetLogger(discard)
	a.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-a.Conn().Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), acpsdk.CloseTimeout)
	defer cancel()
	_ = kit.Shutdown(sctx)
}

// hangPrompt opens cmp_1 and waits for the prompt's context, sending its
// cause on cause (when not nil).
func hangPrompt(a *agent, cause chan<- error) func(context.Context, acp.PromptRequest) (acp.PromptResponse, error) {
	return func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		if _, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable()); err != nil {
			return acp.PromptResponse{}, err
		}
		<-ctx.Done()
		if cause != nil {
			cause <- context.Cause(ctx)
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
	a.prompt = hangPrompt(a, cause)
	r.serve(a)
	r.initialize(1, true)
	if _, err := r.client.Conn.DispatchCall(r.ctx, "session/prompt", kittest.PromptParams(session, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.CompactionID == "cmp_1" }); err != nil {
		t.Fatal(err)
	}
	if err := r.kit.Shutdown(r.ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.CompactionID == "cmp_1" && e.Status == "failed" }); err != nil {
		t.Fatal(err)
	}
	if err := <-cause; !errors.Is(err, emitter.ErrConnectionClosed) {
		t.Errorf("the prompt's context ended with %v, want ErrConnectionClosed", err)
	}
	if _, err := acpsdk.SessionFrom(a.lastCtx(), session).Start(r.ctx, emitter.WithID("cmp_2")); err == nil {
		t.Error("a compaction opened after Shutdown")
	}
	if err := r.kit.CloseConn(r.ctx, a.Conn()); err != nil {
		t.Errorf("CloseConn after Shutdown = %v", err)
	}
	evs := r.finish(1)
	if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "failed"}) {
		t.Errorf("statuses %v", got)
	}
}
