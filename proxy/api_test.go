package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProxyParseTranslators(t *testing.T) {
	got, err := proxy.ParseTranslators(" claude-text, TOOLCALL,,claude-text")
	require.NoError(t, err, "a list with spaces, case and repeats")
	require.Equal(t, []proxy.Translator{proxy.ClaudeText, proxy.ToolCall}, got, "a list with spaces, case and repeats")
	got, err = proxy.ParseTranslators("")
	require.NoError(t, err, "empty list")
	require.Empty(t, got, "empty list")
	_, err = proxy.ParseTranslators("claude-text,bogus")
	require.ErrorIs(t, err, proxy.ErrUnknownTranslator, "unknown name")
	_, err = proxy.New(proxy.WithoutTranslators("bogus"))
	require.ErrorIs(t, err, proxy.ErrUnknownTranslator, "New with an unknown translator")
	p, err := proxy.New(proxy.WithTranslators(proxy.CodexText))
	require.NoError(t, err, "proxy.New")
	for _, tr := range proxy.Translators() {
		assert.Equal(t, tr == proxy.CodexText, p.Enabled(tr), "Enabled(%s)", tr)
	}
}

func TestProxyCustomSettleReasons(t *testing.T) {
	h := start(t,
		proxy.WithTurnEndReason(errors.New("the agent stopped mid-compaction")),
		proxy.WithExitReason(errors.New("the agent went away")),
		// A reason that is a cancel would report one the user never asked for.
		proxy.WithTurnEndReason(fmt.Errorf("oops: %w", emitter.ErrCancelled)),
	)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("cmp_1", "failed", `"error":"the agent stopped mid-compaction"`)))
	h.forwarded(promptResponse(id, "end_turn"))
	h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_2", "in_progress")))
	rest, _ := h.end()
	require.Equal(t, 1, len(rest), "what the client got at the end: %q", rest)
	require.JSONEq(t, upd("s1", cmpUpdate("cmp_2", "failed", `"error":"the agent went away"`)), string(rest[0]), "the settlement at the end")
}

func TestProxyRunRefusesASecondConcurrentRun(t *testing.T) {
	p, err := proxy.New()
	require.NoError(t, err, "proxy.New")
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	cor, cow := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), cr, cow, io.Discard, ar) }()
	// A line through the proxy shows the first Run is going.
	go func() { _, _ = aw.Write([]byte("{}\n")) }()
	_, err = io.ReadFull(cor, make([]byte, 3))
	require.NoError(t, err, "reading the line through the first Run")
	require.ErrorIs(t, p.Run(context.Background(), nil, nil, nil, nil), proxy.ErrRunning, "second Run")
	aw.Close()
	require.NoError(t, <-done, "first Run")
	cw.Close()
	cow.Close()
	// A finished proxy runs again.
	cr2, cw2 := io.Pipe()
	ar2, aw2 := io.Pipe()
	aw2.Close()
	require.NoError(t, p.Run(context.Background(), cr2, io.Discard, io.Discard, ar2), "Run after Run")
	cw2.Close()
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestProxyRunStopsWhenTheClientIsGone(t *testing.T) {
	p, err := proxy.New()
	require.NoError(t, err, "proxy.New")
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	air, aiw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), cr, failingWriter{}, aiw, ar) }()
	go func() { _, _ = aw.Write([]byte(`{"jsonrpc":"2.0","method":"x"}` + "\n")) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, proxy.ErrClientClosed, "Run's return")
	case <-time.After(waitFor):
		require.FailNow(t, "Run did not stop")
	}
	// The agent learns it from end of input.
	_, err = io.ReadAll(air)
	require.NoError(t, err, "agent input")
	cw.Close()
	aw.Close()
}

func TestProxyRunStopsOnContextEndAndSettles(t *testing.T) {
	p, err := proxy.New()
	require.NoError(t, err, "proxy.New")
	ctx, cancel := context.WithCancel(context.Background())
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	air, aiw := io.Pipe()
	cor, cow := io.Pipe()
	toClient := make(chan []byte, 16)
	toAgent := make(chan []byte, 16)
	go readLines(cor, toClient)
	go readLines(air, toAgent)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cr, cow, aiw, ar) }()

	for _, l := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + v1Capable + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`,
	} {
		cw.Write([]byte(l + "\n"))
		<-toAgent
	}
	aw.Write([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}` + "\n"))
	<-toClient
	aw.Write([]byte(upd("s1", cmpUpdate("cmp_1", "in_progress")) + "\n"))
	<-toClient
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled, "Run's return")
	case <-time.After(waitFor):
		require.FailNow(t, "Run did not stop")
	}
	cow.Close()
	got := <-toClient
	require.JSONEq(t, upd("s1", cmpUpdate("cmp_1", "failed", `"error":"the connection closed"`)), string(got), "settlement on stop")
	cw.Close()
	for range toAgent {
	}
	for range toClient {
	}
}
