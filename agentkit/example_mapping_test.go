package agentkit_test

// Mapping a runtime's own compaction events to the lifecycle (docs/agentkit.md,
// "Mapping your runtime's events"). The runtime here stands in for one such
// as docker-agent's: it reports "started", summary deltas, and "completed"
// from a defer whatever happened, with the error, if any, beside it. The
// event alone does not say how the compaction ended; the error and the
// prompt's context do.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// runtimeEvent is one compaction event of the runtime's own.
type runtimeEvent struct {
	kind  string // "started", "delta" or "completed"
	delta string
	err   error // on "completed": what went wrong, if anything
}

// reportEvents maps the runtime's events to the lifecycle. after is the ID
// of the last message of the session's history: the record keeps it, so a
// replay puts the compaction back in its place.
func reportEvents(ctx context.Context, s *agentkit.Session, after string, events <-chan runtimeEvent) error {
	var c *emitter.Compaction
	for ev := range events {
		switch ev.kind {
		case "started":
			var err error
			if c, err = s.Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable(), emitter.After(after)); c == nil {
				return err
			}
		case "delta":
			_ = c.Chunk(ctx, protocol.Text(ev.delta))
		case "completed": // sent from a defer, whatever happened
			switch {
			case errors.Is(context.Cause(ctx), emitter.ErrCancelled):
				// The user's cancel: the runtime stopped because of it, and
				// its "completed" is no success. (Returning without a call
				// does as well: the kit settles it cancelled.)
				return c.Cancel(ctx)
			case ev.err != nil:
				return c.Fail(ctx, ev.err)
			default:
				return c.Complete(ctx) // keeps the summary the deltas streamed
			}
		}
	}
	return nil
}

// A runtime whose "completed" comes from a defer: a success, a failure and
// a user's cancel, each reported as what it was. The records OnFinalRecord
// hands over are final whoever settled the compaction, and carry the
// history position given at Start.
func Example_mappingRuntimeEvents() {
	kit := agentkit.New(agentkit.WithEmitterOptions(emitter.OnFinalRecord(func(_ context.Context, _ string, rec emitter.Record) {
		fmt.Printf("record: %s after %s\n", rec.Status, rec.After)
	})))
	stdio, clientEnd := net.Pipe() // stands in for the agent's stdin/stdout
	turn := 0
	handler := jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
			turn++
			events := make(chan runtimeEvent)
			go func(turn int) { // the runtime
				defer close(events)
				var err error
				defer func() { events <- runtimeEvent{kind: "completed", err: err} }()
				events <- runtimeEvent{kind: "started"}
				events <- runtimeEvent{kind: "delta", delta: "## Retained context"}
				switch turn {
				case 2:
					err = errors.New("summary request failed")
				case 3:
					<-ctx.Done() // the user cancels; the runtime stops
					err = ctx.Err()
				}
			}(turn)
			if err := reportEvents(ctx, agentkit.SessionFrom(ctx, "sess_1"), fmt.Sprintf("msg_%d", turn), events); err != nil {
				return nil, err
			}
			if turn == 3 {
				return map[string]any{"stopReason": "cancelled"}, nil
			}
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	})
	conn := kit.NewConn(context.Background(), agentkit.NewStream(stdio), agentkit.AsyncHandler(handler))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := kittest.NewClient(ctx, clientEnd)
	_, _ = c.Initialize(ctx, 1, true)
	_, _ = c.Prompt(ctx, "sess_1", nil)
	_, _ = c.Prompt(ctx, "sess_1", nil)
	third, _ := c.Conn.DispatchCall(ctx, "session/prompt", kittest.PromptParams("sess_1", nil))
	chunks := 0 // the third prompt's summary is streaming: cancel it
	_, _ = c.Wire.Wait(ctx, func(e kittest.Event) bool {
		if !e.Sent && e.Kind == protocol.KindSummaryChunk {
			chunks++
		}
		return chunks == 3
	})
	_ = c.Cancel(ctx, "sess_1")
	_ = third.Wait(ctx, nil)
	_ = c.Conn.Close()
	<-conn.DisconnectNotify()
	for _, e := range kittest.Compactions(c.Wire.Events()) {
		if e.Kind == protocol.KindUpdate {
			fmt.Println(e.Status)
		}
	}
	// Output:
	// record: completed after msg_1
	// record: failed after msg_2
	// record: cancelled after msg_3
	// in_progress
	// completed
	// in_progress
	// failed
	// in_progress
	// cancelled
}

// A compaction that outlives its turn: the runtime compacts on a goroutine
// of its own and ends the turn at once (as Kimi Code does). Started with
// emitter.Background, it is never shown half-way: the client sees it when
// it settles, here between turns, so the kit delivers it, terminal-first
// with the summary it streamed, when the session's next turn begins.
func Example_background() {
	kit := agentkit.New()
	stdio, clientEnd := net.Pipe() // stands in for the agent's stdin/stdout
	turnOver := make(chan struct{})
	compacted := make(chan struct{})
	handler := jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
			select {
			case <-compacted: // the second prompt
				return map[string]any{"stopReason": "end_turn"}, nil
			default:
			}
			s := agentkit.SessionFrom(ctx, "sess_1")
			c, err := s.Start(ctx, emitter.WithID("cmp_bg"), emitter.Background(), emitter.UserDisplayable())
			if c == nil {
				return nil, err
			}
			go func() { // the runtime's own goroutine, past the turn
				<-turnOver
				bg := context.WithoutCancel(ctx) // the turn's context has ended
				_ = c.Chunk(bg, protocol.Text("## Retained context"))
				_ = c.Complete(bg)
				close(compacted)
			}()
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	})
	conn := kit.NewConn(context.Background(), agentkit.NewStream(stdio), agentkit.AsyncHandler(handler))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := kittest.NewClient(ctx, clientEnd)
	_, _ = c.Initialize(ctx, 1, true)
	_, _ = c.Prompt(ctx, "sess_1", nil)
	close(turnOver)
	<-compacted
	_, _ = c.Prompt(ctx, "sess_1", nil)
	_ = c.Conn.Close()
	<-conn.DisconnectNotify()
	for _, line := range kittest.Transcript(c.Wire.Events()) {
		fmt.Println(line)
	}
	// Output:
	// response session/prompt end_turn
	// compaction_update cmp_bg completed
	// response session/prompt end_turn
}
