package kittest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

// FloodReachesTheClientInOrderBeforeTheResponse: the kits' output is
// buffered (notifications may leave several to a write, after their call
// returned). A runtime streams 600 chunks as fast as it can, with an
// update of the agent's own after every hundredth; the client must still
// see every message in the order it was produced, and the response after
// everything sent before it.
func FloodReachesTheClientInOrderBeforeTheResponse(t *testing.T, st Stack) {
	const chunks = 600
	a := &Agent{Prompt: func(ctx context.Context, conn Conn, p Prompt) (string, error) {
		c, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_flood"), emitter.UserDisplayable())
		if err != nil {
			return "", err
		}
		for i := range chunks {
			if err := c.Chunk(ctx, protocol.Text(fmt.Sprintf("%d,", i))); err != nil {
				return "", err
			}
			if i%100 == 99 {
				if err := conn.Message(ctx, p.SessionID, fmt.Sprint(i)); err != nil {
					return "", err
				}
			}
		}
		if err := c.Complete(ctx); err != nil {
			return "", err
		}
		return "end_turn", nil
	}}
	r := Serve(t, st, Config{}, a)
	r.Within(60 * time.Second)
	r.Initialize(1, true)
	res, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err, "prompt")
	require.Equal(t, "end_turn", StopReason(res), "prompt: %s", res)
	// Read before closing: the response arrived, so everything sent before
	// it must already be on the client's side.
	var got []string
	next := 0
	for _, e := range r.Client.Wire.Events() {
		if e.Sent {
			continue
		}
		switch {
		case e.Kind == protocol.KindSummaryChunk:
			require.JSONEq(t, fmt.Sprintf(`{"type":"text","text":%q}`, fmt.Sprintf("%d,", next)), string(Field(e, "content")), "chunk %d out of order", next)
			next++
		case e.Kind == "agent_message_chunk":
			got = append(got, fmt.Sprintf("message after %d chunks", next))
		case e.Kind == protocol.KindUpdate:
			got = append(got, "compaction_update:"+e.Status)
		case e.Response:
			got = append(got, "response:"+e.Method)
		}
	}
	require.Equal(t, chunks, next, "chunks before the response")
	want := []string{"response:initialize", "compaction_update:in_progress"}
	for i := 100; i <= chunks; i += 100 {
		want = append(want, fmt.Sprintf("message after %d chunks", i))
	}
	want = append(want, "compaction_update:completed", "response:session/prompt")
	require.Equal(t, want, got, "wire order")
	r.Finish(1)
}
