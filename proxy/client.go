package proxy

// The client's line path. It is short: a client line is read, noted with
// the engine (so that the agent's answer can never overtake the note), and
// forwarded to the agent unchanged. Nothing on it is ever rewritten.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/lines"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
)

// pumpClient forwards client lines to the agent unchanged, noting each
// with the engine first. It never writes to the client.
func (c *conn) pumpClient(ctx context.Context, r io.Reader) {
	lr := lines.NewReader(r, c.p.cfg.maxLine)
	for {
		raw, long, rerr := lr.Next()
		if c.stopped.Load() {
			return
		}
		if len(raw) > 0 {
			huge := len(raw) >= collectAfter
			ok, err := c.clientLine(lr, raw, long)
			raw = nil
			if err != nil {
				rerr = err
			}
			if !ok {
				return
			}
			if lr.Release() && huge {
				// As for the agent's lines (conn.releaseLine).
				c.cpick, c.cfpick, c.cenv, c.cfenv = newPicker(), newPicker(), envelope{}, envelope{}
				runtime.GC()
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				c.log.Warn("reading the client failed", "side", sideClient, "line", lr.Lines(), "error", rerr)
			}
			// Before the agent can learn of it: the end of its output
			// that follows is the connection closing.
			c.clientEnded.Store(true)
			c.ain.close()
			return
		}
	}
}

// clientLine notes a client line with the engine and forwards it. ok is
// false once the agent's input is closed; err is a failed read of the
// remainder of an overlong line.
func (c *conn) clientLine(lr *lines.Reader, raw []byte, long bool) (ok bool, err error) {
	l := readLine(lr.Lines(), raw, long)
	if !l.long {
		// Holding the line back costs nothing when the next one is
		// already here, and saves a write.
		hold := c.fromClient(&l) && lr.Ready()
		return c.ain.write(l.raw, !hold) == nil, nil
	}
	c.clientHead(&l)
	if c.ain.write(l.raw, false) != nil {
		return false, nil
	}
	err = lr.CopyRest(func(b []byte) error { return c.ain.write(b, false) })
	return c.ain.write(nil, true) == nil, err
}

// agentInput is the agent's input: only the client pump writes to it,
// and Run closes it (under mu, so that a close never cuts a write short
// unless the write is stuck).
type agentInput struct {
	w      lineWriter
	mu     sync.Mutex
	closed bool
	log    *slog.Logger
}

// write queues b for the agent and, with flush, writes what is queued.
func (a *agentInput) write(b []byte, flush bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return io.ErrClosedPipe
	}
	err := a.w.forward(b)
	if err == nil && flush {
		err = a.w.flush()
	}
	if err != nil {
		a.log.Debug("the agent's input is closed; client lines are no longer delivered", "error", err)
		return err
	}
	return nil
}

// close closes the agent's input once what was queued is written: end of
// input is how an agent learns that its client has gone.
func (a *agentInput) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeLocked()
}

// end closes the agent's input when Run returns. The client pump may be
// stuck writing to an agent that does not read: after timeout the writer
// is closed under it, which ends such a write where the writer allows (a
// pipe made by os.Pipe does).
func (a *agentInput) end(timeout time.Duration) {
	if !lockWithin(&a.mu, timeout) {
		if cl, ok := a.w.w.(io.Closer); ok {
			_ = cl.Close()
		}
		return
	}
	defer a.mu.Unlock()
	a.closeLocked()
}

func (a *agentInput) closeLocked() {
	if a.closed {
		return
	}
	a.closed = true
	// What the client pump queued was accepted: it reaches the agent
	// before the end of file does.
	_ = a.w.flush()
	if cl, ok := a.w.w.(io.Closer); ok {
		_ = cl.Close()
	}
}

// fromClient notes one client line with the engine before it is
// forwarded, so that the agent's answer can never overtake the note. It
// reports whether the line may wait for the next one: a notification
// other than a cancel.
func (c *conn) fromClient(l *line) (batchable bool) {
	n, msg := l.n, l.msg
	if isBlank(msg) {
		return false
	}
	if turn.IsBatch(msg) { // msg is trimmed (lines.Message): its first byte decides
		if !turn.Batch(msg, func(elem []byte) { c.clientMessage(n, elem) }) {
			c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", "invalid batch", "text", clip(msg))
		}
		return false
	}
	if c.follower != nil {
		c.follower.Observe(audit.FromClient, fmt.Sprintf("client line %d", n), msg)
	}
	m, ok := c.clientMessage(n, msg)
	return ok && m.Method != "" && m.ID == "" && m.Method != turn.MethodCancel && m.Method != turn.MethodCancelReq
}

