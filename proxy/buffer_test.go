package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The proxy holds output back only while the next input line is already
// read; these tests check, on the wire, what that must never change.

func osPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err, "os.Pipe")
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return r, w
}

// pipes runs a proxy on OS pipes and returns the client's and the agent's
// ends, as a client and an agent process would see them.
type pipes struct {
	clientW, agentW *os.File
	clientR, agentR *bufio.Reader
	done            chan error
}

func runOnPipes(t *testing.T, opts ...proxy.Option) *pipes {
	t.Helper()
	p, err := proxy.New(opts...)
	require.NoError(t, err, "proxy.New")
	ciR, ciW := osPipe(t)
	coR, coW := osPipe(t)
	aiR, aiW := osPipe(t)
	aoR, aoW := osPipe(t)
	ps := &pipes{clientW: ciW, agentW: aoW, clientR: bufio.NewReader(coR), agentR: bufio.NewReader(aiR), done: make(chan error, 1)}
	go func() { ps.done <- p.Run(context.Background(), ciR, coW, aiW, aoR) }()
	t.Cleanup(func() {
		_ = ciW.Close()
		_ = aoW.Close()
		assert.NoError(t, <-ps.done, "Run")
	})
	return ps
}

func readLine(t *testing.T, r *bufio.Reader, who string) string {
	t.Helper()
	line, err := r.ReadString('\n')
	require.NoError(t, err, "%s read (got %q)", who, line)
	return line
}

func write(t *testing.T, w io.Writer, s string) {
	t.Helper()
	_, err := io.WriteString(w, s)
	require.NoError(t, err, "write")
}

// TestProxyBufferPingPong: a client that sends its next request only once
// it has the answer to the last, and an agent that answers only once it
// has read the request, deadlock if either direction holds a request or a
// response back. Updates sent before each answer arrive before it.
func TestProxyBufferPingPong(t *testing.T) {
	ps := runOnPipes(t)
	const rounds = 300
	agentErr := make(chan error, 1)
	go func() {
		for i := range rounds {
			line, err := ps.agentR.ReadString('\n')
			if err != nil {
				agentErr <- err
				return
			}
			if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`+"\n", i); line != want {
				agentErr <- fmt.Errorf("agent got %q, want %q", line, want)
				return
			}
			// Updates and the answer in separate writes, as an agent
			// that does not buffer its output writes them.
			for k := range i % 4 {
				if _, err := io.WriteString(ps.agentW, upd("s", fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":%s}`, text(fmt.Sprintf("r%d u%d", i, k))))+"\n"); err != nil {
					agentErr <- err
					return
				}
			}
			if _, err := io.WriteString(ps.agentW, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`+"\n", i)); err != nil {
				agentErr <- err
				return
			}
		}
		agentErr <- nil
	}()
	for i := range rounds {
		write(t, ps.clientW, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`+"\n", i))
		for k := range i % 4 {
			want := upd("s", fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":%s}`, text(fmt.Sprintf("r%d u%d", i, k)))) + "\n"
			require.Equal(t, want, readLine(t, ps.clientR, "client"), "round %d: what the client got", i)
		}
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`+"\n", i)
		require.Equal(t, want, readLine(t, ps.clientR, "client"), "round %d: what the client got", i)
	}
	require.NoError(t, <-agentErr, "the agent side")
}

// TestProxyBufferFlushesWhenDry: lines are not held for input that has
// not come: a burst and then a lone notification each reach the client
// while the agent writes nothing further (and keeps its output open), in
// both directions.
func TestProxyBufferFlushesWhenDry(t *testing.T) {
	ps := runOnPipes(t)
	note := func(i int) string {
		return upd("s", fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":%s}`, text(fmt.Sprint("n", i)))) + "\n"
	}
	var burst strings.Builder
	for i := range 100 {
		burst.WriteString(note(i))
	}
	write(t, ps.agentW, burst.String())
	for i := range 100 {
		require.Equal(t, note(i), readLine(t, ps.clientR, "client"), "what the client got")
	}
	write(t, ps.agentW, note(100))
	require.Equal(t, note(100), readLine(t, ps.clientR, "client"), "what the client got")
	// The client's notifications (not requests) to the agent likewise.
	cn := func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"_x/note","params":{"n":%d}}`+"\n", i)
	}
	write(t, ps.clientW, cn(0)+cn(1)+cn(2))
	for i := range 3 {
		require.Equal(t, cn(i), readLine(t, ps.agentR, "agent"), "what the agent got")
	}
	write(t, ps.clientW, cn(3))
	require.Equal(t, cn(3), readLine(t, ps.agentR, "agent"), "what the agent got")
}

// mixedStream is lines of every kind the proxy forwards untouched, with a
// final line without terminator.
func mixedStream(n int, rng *rand.Rand) []byte {
	var b bytes.Buffer
	for i := range n {
		switch rng.IntN(7) {
		case 0:
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", i)
		case 1:
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}`+"\n", i)
		case 2:
			fmt.Fprintf(&b, "not json %d\r\n", i)
		case 3:
			b.WriteString("\n")
		case 4:
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"_x/big","params":{"pad":"%s"}}`+"\n", strings.Repeat("x", rng.IntN(100<<10)))
		default:
			b.WriteString(upd("s", fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":%s}`, text(fmt.Sprint("m", i)))) + "\n")
		}
	}
	b.WriteString(`{"jsonrpc":"2.0","method":"_x/last"}`)
	return b.Bytes()
}

