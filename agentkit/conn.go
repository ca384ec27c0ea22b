package agentkit

import (
	"context"
	"encoding/json"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/sourcegraph/jsonrpc2"
)

// tapStream is the kit's end of the ObjectStream. ReadObject and
// WriteObject go through JSON once more than jsonrpc2 alone would; that is
// the price of seeing the exact bytes on the wire, whatever path wrote them.
type tapStream struct {
	inner jsonrpc2.ObjectStream
	t     *tap.Tap
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
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.t.Send(raw)
}

// Close settles what is still open while the stream can still carry it.
func (s *tapStream) Close() error {
	s.t.Close(emitter.ErrConnectionClosed)
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
