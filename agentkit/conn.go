package agentkit

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/sourcegraph/jsonrpc2"
)

// tapStream is the kit's end of the ObjectStream. Every message is seen on
// its way through. ReadObject decodes once more than jsonrpc2 alone would.
// WriteObject hands the message to the tap, which queues it (see tap's
// out.go): on a stream of NewStream as bytes, which the tap writes to the
// connection itself, several messages in one write when they queue up; on
// a foreign stream as bytes written back through its WriteObject as a
// json.RawMessage, except for a notification that changes no turn, which
// is queued as jsonrpc2's own message object, so that the stream marshals
// it once, as it would without the kit (not with a store: the kit reads
// every session update it records).
type tapStream struct {
	inner jsonrpc2.ObjectStream
	t     *tap.Tap
	b     *binding
	pass  bool // notifications may be queued as objects (a foreign stream)

	// next describes the message jsonrpc2 is about to write: its OnSend
	// hook sets it right before WriteObject, and WriteObject consumes it,
	// both under jsonrpc2's send lock (in jsonrpc2, every WriteObject
	// follows an OnSend call for the same message).
	next *jsonrpc2.Request
}

// onSend is the connection's jsonrpc2.OnSend hook.
func (s *tapStream) onSend(req *jsonrpc2.Request, _ *jsonrpc2.Response) { s.next = req }

// passable reports whether req is a notification the tap need not look
// at: it ends no turn (turn.MayCarryState: a v2 idle state_update does)
// and all of it is already encoded (ExtraFields are marshalled when
// written, and could change after the call returns).
func passable(req *jsonrpc2.Request) bool {
	if req == nil || !req.Notif || len(req.ExtraFields) > 0 {
		return false
	}
	var params []byte
	if req.Params != nil {
		params = *req.Params
	}
	return !turn.MayCarryState(req.Method, params)
}

// ReadObject shows the message to the tap before jsonrpc2 dispatches it.
//
// An error ends the connection: jsonrpc2 closes it next, and it cancels
// its handlers' contexts before it closes the stream. So the tap is closed
// here first, while the output can still carry the terminal updates: a
// runtime woken by its context then finds its compactions settled, and
// the connection's DisconnectNotify fires only once they are written (or
// abandoned: see Kit.CloseConn).
func (s *tapStream) ReadObject(v any) error {
	var raw json.RawMessage
	err := s.inner.ReadObject(&raw)
	if err == nil {
		s.t.Receive(raw)
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		s.t.Close(emitter.ErrConnectionClosed)
	}
	return err
}

// WriteObject lets the tap settle a turn the message ends, then writes it.
func (s *tapStream) WriteObject(v any) error {
	req := s.next
	s.next = nil
	if s.pass && !s.t.Reads() && passable(req) {
		return s.t.Pass(v)
	}
	raw, err := marshal(v)
	if err != nil {
		return err
	}
	call := req != nil && !req.Notif
	if call {
		// A request of the agent's: its handler now waits for the
		// client, which AsyncHandler does not count (see limiter).
		s.b.lim.sent(req)
	}
	err = s.t.Send(raw)
	if err != nil && call {
		s.b.lim.answered(req)
	}
	return err
}

// marshal is json.Marshal without its final pass over the bytes when v
// marshals itself. jsonrpc2 writes its messages as a type whose MarshalJSON
// returns json.Marshal's output, which that pass would copy unchanged. An
// output with a newline is not one: it is compacted, as json.Marshal would.
func marshal(v any) ([]byte, error) {
	if m, ok := v.(json.Marshaler); ok {
		if raw, err := m.MarshalJSON(); err == nil && len(raw) > 0 && bytes.IndexByte(raw, '\n') < 0 {
			return raw, nil
		}
	}
	return json.Marshal(v)
}

// Close settles what is still open while the stream can still carry it,
// and closes the stream once the queued output is written (within
// CloseTimeout). Nothing more can be written after it: a write still
// waiting in the queue returns at once.
func (s *tapStream) Close() error {
	s.t.Close(emitter.ErrConnectionClosed)
	err := s.inner.Close()
	s.t.Detach(ErrClosed)
	s.b.streamClosed()
	return err
}

// handler is the outermost Handler of a kit connection.
type handler struct {
	b     *binding
	inner jsonrpc2.Handler
}

