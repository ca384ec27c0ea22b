package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// Stop reasons.
const (
	stopEndTurn   = "end_turn"
	stopCancelled = "cancelled"
	stopError     = "error" // v2 only
)

// Timing and sizes of the scripts.
const (
	slowChunks       = 50
	slowInterval     = 100 * time.Millisecond
	floodDefault     = 1000
	floodMax         = 100_000
	compactedMessage = "Context compacted: a summary now stands in for the earlier conversation. Carrying on from there."
)

// Errors the scripted runtime reports.
var (
	// ErrSummaryRequest is the failure of /compact fail.
	ErrSummaryRequest = errors.New("summary request failed")
	// ErrSummarizerUnavailable is the failure of /compact failearly,
	// reported before the compaction started.
	ErrSummarizerUnavailable = errors.New("summarizer model unavailable")
)

// errRuntimePanicked answers a prompt whose runtime panicked.
var errRuntimePanicked = &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "internal error: the agent runtime panicked during the turn"}

// turn is one prompt being handled.
type turn struct {
	c   *conn
	rpc *jsonrpc2.Conn
	ctx context.Context
	s   *session
	ks  *agentkit.Session
	v2  bool
	// opened are the handles of the compactions the turn started, for a
	// panic to settle.
	opened []*emitter.Compaction
}

// prompt handles session/prompt. v1 answers when the turn ends; v2
// acknowledges the inserted user message first and ends the turn with an
// idle state_update.
func (c *conn) prompt(ctx context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request) {
	var p struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if err := decode(req, &p); err != nil {
		c.reply(ctx, rpc, req, nil, err)
		return
	}
	s := c.a.session(p.SessionID)
	if s == nil {
		c.reply(ctx, rpc, req, nil, errUnknownSession(p.SessionID))
		return
	}
	if len(p.Prompt) == 0 {
		c.reply(ctx, rpc, req, nil, errInvalidParams("prompt must not be empty"))
		return
	}
	ctx, run, ok := s.beginTurn(ctx)
	if !ok {
		c.reply(ctx, rpc, req, nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: "a prompt is already running in this session"})
		return
	}
	defer s.endTurn(run)
	t := &turn{c: c, rpc: rpc, ctx: ctx, s: s, ks: agentkit.SessionFrom(ctx, s.id), v2: c.v2()}
	userID := s.addMessage(roleUser, p.Prompt)
	if t.v2 {
		t.notify(stateUpdate{SessionUpdate: protocol.KindStateUpdate, State: "running"})
		t.notify(messageUpsert{SessionUpdate: "user_message", MessageID: userID, Content: p.Prompt})
		c.reply(ctx, rpc, req, promptResultV2{MessageID: userID}, nil)
	}

	stop, err := t.guarded(firstText(p.Prompt))
	// The turn is over before its last message leaves: the client may
	// send the next prompt as soon as it reads it.
	s.endTurn(run)

	if !t.v2 {
		if err != nil {
			c.reply(ctx, rpc, req, nil, err)
			return
		}
		c.reply(ctx, rpc, req, promptResultV1{StopReason: stop}, nil)
		return
	}
	idle := stateUpdate{SessionUpdate: protocol.KindStateUpdate, State: "idle", StopReason: stop}
	if err != nil {
		// The prompt was acknowledged already: a failure after insertion
		// ends the turn with stopReason "error".
		idle.StopReason = stopError
		var rpcErr *jsonrpc2.Error
		if !errors.As(err, &rpcErr) {
			rpcErr = &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
		}
		idle.Error = &rpcError{Code: rpcErr.Code, Message: rpcErr.Message}
	}
	t.notify(idle)
}

