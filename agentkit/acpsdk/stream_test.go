package acpsdk_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	acp "github.com/coder/acp-go-sdk"
)

// The kit writes the SDK's output and its own through one buffered queue:
// notifications may leave several to a write, after their call returned.
// On the wire the client must still see every message in the order it was
// produced, and the response after everything sent before it.
func TestFloodReachesTheClientInOrderBeforeTheResponse(t *testing.T) {
	const chunks = 600
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_flood"), emitter.UserDisplayable())
		if err != nil {
			return acp.PromptResponse{}, err
		}
		for i := range chunks {
			if err := c.Chunk(ctx, protocol.Text(fmt.Sprintf("%d,", i))); err != nil {
				return acp.PromptResponse{}, err
			}
			if i%100 == 99 {
				a.message(ctx, p.SessionId, fmt.Sprint(i))
			}
		}
		if err := c.Complete(ctx); err != nil {
			return acp.PromptResponse{}, err
		}
		return endTurn()
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	res, err := r.client.Prompt(r.ctx, session, nil)
	if err != nil || kittest.StopReason(res) != "end_turn" {
		t.Fatalf("prompt: %s, %v", res, err)
	}
	// Read before closing: the response arrived, so everything sent
	// before it must already be on the client's side.
	var got []string
	next := 0
	for _, e := range r.client.Wire.Events() {
		if e.Sent {
			continue
		}
		switch {
		case e.Kind == protocol.KindSummaryChunk:
			if want := fmt.Sprintf(`{"type":"text","text":%q}`, fmt.Sprintf("%d,", next)); !kittest.SameJSON(kittest.Field(e, "content"), want) {
				t.Fatalf("chunk %d out of order: %s", next, e.Update)
			}
			next++
		case e.Kind == "agent_message_chunk":
			got = append(got, fmt.Sprintf("message after %d chunks", next))
		case e.Kind == protocol.KindUpdate:
			got = append(got, "compaction_update:"+e.Status)
		case e.Response:
			got = append(got, "response:"+e.Method)
		}
	}
	if next != chunks {
		t.Fatalf("%d of %d chunks before the response", next, chunks)
	}
	want := []string{"response:initialize", "compaction_update:in_progress"}
	for i := 100; i <= chunks; i += 100 {
		want = append(want, fmt.Sprintf("message after %d chunks", i))
	}
	want = append(want, "compaction_update:completed", "response:session/prompt")
	if !equal(got, want) {
		t.Fatalf("wire order\n got %v\nwant %v", got, want)
	}
	r.finish(1)
}