// clientMessage notes one client message (a line, or one message of a
// batch).
func (c *conn) clientMessage(n int, msg []byte) (m turn.Msg, ok bool) {
	v, err := c.cpick.Pick(msg, clientSet)
	if err != nil {
		c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", err, "text", clip(msg))
		return m, false
	}
	env := &c.cenv
	env.read(v, cMethod, cSession, &c.csid)
	if c.tooDeep(&c.cdepth, msg) {
		// The checker follows the turn from a stand-in of what was read.
		c.check.observe(conformance.FromClient, sideClient, n, clientStandIn(v, clientParamsStandIn(v)))
	} else {
		c.check.observe(conformance.FromClient, sideClient, n, msg)
	}
	env.clientMsg(&m, nil)
	c.e.Client(&m)
	if !env.hasMethod {
		c.foldClient(n, msg)
	}
	return m, true
}

// foldClient notes a client message without an exact method as a Go
// agent reads it (see agentFoldSet): one whose member names match only
// when case is ignored ("Method", "ID") is a request to such an agent, and
// the engine follows it too. A message with an exact method reads as one
// to a Go agent as well, so only these are read twice.
func (c *conn) foldClient(n int, msg []byte) {
	v, err := c.cfpick.Pick(msg, clientFoldSet)
	if err != nil {
		return
	}
	env := &c.cfenv
	env.read(v, cMethod, cSession, &c.csid)
	if !env.hasMethod {
		return
	}
	var m turn.Msg
	env.clientMsg(&m, nil)
	c.e.Client(&m)
	if c.check != nil {
		// The checker reads names exactly: it follows the agent's turn
		// from a stand-in of the message as the agent reads it.
		params := v[cParams]
		if c.tooDeep(&c.cdepth, params) {
			params = clientParamsStandIn(v)
		}
		c.check.observe(conformance.FromClient, sideClient, n, clientStandIn(v, params))
	}
}

// clientHead notes a client line longer than the inspection limit from
// its head: its id, method and session usually precede the big part (a
// prompt's content), so a prompt is followed even when its content is not
// read.
func (c *conn) clientHead(l *line) {
	n, head := l.n, l.msg
	pre, err := skim.PickPrefixUnbounded(head, clientSet)
	if err != nil {
		c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", err, "text", clip(head))
		return
	}
	env := &c.cenv
	env.read(pre.Values, cMethod, cSession, &c.csid)
	var m turn.Msg
	env.clientMsg(&m, pre.Started)
	c.log.Debug("line longer than the inspection limit; followed from its head",
		"side", sideClient, "line", n, "limit", c.p.cfg.maxLine, "method", m.Method)
	if m.Method == turn.MethodInitialize && pre.Values[cParams] == nil {
		c.log.Warn("initialize too long to read its capabilities; the client is taken to lack the compaction capability",
			"side", sideClient, "line", n, "limit", c.p.cfg.maxLine)
	}
	if c.check != nil && m.Method != "" {
		// The checker follows the turn from a stand-in of what was read.
		c.check.observe(conformance.FromClient, sideClient, n, clientStandIn(pre.Values, clientParamsStandIn(pre.Values)))
	}
	c.e.Client(&m)
}

// clientStandIn is a client message for the checker, made of the id and
// method of v (values of clientSet or clientFoldSet, which index alike)
// and params.
func clientStandIn(v [][]byte, params []byte) []byte {
	return makeStandIn("id", v[cID], "method", v[cMethod], "params", params)
}

// clientParamsStandIn is, of a client message's params, what the engine
// follows: the members the checker needs to follow the turn.
func clientParamsStandIn(v [][]byte) []byte {
	return makeStandIn("sessionId", v[cSession], "requestId", v[cRequestID], "replayFrom", v[cReplayFrom])
}

// makeStandIn is a JSON object of the raw members given as name, value pairs,
// those without a value left out: a small message standing, for the
// checker, for an over-long one of which only the head was read.
func makeStandIn(members ...any) []byte {
	b := []byte{'{'}
	if members[0] == "id" {
		b = append(b, `"jsonrpc":"2.0"`...)
	}
	for i := 0; i+1 < len(members); i += 2 {
		v := members[i+1].([]byte)
		if v == nil {
			continue
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), members[i].(string)...), `":`...)
		b = append(b, v...)
	}
	return append(b, '}')
}