// guarded runs the script, recovering a panic of the runtime: the
// compactions the turn opened and left open are failed
// (emitter.ErrAgentCrashed) through their handles before the prompt is
// answered with an error, and the process carries on. (agentkit.Recover
// would settle every session of the connection, for a process about to
// die.)
func (t *turn) guarded(prompt string) (stop string, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		t.c.a.log.Error("runtime panicked; the session's open compactions are settled as failed",
			"session", t.s.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		for _, h := range t.opened {
			if serr := h.Fail(context.WithoutCancel(t.ctx), emitter.ErrAgentCrashed); serr != nil && !errors.Is(serr, emitter.ErrSettled) {
				t.c.a.log.Warn("settlement after the panic not delivered", "session", t.s.id, "compaction", h.ID(), "error", serr)
			}
		}
		stop, err = "", errRuntimePanicked
	}()
	return t.run(prompt)
}

// run dispatches on the prompt text. Every /compact scenario but
// failearly is a script on a compaction the user asked for: run starts it
// (manual trigger) and hands it over, and the turn ends with stopReason
// unless the script returns an error.
func (t *turn) run(prompt string) (string, error) {
	fields := strings.Fields(prompt)
	if len(fields) == 0 || fields[0] != "/compact" {
		return t.ordinary(prompt)
	}
	arg := ""
	if len(fields) > 1 {
		arg = fields[1]
	}
	var script func(*compaction) error
	switch arg {
	case "":
		script = (*compaction).announced
	case "nosummary":
		script = (*compaction).noSummary
	case "fail":
		script = (*compaction).fail
	case "failearly":
		return t.failEarly()
	case "slow":
		script = (*compaction).slow
	case "hang":
		script = (*compaction).hang
	case "panic":
		script = (*compaction).panicking
	case "flood":
		n := floodDefault
		if len(fields) > 2 {
			v, err := strconv.Atoi(fields[2])
			if err != nil || v < 1 || v > floodMax {
				return "", errInvalidParams(fmt.Sprintf("/compact flood N: N must be a number from 1 to %d", floodMax))
			}
			n = v
		}
		script = func(c *compaction) error { return c.flood(n) }
	case "twice":
		script = (*compaction).twice
	default:
		t.say(fmt.Sprintf("Unknown scenario %q. Try /compact [%s].", arg, compactHint))
		return stopEndTurn, nil
	}
	c, err := t.start(protocol.Manual)
	if err != nil {
		return "", err
	}
	if err := script(c); err != nil {
		return "", err
	}
	return t.stopReason(), nil
}

func (t *turn) notify(update any) { t.c.notify(t.ctx, t.rpc, t.s.id, update) }

// say sends an agent message and keeps it in history.
func (t *turn) say(s string) {
	content := []json.RawMessage{text(s)}
	id := t.s.addMessage(roleAgent, content)
	t.notify(messageChunk{SessionUpdate: "agent_message_chunk", MessageID: id, Content: content[0]})
}

// stopReason is cancelled when the user cancelled the turn, else end_turn.
func (t *turn) stopReason() string {
	if cancelled(t.ctx) {
		return stopCancelled
	}
	return stopEndTurn
}

// cancelled reports whether ctx ended because the user cancelled: agentkit
// cancels a prompt's context with emitter.ErrCancelled on session/cancel
// (and this agent does on session/close); other causes are the end of the
// turn or the connection closing.
func cancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), emitter.ErrCancelled)
}

// compaction is one compaction the scripted runtime runs.
type compaction struct {
	t       *turn
	h       *emitter.Compaction
	settled *settlement
	// streamed is how many bytes of summary it streamed, for its details.
	streamed int
}

// start opens a compaction; the kit records its start, and its final
// record when it settles, at its place in the session's history.
func (t *turn) start(trigger protocol.Trigger) (*compaction, error) {
	id := t.s.nextCompactionID()
	settled := t.c.a.settled.register(t.s.id, id)
	after := t.s.lastMessageID()
	h, err := t.ks.Start(t.ctx, emitter.WithID(id), emitter.WithTrigger(trigger), emitter.UserDisplayable(), emitter.After(after))
	if h == nil {
		t.c.a.settled.forget(t.s.id, id)
		return nil, fmt.Errorf("start compaction %s: %w", id, err)
	}
	t.opened = append(t.opened, h)
	if err != nil {
		t.c.a.log.Warn("compaction start not delivered", "session", t.s.id, "compaction", id, "error", err)
	}
	return &compaction{t: t, h: h, settled: settled}, nil
}

