package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/sourcegraph/jsonrpc2"
)

// KitTarget plays scenarios on a tiny agent built on sourcegraph/jsonrpc2
// behind agentkit, served over a net.Pipe to a jsonrpc2 client peer. The
// agent runs each turn's steps in its request handler (behind
// agentkit.AsyncHandler) through agentkit.SessionFrom; the kit settles what is open
// at the end of each turn (v1: before the prompt response; v2: before the
// idle state_update, which the agent sends). The cancel grace is disabled
// (negative), so a cancelled turn is settled at its end and no timer is
// involved. The client records the raw lines it writes and reads. The
// runtime and the client are shared with AcpsdkTarget (inproc.go).
type KitTarget struct {
	// Options are added to the kit's.
	Options []agentkit.Option
	// History asks for Run.History: the kit's emitters hand the runtime
	// its final records (emitter.OnFinalRecord, through
	// agentkit.WithEmitterOptions), and after the scenario a new
	// connection's session/load replays them through the kit, in the
	// order they were handed over.
	History bool
}

// Name implements Target.
func (KitTarget) Name() string { return "agentkit" }

// scenarioFallback is the renderer the scenario names, fallback.None{}
// for none: a kit's own default (a tool call) must not stand in for
// "none".
func scenarioFallback(sc Scenario) (emitter.Renderer, error) {
	if sc.Fallback == "" {
		return fallback.None{}, nil
	}
	return fallback.ByName(sc.Fallback)
}

// Play implements Target.
func (t KitTarget) Play(ctx context.Context, sc Scenario) (*Run, error) {
	if sc.NoKit != "" {
		return nil, fmt.Errorf("%w: %s", ErrNotExpressible, sc.NoKit)
	}
	r, err := scenarioFallback(sc)
	if err != nil {
		return nil, err
	}
	opts := []agentkit.Option{
		agentkit.WithLogger(slog.New(slog.DiscardHandler)),
		agentkit.WithCancelGrace(-1),
		agentkit.WithFallback(r),
	}
	hist := &history{}
	if t.History {
		opts = append(opts, agentkit.WithEmitterOptions(emitter.OnFinalRecord(hist.final)))
	}
	kit := agentkit.New(append(opts, t.Options...)...)
	p := newInprocPlay(sc, hist, func(p *inprocPlay) (io.ReadWriteCloser, func(), error) {
		agentEnd, clientEnd := net.Pipe()
		agent := kit.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(agentEnd),
			agentkit.AsyncHandler(&kitAgent{p: p, kit: kit}), jsonrpc2.SetLogger(nopLogger{}))
		hangUp := func() {
			_ = agent.Close()
			<-agent.DisconnectNotify()
		}
		return clientEnd, hangUp, nil
	})
	return p.play(ctx, t.History)
}

// kitAgent is the jsonrpc2 handler of the tiny agent (inprocPlay.handle).
type kitAgent struct {
	p   *inprocPlay
	kit *agentkit.Kit
}

func (a *kitAgent) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	reply := func(result any, err error) {
		if req.Notif {
			return
		}
		if err != nil {
			_ = conn.ReplyWithError(ctx, req.ID, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()})
			return
		}
		_ = conn.Reply(ctx, req.ID, result)
	}
	w := agentWire{
		notify: func(ctx context.Context, method string, params any) error {
			return conn.Notify(context.WithoutCancel(ctx), method, params)
		},
		session: func(ctx context.Context) sessionReporter { return agentkit.SessionFrom(ctx, sessionID) },
		emitter: func() (*emitter.Emitter, error) { return a.kit.Emitter(conn) },
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	a.p.handle(ctx, w, req.Method, params, reply)
}