// chunkReader hands out its data in pieces of random size, so that lines
// straddle reads, and counts what it handed out.
type chunkReader struct {
	data []byte
	read int
	rng  *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.read == len(r.data) {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data)-r.read, 1+r.rng.IntN(8<<10))
	copy(p, r.data[r.read:r.read+n])
	r.read += n
	return n, nil
}

// boundWriter checks, at each write, that the proxy holds no more than
// limit bytes it has read but not yet written.
type boundWriter struct {
	t     *testing.T
	src   *chunkReader
	limit int
	out   bytes.Buffer
	// When full bytes have been written, gate is closed.
	full int
	gate chan struct{}
}

func (w *boundWriter) Write(p []byte) (int, error) {
	w.out.Write(p)
	if w.gate != nil && w.out.Len() == w.full {
		defer close(w.gate)
	}
	held := w.src.read - w.out.Len()
	assert.LessOrEqual(w.t, held, w.limit, "the bytes the proxy holds read but not written")
	return len(p), nil
}

// gateReader ends (EOF) once gate is closed.
type gateReader struct{ gate chan struct{} }

func (r gateReader) Read([]byte) (int, error) { <-r.gate; return 0, io.EOF }

// TestProxyBufferOrderAndBound: whatever the split of the input into
// reads, each direction's output is the input byte for byte, and the proxy
// never holds more than its read buffer, its write buffer and one line.
func TestProxyBufferOrderAndBound(t *testing.T) {
	// Reading (64 KiB) plus holding back (64 KiB) plus the longest line.
	const limit = 64<<10 + 64<<10 + 101<<10
	for seed := range uint64(2) {
		p, err := proxy.New()
		require.NoError(t, err, "proxy.New")
		// Agent to client; Run returns at the end of the agent's output.
		rng := rand.New(rand.NewPCG(seed, 1))
		agentOut := &chunkReader{data: mixedStream(1500, rng), rng: rng}
		toClient := &boundWriter{t: t, src: agentOut, limit: limit}
		require.NoError(t, p.Run(context.Background(), strings.NewReader(""), toClient, io.Discard, agentOut), "p.Run")
		// Not require.Equal: the message would print both streams.
		require.True(t, bytes.Equal(toClient.out.Bytes(), agentOut.data), "seed %d: the client's stream differs from the agent's output", seed)
		// Client to agent; the agent's output ends once all has arrived.
		rng = rand.New(rand.NewPCG(seed, 2))
		clientIn := &chunkReader{data: mixedStream(1500, rng), rng: rng}
		gate := make(chan struct{})
		toAgent := &boundWriter{t: t, src: clientIn, limit: limit, full: len(clientIn.data), gate: gate}
		require.NoError(t, p.Run(context.Background(), clientIn, io.Discard, toAgent, gateReader{gate}), "p.Run")
		require.True(t, bytes.Equal(toAgent.out.Bytes(), clientIn.data), "seed %d: the agent's stream differs from the client's output", seed)
	}
}
