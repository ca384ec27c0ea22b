package agentkit

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
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
// it once, as it would without the kit.
type tapStream struct {
	inner jsonrpc2.ObjectStream
	t     *tap.Tap
	pass  bool // notifications may be queued as objects (a foreign stream)

	// next describes the message jsonrpc2 is about to write: its OnSend
	// hook sets it right before WriteObject, and WriteObject consumes it,
	// both under jsonrpc2's send lock (in jsonrpc2, every WriteObject
	// follows an OnSend call for the same message).
	next *jsonrpc2.Request
}

// onSend is the connection's jsonrpc2.OnSend hook.
func (s *tapStream) onSend(req *jsonrpc2.Request, _ *jsonrpc2.Response) { s.next = req }

var stateUpdateMark = []byte(`"state_update"`)

// passable reports whether req is a notification the tap need not look
// at: it ends no turn (a v2 idle state_update does) and all of it is
// already encoded (ExtraFields are marshalled when written, and could
// change after the call returns).
func passable(req *jsonrpc2.Request) bool {
	if req == nil || !req.Notif || len(req.ExtraFields) > 0 {
		return false
	}
	return req.Method != tap.MethodUpdate || req.Params == nil || !bytes.Contains(*req.Params, stateUpdateMark)
}

// ReadObject shows the message to the tap before jsonrpc2 dispatches it.
func (s *tapStream) ReadObject(v any) error {
	var raw json.RawMessage
	if err := s.inner.ReadObject(&raw); err != nil {
		return err
	}
	s.t.Receive(raw)
	return json.Unmarshal(raw, v)
}

// WriteObject lets the tap settle a turn the message ends, then writes it.
func (s *tapStream) WriteObject(v any) error {
	req := s.next
	s.next = nil
	if s.pass && passable(req) {
		return s.t.Pass(v)
	}
	raw, err := marshal(v)
	if err != nil {
		return err
	}
	return s.t.Send(raw)
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
// and closes the stream once the queued output is written.
func (s *tapStream) Close() error {
	s.t.Close(emitter.ErrConnectionClosed)
	_ = s.t.Flush()
	return s.inner.Close()
}

type tapKey struct{}

// handler is the outermost Handler of a kit connection.
type handler struct {
	b     *binding
	inner jsonrpc2.Handler
}

func (h *handler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	h.b.register(conn)
	t := h.b.t
	ctx = context.WithValue(ctx, tapKey{}, t)
	if req.Method == tap.MethodPrompt && !req.Notif {
		if id, err := json.Marshal(req.ID); err == nil {
			ctx = t.BindPrompt(ctx, tap.IDKey(id))
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

func crash(ctx context.Context) {
	if t, ok := ctx.Value(tapKey{}).(*tap.Tap); ok {
		t.Crash()
	}
}

// AsyncHandler is jsonrpc2.AsyncHandler for handlers behind a kit: each
// request is handled on its own goroutine, and a panic there settles the
// connection's open compactions as failed (emitter.ErrAgentCrashed) before
// it goes on and ends the process.
func AsyncHandler(h jsonrpc2.Handler) jsonrpc2.Handler { return asyncHandler{h} }

type asyncHandler struct{ h jsonrpc2.Handler }

func (a asyncHandler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	go func() {
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

// Recover settles the connection's open compactions as failed
// (emitter.ErrAgentCrashed) when the goroutine is panicking, then panics
// again with the same value. Use it as `defer agentkit.Recover(ctx)` first
// thing in goroutines of your own that run with a kit handler's context;
// it does nothing for other contexts and when there is no panic.
func Recover(ctx context.Context) {
	if v := recover(); v != nil {
		crash(ctx)
		panic(v)
	}
}
