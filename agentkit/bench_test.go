package agentkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/require"
)

// The benchmarks here compare a bare sourcegraph/jsonrpc2 connection with
// the same connection behind the kit. The agent's output goes to an
// os.Pipe whose read end a goroutine drains into io.Discard: a client
// that validates nothing, so the agent's side is what is measured. None of
// them asserts anything about time.

// benchText is the text of one streamed delta: a typical model token run.
const benchText = "The user is updating the ACP schema; keep the retained context short. "

// messageChunk is an ordinary agent_message_chunk, typed as an agent on
// jsonrpc2 would type it.
type messageChunk struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind      string `json:"sessionUpdate"`
		MessageID string `json:"messageId"`
		Content   struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"update"`
}

func newMessageChunk() *messageChunk {
	m := &messageChunk{SessionID: session}
	m.Update.Kind = "agent_message_chunk"
	m.Update.MessageID = "msg_agent"
	m.Update.Content.Type = "text"
	m.Update.Content.Text = benchText
	return m
}

// benchPipe is an agent's stdio: in is what the client writes (the
// benchmark, through clientW), out is drained by a goroutine that counts
// the lines it reads, so a benchmark can wait until the client has every
// message it sent (the kit may still be writing when a call returns).
type benchPipe struct {
	in      *os.File
	out     *os.File
	clientW *os.File
	drained chan struct{}
	lines   lineCounter
}

// lineCounter counts newlines read by the client.
type lineCounter struct {
	mu   sync.Mutex
	cond sync.Cond
	n    int
}

func (c *lineCounter) add(k int) {
	c.mu.Lock()
	c.n += k
	c.cond.Broadcast()
	c.mu.Unlock()
}

// waitFor blocks until n lines have been read in all.
func (c *lineCounter) waitFor(n int) {
	c.mu.Lock()
	for c.n < n {
		c.cond.Wait()
	}
	c.mu.Unlock()
}

func (c *lineCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func newBenchPipe(tb testing.TB) *benchPipe {
	tb.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(tb, err)
	outR, outW, err := os.Pipe()
	require.NoError(tb, err)
	p := &benchPipe{in: inR, out: outW, clientW: inW, drained: make(chan struct{})}
	p.lines.cond.L = &p.lines.mu
	go func() {
		defer close(p.drained)
		buf := make([]byte, 64<<10)
		for {
			n, err := outR.Read(buf)
			if k := bytes.Count(buf[:n], []byte{'\n'}); k > 0 {
				p.lines.add(k)
			}
			if err != nil {
				break
			}
		}
		_ = outR.Close()
	}()
	return p
}

func (p *benchPipe) Read(b []byte) (int, error)  { return p.in.Read(b) }
func (p *benchPipe) Write(b []byte) (int, error) { return p.out.Write(b) }
func (p *benchPipe) Close() error {
	_ = p.in.Close()
	return p.out.Close()
}

// send writes one line as the client.
func (p *benchPipe) send(tb testing.TB, line string) {
	tb.Helper()
	_, err := p.clientW.WriteString(line + "\n")
	require.NoError(tb, err)
}

// shutdown hangs up as the client and waits for the connection to end.
func (p *benchPipe) shutdown(conn *jsonrpc2.Conn) {
	_ = p.clientW.Close()
	<-conn.DisconnectNotify()
	_ = p.Close()
	<-p.drained
}

// benchAgent answers initialize (v1) and session/prompt; its prompt
// handler blocks until release is closed, so a turn stays open.
func benchAgent(release <-chan struct{}, prompts chan<- context.Context) jsonrpc2.Handler {
	return jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
			prompts <- ctx
			select {
			case <-release:
			case <-ctx.Done():
			}
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	})
}

const (
	initLine   = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`
	promptLine = `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`
)

// benchConn is one agent connection in the middle of a turn: initialized
// (a capable v1 client), with a prompt pending.
type benchConn struct {
	conn    *jsonrpc2.Conn
	kit     *agentkit.Kit
	pipe    *benchPipe
	release chan struct{}
	prompt  chan context.Context // the running prompt handler's context
}

