package agentkit_test

import (
	"context"
	"io"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/sourcegraph/jsonrpc2"
)

const helperEnv = "AGENTKIT_TEST_AGENT"

// runCrashAgent is the agent process of the panic tests: its prompt
// handler runs kittest.StartThenPanic, in the handler itself (mode "sync"
// and "async", with the handler behind agentkit.AsyncHandler) or on a
// goroutine of its own that opts in with agentkit.Recover ("recover").
func runCrashAgent(mode string) {
	in, out := kittest.ChildStdio()
	kit := agentkit.New(quiet)
	a := &agent{kit: kit}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		if mode == "recover" {
			// A host dispatching on its own goroutines opts in.
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer agentkit.Recover(ctx)
				kittest.StartThenPanic(ctx, agentkit.SessionFrom(ctx, sid))
			}()
			<-done
			return endTurn()
		}
		kittest.StartThenPanic(ctx, agentkit.SessionFrom(ctx, sid))
		return endTurn()
	}
	var h jsonrpc2.Handler = jsonrpc2.HandlerWithError(a.handle)
	switch mode {
	case "async":
		h = agentkit.AsyncHandler(h)
	case "recover":
		h = jsonrpc2.AsyncHandler(h)
	}
	conn := kit.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(rwc{in, out}), h)
	<-conn.DisconnectNotify()
}

type rwc struct {
	io.ReadCloser
	io.WriteCloser
}

func (r rwc) Close() error {
	_ = r.WriteCloser.Close()
	return r.ReadCloser.Close()
}

func TestPanickingHandlerSettlesAsFailedThenThePanicGoesOn(t *testing.T) {
	for _, mode := range []string{"sync", "async", "recover"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			kittest.CheckCrashSettles(t, helperEnv+"="+mode, session)
		})
	}
}
