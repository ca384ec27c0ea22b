package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"fmt"

	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lifePeers are the four ends of a Run under test, seen from the peers.
type lifePeers struct {
	clientIn  io.WriteCloser // what the client sends
	clientOut io.ReadCloser  // what the client receives
	outW      io.WriteCloser // the proxy's end of it
	agentIn   *bufio.Reader  // what the agent receives
	agentOut  io.WriteCloser // what the agent sends
	done      chan error
	logs      *wiretest.Buffer
}

// runLife starts p.Run on pipes; the client's output is an os.Pipe
// (which has write deadlines) when osPipe is set, else an io.Pipe.
func runLife(t *testing.T, ctx context.Context, osPipe bool, opts ...proxy.Option) *lifePeers {
	t.Helper()
	logs := &wiretest.Buffer{}
	opts = append([]proxy.Option{proxy.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}, opts...)
	p, err := proxy.New(opts...)
	require.NoError(t, err, "proxy.New")
	return runLifeWith(t, ctx, p, osPipe, logs)
}

func runLifeWith(t *testing.T, ctx context.Context, p *proxy.Proxy, osPipe bool, logs *wiretest.Buffer) *lifePeers {
	t.Helper()
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	air, aiw := io.Pipe()
	var cor io.ReadCloser
	var cow io.WriteCloser
	if osPipe {
		r, w, err := os.Pipe()
		require.NoError(t, err, "os.Pipe")
		cor, cow = r, w
	} else {
		cor, cow = io.Pipe()
	}
	l := &lifePeers{clientIn: cw, clientOut: cor, outW: cow, agentIn: bufio.NewReader(air), agentOut: aw, done: make(chan error, 1), logs: logs}
	go func() { l.done <- p.Run(ctx, cr, cow, aiw, ar) }()
	t.Cleanup(func() {
		cw.Close()
		aw.Close()
		air.Close()
		cow.Close()
		cor.Close()
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	return l
}

func (l *lifePeers) clientSends(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(l.clientIn, line+"\n")
	require.NoError(t, err, "client write")
	_, err = l.agentIn.ReadBytes('\n')
	require.NoError(t, err, "the agent did not get the client's line")
}

func (l *lifePeers) agentSends(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(l.agentOut, line+"\n")
	require.NoError(t, err, "agent write")
}

func (l *lifePeers) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-l.done:
		return err
	case <-time.After(d):
		require.FailNow(t, fmt.Sprintf("Run did not return within %s", d))
	}
	return nil
}

const (
	lifeInit    = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + v1Capable + `}`
	lifeInitOK  = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`
	lifePrompt  = `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`
	lifeStarted = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"c1","status":"in_progress"}}}`
)

// A client that does not read cannot keep Run from returning once its
// context is done: the write it is stuck in is abandoned after the stop
// timeout, nothing is written after it, and no goroutine is left behind
// once the client's output ends (goleak checks, in TestMain).
func TestRunAbandonsAClientThatDoesNotRead(t *testing.T) {
	for _, osPipe := range []bool{true, false} {
		name := map[bool]string{true: "os.Pipe", false: "io.Pipe"}[osPipe]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l := runLife(t, ctx, osPipe, proxy.WithStopTimeout(200*time.Millisecond))
			l.clientSends(t, lifeInit)
			l.clientSends(t, lifePrompt)
			// More than a pipe holds, which nobody reads: the agent's
			// writes block once the proxy is stuck.
			big := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
				strings.Repeat("x", 1<<20) + `"}}}}`
			go io.WriteString(l.agentOut, lifeInitOK+"\n"+lifeStarted+"\n"+big+"\n")
			time.Sleep(200 * time.Millisecond) // the proxy is now stuck writing
			cancel()
			require.ErrorIs(t, l.wait(t, 10*time.Second), context.Canceled, "Run's return")
			assert.Contains(t, l.logs.String(), "output is abandoned", "the abandonment was not logged")
			// What the client finally reads ends with what was stuck: no
			// settlement follows an abandoned write.
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(l.clientOut)
				got <- b
			}()
			l.clientIn.Close()
			l.agentOut.Close()
			time.Sleep(100 * time.Millisecond)
			// Run's caller ends the client's output, which ends a write
			// still stuck in it (io.Pipe).
			l.outW.Close()
			select {
			case b := <-got:
				// Not NotContains: b holds a 1 MiB line, which its message would print.
				assert.False(t, bytes.Contains(b, []byte(`"status":"failed"`)), "a settlement was written after the client's output was abandoned")
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the client's output did not end")
			}
		})
	}
}

// The end of the agent's output after the client's input ended, or after
// the host called Terminating, is the connection closing: the compaction
// left open is settled "the connection closed", not "the agent crashed".
func TestRunSettlesAsConnectionClosedWhenTheConnectionIsEnding(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, l *lifePeers, p *proxy.Proxy)
		want string
	}{
		{"client input ended", func(t *testing.T, l *lifePeers, _ *proxy.Proxy) {
			l.clientIn.Close()
			// The agent learns it from its own input.
			_, err := l.agentIn.ReadBytes('\n')
			require.ErrorIs(t, err, io.EOF, "the agent's input did not end")
		}, "the connection closed"},
		{"terminating", func(_ *testing.T, _ *lifePeers, p *proxy.Proxy) { p.Terminating() }, "the connection closed"},
		{"agent ended alone", func(*testing.T, *lifePeers, *proxy.Proxy) {}, "the agent crashed during compaction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &wiretest.Buffer{}
			p, err := proxy.New(proxy.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
			require.NoError(t, err, "proxy.New")
			l := runLifeWith(t, context.Background(), p, false, logs)
			lines := make(chan []byte, 16)
			go readLines(l.clientOut, lines)
			l.clientSends(t, lifeInit)
			l.agentSends(t, lifeInitOK)
			<-lines
			l.clientSends(t, lifePrompt)
			l.agentSends(t, lifeStarted)
			<-lines
			tc.end(t, l, p)
			l.agentOut.Close()
			require.NoError(t, l.wait(t, 10*time.Second), "Run =")
			want := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"c1","status":"failed","error":"` + tc.want + `"}}}`
			select {
			case got := <-lines:
				assert.Equal(t, want, string(bytes.TrimSpace(got)), "the settlement the client got")
			case <-time.After(10 * time.Second):
				require.FailNow(t, "no settlement")
			}
		})
	}
}