// newBenchConn connects an agent: bare (withKit false) or behind a kit,
// over jsonrpc2.NewPlainObjectStream, or over agentkit.NewStream when
// kitStream is set.
func newBenchConn(b *testing.B, withKit, kitStream bool) *benchConn {
	b.Helper()
	bc := &benchConn{pipe: newBenchPipe(b), release: make(chan struct{}), prompt: make(chan context.Context, 1)}
	h := agentkit.AsyncHandler(benchAgent(bc.release, bc.prompt))
	stream := jsonrpc2.NewPlainObjectStream(bc.pipe)
	if kitStream {
		stream = agentkit.NewStream(bc.pipe)
	}
	if withKit {
		bc.kit = agentkit.New(quiet)
		bc.conn = bc.kit.NewConn(context.Background(), stream, h, jsonrpc2.SetLogger(nopLogger{}))
	} else {
		bc.conn = jsonrpc2.NewConn(context.Background(), stream, h, jsonrpc2.SetLogger(nopLogger{}))
	}
	bc.pipe.send(b, initLine)
	bc.pipe.lines.waitFor(1) // the initialize answer: setup, not a measurement
	bc.pipe.send(b, promptLine)
	b.Cleanup(bc.close)
	return bc
}

// run times n calls of send and the client reading every line they wrote.
func (bc *benchConn) run(b *testing.B, send func() error) {
	base := bc.pipe.lines.count()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// require only on failure: its t.Helper call would be timed too.
		if err := send(); err != nil {
			require.NoError(b, err)
		}
	}
	bc.pipe.lines.waitFor(base + b.N)
}

func (bc *benchConn) close() {
	close(bc.release)
	bc.pipe.shutdown(bc.conn)
}

// BenchmarkNotify: ordinary agent_message_chunk updates, the agent's own
// traffic, which the kit only passes through. raw is a bare jsonrpc2
// connection on NewPlainObjectStream, middleware the same behind
// Kit.NewConn, middleware-stream the kit on agentkit.NewStream.
func BenchmarkNotify(b *testing.B) {
	for _, v := range []struct {
		name           string
		kit, kitStream bool
	}{{"raw", false, false}, {"middleware", true, false}, {"middleware-stream", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			bc := newBenchConn(b, v.kit, v.kitStream)
			ctx := context.Background()
			params := newMessageChunk()
			bc.run(b, func() error { return bc.conn.Notify(ctx, "session/update", params) })
		})
	}
}

// BenchmarkChunk: compaction summary chunks. raw sends pre-built
// notifications through a bare connection (NewPlainObjectStream); emitter
// streams the same chunk through the kit's emitter (an open compaction, a
// capable client) on the same stream, emitter-stream on agentkit.NewStream.
func BenchmarkChunk(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		bc := newBenchConn(b, false, false)
		ctx := context.Background()
		params, err := json.Marshal(map[string]any{
			"sessionId": session,
			"update": map[string]any{
				"sessionUpdate": protocol.KindSummaryChunk,
				"compactionId":  "cmp_bench",
				"content":       map[string]any{"type": "text", "text": benchText},
			},
		})
		require.NoError(b, err)
		raw := json.RawMessage(params)
		bc.run(b, func() error { return bc.conn.Notify(ctx, "session/update", raw) })
	})
	for _, v := range []struct {
		name      string
		kitStream bool
	}{{"emitter", false}, {"emitter-stream", true}} {
		b.Run(v.name, func(b *testing.B) {
			bc := newBenchConn(b, true, v.kitStream)
			ctx := context.Background()
			c, err := agentkit.SessionFrom(<-bc.prompt, session).Start(ctx, emitter.WithID("cmp_bench"), emitter.UserDisplayable())
			require.NoError(b, err)
			bc.pipe.lines.waitFor(2) // the in_progress update
			block := protocol.Text(benchText)
			bc.run(b, func() error { return c.Chunk(ctx, block) })
			b.StopTimer()
			_ = c.Complete(ctx)
		})
	}
}
