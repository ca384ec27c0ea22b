package matrix

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
)

// EmitterTarget plays scenarios on package emitter alone. The emitter sends
// through a wiretest.Recorder; the target writes the exchange an agent
// would have around it (initialize, whose raw params and result feed
// capability.Parse, session/new, prompts and their responses, session/load)
// and, at the end of each turn, settles what is still open as agentkit
// would: cancelled after the client's session/cancel, failed otherwise.
type EmitterTarget struct {
	// Options are added to every connection's emitter.
	Options []emitter.Option
	// History asks for Run.History: every connection's emitter hands the
	// runtime its final records (emitter.OnFinalRecord), and after the
	// scenario a new connection's session/load replays them, in the order
	// they were handed over. A compaction the runtime reported whose
	// record was not handed over exactly once is a history step error.
	History bool
}

// Name implements Target.
func (EmitterTarget) Name() string { return "emitter" }

type emitterPlay struct {
	t       EmitterTarget
	sc      Scenario
	run     *Run
	conn    *Conn
	rec     *wiretest.Recorder
	flushed int
	em      *emitter.Emitter
	rt      *runtime
	nextID  int
	marks   int
	version int
	hist    history
}

// Play implements Target.
func (t EmitterTarget) Play(ctx context.Context, sc Scenario) (*Run, error) {
	p := &emitterPlay{t: t, sc: sc, run: &Run{}}
	if err := p.connect(true); err != nil {
		return nil, err
	}
	for ti, turn := range sc.Turns {
		switch turn.Kind {
		case Reconnect:
			if err := p.connect(false); err != nil {
				return nil, err
			}
			continue
		case Prompt, Load:
		default:
			return nil, fmt.Errorf("matrix: turn %d: unknown kind %d", ti+1, turn.Kind)
		}
		p.turn(ctx, ti, turn)
	}
	if t.History {
		p.history(ctx)
	}
	return p.run, nil
}

// history plays the history replay on a connection of its own, kept out
// of Run.Conns.
func (p *emitterPlay) history(ctx context.Context) {
	conns := p.run.Conns
	p.run.Conns = nil
	defer func() { p.run.Conns = conns }()
	if err := p.connect(false); err != nil {
		p.run.StepErrors = append(p.run.StepErrors, fmt.Sprintf("history: %v", err))
		return
	}
	errs := len(p.run.StepErrors)
	p.run.StepErrors = append(p.run.StepErrors, p.hist.problems()...)
	p.turn(ctx, len(p.sc.Turns), Turn{Kind: Load, Steps: p.hist.replaySteps()})
	for i := errs; i < len(p.run.StepErrors); i++ {
		p.run.StepErrors[i] = "history: " + p.run.StepErrors[i]
	}
	p.run.History = p.run.Conns[0]
	p.run.Reported = p.hist.IDs()
}

func (p *emitterPlay) id() int { p.nextID++; return p.nextID - 1 }

// connect starts a connection: initialize, and on the first one session/new.
func (p *emitterPlay) connect(first bool) error {
	p.conn = &Conn{}
	p.run.Conns = append(p.run.Conns, p.conn)
	p.rec = &wiretest.Recorder{}
	p.flushed = 0
	params := p.sc.Client.InitializeParams()
	result := initResult(p.sc.Client.Version)
	id := p.id()
	p.conn.Add(conformance.FromClient, request(id, "initialize", params))
	p.conn.Add(conformance.FromAgent, response(id, result))
	n := capability.Parse(params, result)
	p.version = n.Version
	opts := []emitter.Option{emitter.WithNegotiation(n)}
	if p.sc.Fallback != "" {
		r, err := fallback.ByName(p.sc.Fallback)
		if err != nil {
			return err
		}
		opts = append(opts, emitter.WithFallback(r))
	}
	if p.t.History {
		opts = append(opts, emitter.OnFinalRecord(p.hist.final))
	}
	p.em = emitter.New(p.rec, append(opts, p.t.Options...)...)
	sess := p.em.Session(sessionID)
	p.rt = &runtime{
		start:   sess.Start,
		replay:  sess.Replay,
		session: func() (*emitter.Session, error) { return sess, nil },
		notify: func(ctx context.Context, u json.RawMessage) error {
			return p.rec.Notify(ctx, sessionID, u)
		},
		version: p.version,
		hist:    &p.hist,
	}
	if first {
		id := p.id()
		p.conn.Add(conformance.FromClient, request(id, "session/new", newSessionParams(p.version)))
		p.conn.Add(conformance.FromAgent, response(id, map[string]any{"sessionId": sessionID}))
	}
	return nil
}

// flush moves what the emitter sent into the transcript.
func (p *emitterPlay) flush() {
	lines := p.rec.Lines()
	for _, l := range lines[p.flushed:] {
		p.conn.Add(conformance.FromAgent, l)
	}
	p.flushed = len(lines)
}

func (p *emitterPlay) agentUpdate(u json.RawMessage) {
	p.flush()
	p.conn.Add(conformance.FromAgent, sessionUpdate(sessionID, u))
}

func (p *emitterPlay) turn(ctx context.Context, ti int, turn Turn) {
	id := p.id()
	if turn.Kind == Prompt {
		p.conn.Add(conformance.FromClient, request(id, "session/prompt", promptParams(sessionID, fmt.Sprintf("turn %d", ti+1))))
		if p.version == 2 {
			p.conn.Add(conformance.FromAgent, response(id, map[string]any{"messageId": fmt.Sprintf("msg_%d", ti+1)}))
			p.agentUpdate(stateUpdate("running", ""))
		}
	} else {
		method, params := loadRequest(p.version, sessionID)
		p.conn.Add(conformance.FromClient, request(id, method, params))
	}
	cancelled := false
	for si, s := range turn.Steps {
		switch s.Op {
		case OpUserCancel:
			p.flush()
			p.conn.Add(conformance.FromClient, notification("session/cancel", map[string]any{"sessionId": sessionID}))
			cancelled = true
		case OpExpect:
			p.flush()
			p.conn.Add(conformance.FromAgent, notification(MarkMethod, map[string]any{"n": p.marks}))
			p.marks++
		default:
			if msg := checkErr(ti, si, s, p.rt.do(ctx, s)); msg != "" {
				p.run.StepErrors = append(p.run.StepErrors, msg)
			}
		}
	}
	if turn.Kind == Load {
		p.flush()
		if p.version == 2 {
			p.agentUpdate(stateUpdate("idle", "end_turn"))
		}
		p.conn.Add(conformance.FromAgent, response(id, map[string]any{}))
		return
	}
	// The end of the turn, as agentkit ends it.
	reason, stop := emitter.ErrTurnEnded, "end_turn"
	if cancelled {
		reason, stop = emitter.ErrCancelled, "cancelled"
	}
	if _, err := p.em.Session(sessionID).SettleAll(ctx, reason); err != nil {
		p.run.StepErrors = append(p.run.StepErrors, fmt.Sprintf("turn %d: settling at the end of the turn: %v", ti+1, err))
	}
	p.flush()
	if p.version == 2 {
		p.agentUpdate(stateUpdate("idle", stop))
		return
	}
	p.conn.Add(conformance.FromAgent, response(id, map[string]any{"stopReason": stop}))
}
