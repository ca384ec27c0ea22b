package agentkit_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kit's output is buffered (notifications may be written after their
// call returns, several in one write). These tests check, on the wire, that
// the client still sees every message in the order it was produced, that a
// response comes after everything sent before it, and that nothing waits
// for more output to come: on both a foreign stream
// (jsonrpc2.NewPlainObjectStream) and NewStream.

var streams = []struct {
	name string
	new  func(net.Conn) jsonrpc2.ObjectStream
}{
	{"plain", func(c net.Conn) jsonrpc2.ObjectStream { return jsonrpc2.NewPlainObjectStream(c) }},
	{"NewStream", func(c net.Conn) jsonrpc2.ObjectStream { return agentkit.NewStream(c) }},
}

// newStreamRig is newRig on the object stream stream, with 60 s for the
// test.
func newStreamRig(t *testing.T, a *agent, stream func(net.Conn) jsonrpc2.ObjectStream) *rig {
	t.Helper()
	a.stream = stream
	r := newRig(t, a)
	r.Within(60 * time.Second)
	return r
}

func TestFloodReachesTheClientInOrderBeforeTheResponse(t *testing.T) {
	for _, s := range streams {
		t.Run(s.name, func(t *testing.T) {
			kittest.FloodReachesTheClientInOrderBeforeTheResponse(t, stack{stream: s.new})
		})
	}
}

// A lone notification is written without any later message pushing it
// out: the handler waits until the client has it before it answers.
func TestLoneNotificationIsWrittenWithoutWaitingForMore(t *testing.T) {
	for _, s := range streams {
		t.Run(s.name, func(t *testing.T) {
			a := &agent{}
			var r *rig
			a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
				if err := agentMessage(ctx, conn, sid, "alone"); err != nil {
					return nil, err
				}
				if _, err := r.Client.Wire.Wait(r.Ctx, func(e kittest.Event) bool { return e.Kind == "agent_message_chunk" }); err != nil {
					return nil, err
				}
				c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"))
				if err != nil {
					return nil, err
				}
				if _, err := r.Client.Wire.Wait(r.Ctx, func(e kittest.Event) bool { return e.Kind == protocol.KindUpdate }); err != nil {
					return nil, err
				}
				if err := c.Complete(ctx); err != nil {
					return nil, err
				}
				return endTurn()
			}
			r = newStreamRig(t, a, s.new)
			r.Initialize(1, true)
			res, err := r.Client.Prompt(r.Ctx, session, nil)
			require.NoError(t, err, "prompt")
			require.Equal(t, "end_turn", kittest.StopReason(res), "prompt: %s", res)
			want := []string{"agent_message_chunk", "compaction_update:in_progress", "compaction_update:completed", "response:session/prompt"}
			require.Equal(t, want, kittest.Summary(r.Finish(1)), "wire order")
		})
	}
}

// The agent closing its connection still delivers what it queued before.
func TestCloseDeliversQueuedNotifications(t *testing.T) {
	for _, s := range streams {
		t.Run(s.name, func(t *testing.T) {
			a := &agent{}
			r := newStreamRig(t, a, s.new)
			r.Initialize(1, true)
			ctx := context.Background()
			for i := range 200 {
				require.NoError(t, agentMessage(ctx, r.agent, session, fmt.Sprint(i)))
			}
			evs := r.Finish(1)
			n := 0
			for _, e := range evs {
				if e.Kind == "agent_message_chunk" {
					n++
				}
			}
			assert.Equal(t, 200, n, "notifications that reached the client")
		})
	}
}

// Without a kit, NewStream is a plain newline-delimited stream.
func TestNewStreamWithoutAKitIsAPlainStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agentSide, clientSide := net.Pipe()
	a := &agent{}
	conn := jsonrpc2.NewConn(context.Background(), agentkit.NewStream(agentSide),
		jsonrpc2.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)), jsonrpc2.SetLogger(nopLogger{}))
	client := kittest.NewClient(context.Background(), clientSide)
	_, err := client.Initialize(ctx, 1, true)
	require.NoError(t, err)
	require.NoError(t, agentMessage(ctx, conn, session, "hi"))
	_, err = client.Wire.Wait(ctx, func(e kittest.Event) bool { return e.Kind == "agent_message_chunk" })
	require.NoError(t, err)
	_ = conn.Close()
	<-conn.DisconnectNotify()
	<-client.Conn.DisconnectNotify()
}