// chunk streams one block of summary text.
func (c *compaction) chunk(s string) {
	c.streamed += len(s)
	if err := c.h.Chunk(c.t.ctx, protocol.Text(s)); err != nil {
		c.t.c.a.log.Debug("summary chunk not sent", "session", c.t.s.id, "compaction", c.h.ID(), "error", err)
	}
}

// logSettle logs a terminal report the emitter refused (it was settled
// already, by the kit or the watchdog).
func (c *compaction) logSettle(err error) {
	if err != nil {
		c.t.c.a.log.Info("compaction report not sent", "session", c.t.s.id, "compaction", c.h.ID(), "error", err)
	}
}

// summary writes the retained-context summary of the session so far as
// Markdown, in the chunks it is streamed in. The latest message, the
// prompt that led to the compaction, is kept verbatim, not summarized.
func (t *turn) summary() []string {
	users, messages := t.s.userTexts(), t.s.messageCount()
	first, latest := "(nothing yet)", "(nothing yet)"
	if n := len(users) - 1; n > 0 {
		first, latest = users[0], users[n-1]
	}
	replaced := fmt.Sprintf("- %d earlier messages are replaced by this summary; the latest request is kept verbatim.\n", max(messages-1, 0))
	if messages-1 == 1 {
		replaced = "- 1 earlier message is replaced by this summary; the latest request is kept verbatim.\n"
	}
	return []string{
		"## Retained context\n\n",
		fmt.Sprintf("- The conversation began with %s.\n", quote(first)),
		fmt.Sprintf("- The latest request before compacting was %s.\n", quote(latest)),
		replaced,
	}
}

func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strconv.Quote(s)
}

// ordinary echoes the prompt, after an automatic compaction every
// AutoCompactEvery prompts.
func (t *turn) ordinary(prompt string) (string, error) {
	if every := t.c.a.cfg.AutoCompactEvery; every > 0 {
		t.s.mu.Lock()
		t.s.ordinary++
		due := t.s.ordinary%every == 0
		t.s.mu.Unlock()
		if due {
			c, err := t.start(protocol.Auto)
			if err != nil {
				return "", err
			}
			c.summarize()
		}
	}
	if prompt != "" {
		t.say(prompt)
	}
	return t.stopReason(), nil
}

// summarize is the compaction of /compact and the automatic one: chunks,
// then the whole summary as the authoritative replacement.
func (c *compaction) summarize() {
	t := c.t
	parts := t.summary()
	for _, p := range parts {
		c.chunk(p)
	}
	full := strings.Join(parts, "")
	c.logSettle(c.h.Complete(t.ctx, emitter.Summary(protocol.Text(full)), emitter.WithDetails(t.s.details(len(full), true))))
}

// announced is /compact: the compaction summarizes, then the agent says
// the context was compacted.
func (c *compaction) announced() error {
	c.summarize()
	c.t.say(compactedMessage)
	return nil
}

// noSummary completes without a summary: nothing user-displayable.
func (c *compaction) noSummary() error {
	t := c.t
	c.logSettle(c.h.Complete(t.ctx, emitter.WithDetails(t.s.details(0, true))))
	return nil
}

// fail streams a chunk, then fails; the partial summary was never
// retained, so it is cleared.
func (c *compaction) fail() error {
	t := c.t
	c.chunk(t.summary()[0])
	c.logSettle(c.h.Fail(t.ctx, ErrSummaryRequest, emitter.Summary(), emitter.WithDetails(t.s.details(0, false))))
	return nil
}