func (h *handler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	h.b.register(conn)
	t := h.b.t
	ctx = tap.Bind(ctx, &h.b.bound)
	if req.Method == turn.MethodPrompt && !req.Notif {
		if id, err := json.Marshal(req.ID); err == nil {
			ctx = t.BindPrompt(ctx, skim.IDKey(id))
		}
	}
	// Not recover: a deferred check lets the panic continue with its own
	// stack, as the host configured, after the compactions are settled.
	returned := false
	defer func() {
		if !returned {
			t.Crash()
		}
	}()
	h.inner.Handle(ctx, conn, req)
	returned = true
}

// bindingOf returns the binding of the agentkit connection whose handler
// ctx belongs to, or nil (also for a context of agentkit/acpsdk's).
func bindingOf(ctx context.Context) *binding {
	if tb := tap.Bound(ctx); tb != nil {
		b, _ := tb.Host.(*binding)
		return b
	}
	return nil
}

// DefaultMaxConcurrent is the limit of AsyncHandler unless MaxConcurrent
// says otherwise: how many of one connection's messages it handles at
// once.
const DefaultMaxConcurrent = 256

// AsyncOption configures AsyncHandler.
type AsyncOption func(*asyncHandler)

// MaxConcurrent sets how many of a connection's messages AsyncHandler
// handles at once (default DefaultMaxConcurrent); n <= 0 means no limit.
// A handler waiting for the client's answer to a request of its own does
// not hold a slot; that exemption ends when the answer arrives or the
// handler returns, whichever comes first (see AsyncHandler).
func MaxConcurrent(n int) AsyncOption { return func(a *asyncHandler) { a.max = n } }

// AsyncHandler is jsonrpc2.AsyncHandler for handlers behind a kit: each
// message is handled on its own goroutine, and a panic there settles the
// connection's open compactions as failed (emitter.ErrAgentCrashed) before
// it goes on and ends the process.
//
// It handles at most DefaultMaxConcurrent messages of a connection at once
// (MaxConcurrent changes it). At the limit, the next message waits in
// jsonrpc2's read loop, which then reads nothing more: the client's pipe
// fills and its writes block, instead of the agent starting a goroutine for
// every request a client pipelines. The kit has already seen the waiting
// message (a session/cancel cancels its prompt in wire order all the same),
// but the host's handler sees it only once a slot frees.
//
// A handler waiting for the client's answer to a request of its own
// (conn.Call: session/request_permission, fs/read_text_file, ...) does not
// hold a slot, from the request's write until the answer arrives or the
// handler returns, whichever comes first. So the read loop always goes on
// to read that answer (a full set of handlers asking the client cannot
// deadlock the connection), and the limit never erodes: a request the
// client never answers (it cancelled the prompt instead, say) frees no
// slot once its handler has returned, and an answer that comes after that
// changes nothing. A handler waiting for several answers at once is
// exempt once.
//
// jsonrpc2 shows the kit nothing of the context a request is made with,
// so the kit tells which handler waits by the request's params.sessionId,
// which ACP requires of every method of the client's: the request counts
// for the handler running for that session (its latest session/prompt, if
// several run). A request without a session, or about a session no
// handler runs for (as one made outside any handler), frees no slot.
//
// The trade-off: a handler that waits for anything else the client is yet
// to send (a later notification, another request, the answer to a request
// that does not name its session) holds its slot, so such a host must
// allow for as many at once, or use MaxConcurrent(0). Behind a Kit's
// connection only: without the kit (a context NewConn did not make) there
// is no limit.
func AsyncHandler(h jsonrpc2.Handler, opts ...AsyncOption) jsonrpc2.Handler {
	a := asyncHandler{h: h, max: DefaultMaxConcurrent}
	for _, o := range opts {
		if o != nil {
			o(&a)
		}
	}
	return a
}

type asyncHandler struct {
	h   jsonrpc2.Handler
	max int
}

func (a asyncHandler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	var lim *limiter
	var s *slot
	if b := bindingOf(ctx); b != nil && a.max > 0 {
		if s = b.lim.acquire(a.max, req); s != nil {
			lim = b.lim
		}
	}
	go func() {
		if lim != nil {
			defer lim.release(s)
		}
		returned := false
		defer func() {
			if !returned {
				crash(ctx)
			}
		}()
		a.h.Handle(ctx, conn, req)
		returned = true
	}()
}
