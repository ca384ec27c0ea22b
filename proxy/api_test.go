package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/proxy"
)

func TestProxyParseTranslators(t *testing.T) {
	got, err := proxy.ParseTranslators(" claude-text, TOOLCALL,,claude-text")
	if err != nil || !slices.Equal(got, []proxy.Translator{proxy.ClaudeText, proxy.ToolCall}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := proxy.ParseTranslators(""); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v, %v", got, err)
	}
	if _, err := proxy.ParseTranslators("claude-text,bogus"); !errors.Is(err, proxy.ErrUnknownTranslator) {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := proxy.New(proxy.WithoutTranslators("bogus")); !errors.Is(err, proxy.ErrUnknownTranslator) {
		t.Fatalf("New with an unknown translator: %v", err)
	}
	p, err := proxy.New(proxy.WithTranslators(proxy.CodexText))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range proxy.Translators() {
		if p.Enabled(tr) != (tr == proxy.CodexText) {
			t.Errorf("Enabled(%s) = %v", tr, p.Enabled(tr))
		}
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
	if len(rest) != 1 || !jsonEqual(rest[0], []byte(upd("s1", cmpUpdate("cmp_2", "failed", `"error":"the agent went away"`)))) {
		t.Fatalf("got %q", rest)
	}
}

func TestProxyRunRefusesASecondConcurrentRun(t *testing.T) {
	p, err := proxy.New()
	if err != nil {
		t.Fatal(err)
	}
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	cor, cow := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), cr, cow, io.Discard, ar) }()
	// A line through the proxy shows the first Run is going.
	go func() { _, _ = aw.Write([]byte("{}\n")) }()
	if _, err := io.ReadFull(cor, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), nil, nil, nil, nil); !errors.Is(err, proxy.ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
	aw.Close()
	if err := <-done; err != nil {
		t.Fatalf("first Run: %v", err)
	}
	cw.Close()
	cow.Close()
	// A finished proxy runs again.
	cr2, cw2 := io.Pipe()
	ar2, aw2 := io.Pipe()
	aw2.Close()
	if err := p.Run(context.Background(), cr2, io.Discard, io.Discard, ar2); err != nil {
		t.Fatalf("Run after Run: %v", err)
	}
	cw2.Close()
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestProxyRunStopsWhenTheClientIsGone(t *testing.T) {
	p, err := proxy.New()
	if err != nil {
		t.Fatal(err)
	}
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	air, aiw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), cr, failingWriter{}, aiw, ar) }()
	go func() { _, _ = aw.Write([]byte(`{"jsonrpc":"2.0","method":"x"}` + "\n")) }()
	select {
	case err := <-done:
		if !errors.Is(err, proxy.ErrClientClosed) {
			t.Fatalf("Run = %v, want ErrClientClosed", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not stop")
	}
	// The agent learns it from end of input.
	if _, err := io.ReadAll(air); err != nil {
		t.Fatalf("agent input: %v", err)
	}
	cw.Close()
	aw.Close()
}

func TestProxyRunStopsOnContextEndAndSettles(t *testing.T) {
	p, err := proxy.New()
	if err != nil {
		t.Fatal(err)
	}
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
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not stop")
	}
	cow.Close()
	got := <-toClient
	if !jsonEqual(got, []byte(upd("s1", cmpUpdate("cmp_1", "failed", `"error":"the connection closed"`)))) {
		t.Fatalf("settlement on stop: %s", got)
	}
	cw.Close()
	for range toAgent {
	}
	for range toClient {
	}
}
