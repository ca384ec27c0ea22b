package agentkit_test

import (
	"context"
	"io"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

const helperEnv = "AGENTKIT_TEST_AGENT"

// runHelperAgent is the agent process of the panic tests: its prompt
// handler opens a compaction, streams a chunk, then panics. Mode "signal"
// is the signal tests' agent instead (runSignalAgent).
func runHelperAgent(mode string) {
	if mode == "signal" {
		runSignalAgent()
		return
	}
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
				startThenPanic(ctx, kit, conn, sid)
			}()
			<-done
			return endTurn()
		}
		startThenPanic(ctx, kit, conn, sid)
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

func startThenPanic(ctx context.Context, kit *agentkit.Kit, conn *jsonrpc2.Conn, sid string) {
	c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
	if err != nil {
		panic(err)
	}
	_ = c.Chunk(ctx, protocol.Text("partial"))
	panic("boom in the runtime")
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