// failEarly reports a failure for a compaction that never reported a
// start: it is started and failed at once, so the client sees in_progress
// then failed, and the emitter hands its record over like any other's.
func (t *turn) failEarly() (string, error) {
	id := t.s.nextCompactionID()
	after := t.s.lastMessageID()
	h, err := t.ks.Start(t.ctx, emitter.WithID(id), emitter.After(after))
	if h == nil {
		return "", fmt.Errorf("report compaction %s failed: %w", id, err)
	}
	if err := h.Fail(t.ctx, ErrSummarizerUnavailable, emitter.WithDetails(t.s.details(0, false))); err != nil {
		t.c.a.log.Warn("compaction failure not delivered", "session", t.s.id, "compaction", id, "error", err)
	}
	return t.stopReason(), nil
}

// slow streams for five seconds; a cancel interrupts it, and the runtime
// reports the interruption itself.
func (c *compaction) slow() error {
	t := c.t
	tick := time.NewTicker(slowInterval)
	defer tick.Stop()
	var full strings.Builder
	for i := range slowChunks {
		select {
		case <-t.ctx.Done():
			return c.interrupted()
		case <-tick.C:
		}
		p := fmt.Sprintf("- Step %d of %d summarized.\n", i+1, slowChunks)
		if i == 0 {
			p = "## Retained context (slow)\n\n" + p
		}
		full.WriteString(p)
		c.chunk(p)
	}
	c.logSettle(c.h.Complete(t.ctx, emitter.Summary(protocol.Text(full.String())), emitter.WithDetails(t.s.details(full.Len(), true))))
	return nil
}

// interrupted reports a compaction the turn's end interrupted: for a user
// cancel, cancelled (and the turn's stopReason is cancelled); otherwise
// (the connection closing) nothing, since the kit has settled it already,
// and it returns the end's cause for the turn to fail with.
func (c *compaction) interrupted() error {
	t := c.t
	if !cancelled(t.ctx) {
		return context.Cause(t.ctx)
	}
	c.logSettle(c.h.Cancel(t.ctx, emitter.Summary(), emitter.WithDetails(t.s.details(0, false))))
	return nil
}

// hang never reports after the start. The handler waits until someone
// else settles the compaction: the kit at the cancel grace deadline, the
// watchdog, or the connection closing.
func (c *compaction) hang() error {
	t := c.t
	var endOfTurn <-chan struct{} // the turn's end settles it: answer at once
	if *t.c.a.cfg.CancelGrace < 0 {
		endOfTurn = t.ctx.Done()
	}
	select {
	case <-c.settled.done:
	case <-endOfTurn:
	}
	if t.ctx.Err() != nil && !cancelled(t.ctx) {
		return context.Cause(t.ctx)
	}
	return nil
}

// panicking streams a chunk and panics, as a runtime with a bug would.
func (c *compaction) panicking() error {
	c.chunk(c.t.summary()[0])
	panic("scenario: the summarizer hit a bug mid-compaction")
}

// flood streams n chunks as fast as the transport takes them and completes
// without a summary, keeping what was streamed (which the emitter keeps
// for the final record: OnFinalRecord).
func (c *compaction) flood(n int) error {
	t := c.t
	for i := range n {
		if t.ctx.Err() != nil {
			return c.interrupted()
		}
		c.chunk(fmt.Sprintf("chunk %d of %d\n", i+1, n))
	}
	c.logSettle(c.h.Complete(t.ctx, emitter.WithDetails(t.s.details(c.streamed, true))))
	return nil
}

// twice runs a second compaction beside c (another ID), both open at
// once, and settles the second first.
func (c *compaction) twice() error {
	t := c.t
	second, err := t.start(protocol.Manual)
	if err != nil {
		return err
	}
	a := "## Retained context (older half)\n\nThe first half of the conversation.\n"
	b := "## Retained context (newer half)\n\nThe second half of the conversation.\n"
	c.chunk(a)
	second.chunk(b)
	second.logSettle(second.h.Complete(t.ctx, emitter.Summary(protocol.Text(b)), emitter.WithDetails(t.s.details(len(b), true))))
	c.logSettle(c.h.Complete(t.ctx, emitter.Summary(protocol.Text(a)), emitter.WithDetails(t.s.details(len(a), true))))
	return nil
}
