package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
)

// AcpsdkTarget plays scenarios on the tiny agent of KitTarget (inproc.go)
// built on coder/acp-go-sdk behind agentkit/acpsdk: a raw
// acp.MethodHandler served by kit.NewConnection over two io.Pipes to the
// same jsonrpc2 client peer. A raw handler, because the SDK's typed API
// is v1 only (and its typed SessionUpdate cannot carry compaction
// updates). The SDK answers a request when its handler returns, so a v2
// prompt's handler returns the acknowledgement while the turn's steps go
// on, with the kit's prompt context, until the idle state_update. The
// cancel grace is disabled (negative), as for KitTarget.
type AcpsdkTarget struct {
	// Options are added to the kit's.
	Options []acpsdk.Option
	// History asks for Run.History, as KitTarget's.
	History bool
}

// Name implements Target.
func (AcpsdkTarget) Name() string { return "acpsdk" }

// Play implements Target.
func (t AcpsdkTarget) Play(ctx context.Context, sc Scenario) (*Run, error) {
	if sc.NoKit != "" {
		return nil, fmt.Errorf("%w: %s", ErrNotExpressible, sc.NoKit)
	}
	r, err := scenarioFallback(sc)
	if err != nil {
		return nil, err
	}
	discard := slog.New(slog.DiscardHandler)
	opts := []acpsdk.Option{
		acpsdk.WithLogger(discard),
		acpsdk.WithCancelGrace(-1),
		acpsdk.WithFallback(r),
	}
	hist := &history{}
	if t.History {
		opts = append(opts, acpsdk.WithEmitterOptions(emitter.OnFinalRecord(hist.final)))
	}
	kit := acpsdk.New(append(opts, t.Options...)...)
	p := newInprocPlay(sc, hist, func(p *inprocPlay) (io.ReadWriteCloser, func(), error) {
		handlers := &handlerGate{} // one a connection: a replay reconnects
		pp := &sdkPipes{}
		pp.toAgentR, pp.toAgentW = io.Pipe()
		pp.fromAgentR, pp.fromAgentW = io.Pipe()
		var (
			mu   sync.Mutex
			conn *acpsdk.Conn
		)
		ready := make(chan struct{})
		h := func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
			// The SDK may call the handler before NewConnection returns.
			<-ready
			mu.Lock()
			c := conn
			mu.Unlock()
			return sdkHandle(ctx, p, kit, c, handlers, method, params)
		}
		mu.Lock()
		conn = kit.NewConnection(h, pp.fromAgentW, pp.toAgentR)
		mu.Unlock()
		conn.SetLogger(discard)
		close(ready)
		hangUp := func() {
			// The agent's input ends: the kit settles what is open and
			// writes it before the SDK learns of it; then the client's
			// input ends.
			_ = pp.toAgentW.Close()
			<-conn.Done()
			_ = kit.CloseConn(context.Background(), conn)
			handlers.close()
			_ = pp.fromAgentW.Close()
		}
		return sdkClientEnd{pp}, hangUp, nil
	})
	return p.play(ctx, t.History)
}

// sdkHandle runs inprocPlay.handle for one SDK handler call and returns
// its reply. The handle runs on a goroutine of its own, so a v2 prompt's
// steps outlive the acknowledgement the SDK writes when this returns.
func sdkHandle(ctx context.Context, p *inprocPlay, kit *acpsdk.Kit, conn *acpsdk.Conn, handlers *handlerGate, method string, params json.RawMessage) (any, *acp.RequestError) {
	type answer struct {
		res any
		err error
	}
	w := agentWire{
		notify: func(ctx context.Context, method string, params any) error {
			return conn.Connection().SendNotification(context.WithoutCancel(ctx), method, params)
		},
		session: func(ctx context.Context) sessionReporter { return acpsdk.SessionFrom(ctx, sessionID) },
		emitter: func() (*emitter.Emitter, error) { return kit.Emitter(conn) },
	}
	replied := make(chan answer, 1)
	done := make(chan struct{})
	if !handlers.goRun(func() {
		defer close(done)
		p.handle(ctx, w, method, params, func(res any, err error) { replied <- answer{res, err} })
	}) {
		return nil, acp.NewInternalError(map[string]any{"error": "the connection is closed"})
	}
	var a answer
	select {
	case a = <-replied:
	case <-done:
		select {
		case a = <-replied:
		default:
			return nil, nil // a notification
		}
	}
	if a.err != nil {
		return nil, acp.NewInternalError(map[string]any{"error": a.err.Error()})
	}
	return a.res, nil
}

// handlerGate runs the SDK's handler calls on goroutines of their own
// and waits for them at hang-up. The SDK still calls the handler after
// its Done (a request read before the input ended starts on a goroutine
// of its own; queued notifications drain): a WaitGroup's Add racing its
// Wait is a misuse the race detector reports, so a call that arrives once
// close has begun is refused instead of run.
type handlerGate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// goRun runs f on a goroutine of its own unless the gate is closed; it
// reports whether f runs.
func (g *handlerGate) goRun(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// close refuses later calls and waits for the running ones.
func (g *handlerGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// sdkPipes are the two one-way pipes between the SDK agent and the
// client, so the client's sending half can be hung up alone.
type sdkPipes struct {
	toAgentR, fromAgentR *io.PipeReader
	toAgentW, fromAgentW *io.PipeWriter
}

// sdkClientEnd is the client's io.ReadWriteCloser.
type sdkClientEnd struct{ p *sdkPipes }

func (c sdkClientEnd) Read(b []byte) (int, error)  { return c.p.fromAgentR.Read(b) }
func (c sdkClientEnd) Write(b []byte) (int, error) { return c.p.toAgentW.Write(b) }
func (c sdkClientEnd) Close() error {
	_ = c.p.toAgentW.Close()
	return c.p.fromAgentR.Close()
}
