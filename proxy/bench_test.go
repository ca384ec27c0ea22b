package proxy_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BenchmarkProxy: a stream of session updates from an agent to a client
// through os.Pipes, without (direct) and with (proxy) the proxy in the
// path. The agent writes one update a write, as an agent that does not
// buffer its output does; the client is a bare reader that counts lines.
// Each op is one update; the time includes the client reading it. The
// updates are ordinary agent_message_chunk updates (passed through) and,
// for proxy-compaction, compaction_summary_chunk updates of a compaction
// the client saw start (checked and passed through). Nothing is asserted
// about time.
func BenchmarkProxy(b *testing.B) {
	const text = "The user is updating the ACP schema; keep the retained context short. "
	message := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","messageId":"msg_1","content":{"type":"text","text":"` + text + `"}}}}` + "\n")
	chunk := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"` + text + `"}}}}` + "\n")

	b.Run("direct", func(b *testing.B) {
		r, w := benchPipe(b)
		var lines lineCount
		lines.start(r)
		b.Cleanup(func() { _ = w.Close(); lines.wait() })
		stream(b, w, message, &lines)
	})
	for _, v := range []struct {
		name string
		line []byte
	}{{"proxy", message}, {"proxy-compaction", chunk}} {
		b.Run(v.name, func(b *testing.B) {
			pb := startProxyBench(b)
			if v.name == "proxy-compaction" {
				pb.agentSays(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"in_progress"}}}`)
			}
			stream(b, pb.agentW, v.line, &pb.client)
		})
	}
}

// stream times b.N writes of line to w and the client reading them all.
func stream(b *testing.B, w io.Writer, line []byte, lines *lineCount) {
	base := lines.count()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Write(line); err != nil { // require only on failure: its t.Helper would be timed
			require.NoError(b, err, "writing the line")
		}
	}
	lines.waitFor(base + b.N)
}

func benchPipe(b *testing.B) (*os.File, *os.File) {
	r, w, err := os.Pipe()
	require.NoError(b, err, "os.Pipe")
	return r, w
}

// lineCount counts the lines a goroutine reads from a pipe.
type lineCount struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
	done chan struct{}
}

func (c *lineCount) start(r io.ReadCloser) {
	c.cond = sync.NewCond(&c.mu)
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			if k := bytes.Count(buf[:n], []byte{'\n'}); k > 0 {
				c.mu.Lock()
				c.n += k
				c.cond.Broadcast()
				c.mu.Unlock()
			}
			if err != nil {
				_ = r.Close()
				return
			}
		}
	}()
}

func (c *lineCount) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *lineCount) waitFor(n int) {
	c.mu.Lock()
	for c.n < n {
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// wait waits for the reader to see the end of its pipe.
func (c *lineCount) wait() { <-c.done }

// proxyBench is a proxy between a client (clientW writes, client counts
// what it reads) and an agent (agentW writes; what the proxy sends it is
// drained), after an initialize with the compaction capability and with a
// prompt in progress.
type proxyBench struct {
	clientW, agentW *os.File
	client          lineCount
	toAgent         lineCount
	done            chan error
}

func startProxyBench(b *testing.B) *proxyBench {
	b.Helper()
	p, err := proxy.New()
	require.NoError(b, err, "proxy.New")
	clientInR, clientInW := benchPipe(b)
	clientOutR, clientOutW := benchPipe(b)
	agentInR, agentInW := benchPipe(b)
	agentOutR, agentOutW := benchPipe(b)
	pb := &proxyBench{clientW: clientInW, agentW: agentOutW, done: make(chan error, 1)}
	pb.client.start(clientOutR)
	pb.toAgent.start(agentInR)
	go func() { pb.done <- p.Run(context.Background(), clientInR, clientOutW, agentInW, agentOutR) }()
	b.Cleanup(func() {
		pb.agentSays(b, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
		_ = clientInW.Close()
		_ = agentOutW.Close()
		assert.NoError(b, <-pb.done, "the proxy's Run")
		_ = clientOutW.Close()
		_ = clientInR.Close()
		_ = agentOutR.Close()
		pb.client.wait()
		pb.toAgent.wait()
	})
	// Setup, not measured: each step waits until its line went through.
	pb.clientSays(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`)
	pb.toAgent.waitFor(1)
	// A profiled agent (Claude ACP 0.101), so that its translators run.
	pb.agentSays(b, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[],"agentInfo":{"name":"@agentclientprotocol/claude-agent-acp","version":"0.101.0"}}}`)
	pb.client.waitFor(1)
	pb.clientSays(b, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`)
	pb.toAgent.waitFor(2)
	return pb
}

func (pb *proxyBench) clientSays(b *testing.B, line string) {
	_, err := pb.clientW.WriteString(line + "\n")
	require.NoError(b, err, "client write")
}

// agentSays writes one agent line and waits until the client has it.
func (pb *proxyBench) agentSays(b *testing.B, line string) {
	n := pb.client.count()
	_, err := pb.agentW.WriteString(line + "\n")
	require.NoError(b, err, "agent write")
	pb.client.waitFor(n + 1)
}
