package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Initialize params of the client kinds the tests play.
const (
	v1Capable = `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`
	v1Plain   = `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`
	// opencode's defect: false counted as support. It is not.
	v1False = `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":false}}}`
	v2Init  = `{"protocolVersion":2,"info":{"name":"test-client","version":"1.0.0"},"capabilities":{}}`
)

const waitFor = 20 * time.Second

// harness plays both peers around a proxy running on in-memory pipes. The
// test writes client lines (each is checked to reach the agent byte for
// byte) and agent lines, and reads what the client receives, in order.
type harness struct {
	t        *testing.T
	version  int
	cw, aw   *io.PipeWriter
	coW      *io.PipeWriter
	toClient chan []byte
	toAgent  chan []byte
	done     chan error
	ended    bool

	agentSent map[string]bool // lines the agent wrote, to tell forwarded from emitted
	received  [][]byte        // every line the client received
	checker   *recordingChecker
	logs      *wiretest.Buffer
	nextID    int
}

type harnessOpt struct {
	noChecker bool
	// profiles: the proxy picks translators by the agent's profile, as it
	// does by default; otherwise every translator is named (the tests of
	// each legacy form play agents without agentInfo).
	profiles bool
}

// start runs a proxy configured by opts with the client-side stream under
// a conformance checker (the proxy's output must be conformant) unless
// opts configure another checker.
func start(t *testing.T, opts ...proxy.Option) *harness {
	t.Helper()
	return startWith(t, harnessOpt{}, opts...)
}

func startWith(t *testing.T, ho harnessOpt, opts ...proxy.Option) *harness {
	t.Helper()
	h := &harness{
		t:         t,
		toClient:  make(chan []byte, 4096),
		toAgent:   make(chan []byte, 4096),
		done:      make(chan error, 1),
		agentSent: map[string]bool{},
		logs:      &wiretest.Buffer{},
		nextID:    10,
	}
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	all := []proxy.Option{proxy.WithLogger(logger)}
	if !ho.profiles {
		all = append(all, proxy.WithTranslators(proxy.Translators()...))
	}
	if !ho.noChecker {
		h.checker = newRecordingChecker(t)
		all = append(all, proxy.WithChecker(h.checker, proxy.CheckClient))
	}
	all = append(all, opts...)
	p, err := proxy.New(all...)
	require.NoError(t, err, "proxy.New")
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	coR, coW := io.Pipe()
	aiR, aiW := io.Pipe()
	h.cw, h.aw, h.coW = cw, aw, coW
	go readLines(coR, h.toClient)
	go readLines(aiR, h.toAgent)
	go func() { h.done <- p.Run(context.Background(), cr, coW, aiW, ar) }()
	t.Cleanup(func() {
		if !h.ended {
			h.end()
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", h.logs.String())
		}
	})
	return h
}

func readLines(r io.Reader, ch chan<- []byte) {
	defer close(ch)
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			ch <- line
		}
		if err != nil {
			return
		}
	}
}

// client sends one client line and checks that the agent receives exactly
// those bytes, which also orders it before any later agent line.
func (h *harness) client(line string) {
	h.t.Helper()
	h.clientRaw(line + "\n")
}

func (h *harness) clientRaw(raw string) {
	h.t.Helper()
	_, err := h.cw.Write([]byte(raw))
	require.NoError(h.t, err, "client write")
	got := h.recv(h.toAgent, "agent")
	// Not require.Equal: a line may be megabytes long, and the message clips it.
	require.True(h.t, bytes.Equal(got, []byte(raw)), "the agent received\n%q\nnot what the client sent\n%q", clipQ(got), clipQ([]byte(raw)))
}

// agent sends one agent line.
func (h *harness) agent(line string) {
	h.t.Helper()
	h.agentRaw(line + "\n")
}

func (h *harness) agentRaw(raw string) {
	h.t.Helper()
	h.agentSent[raw] = true
	_, err := h.aw.Write([]byte(raw))
	require.NoError(h.t, err, "agent write")
}

func (h *harness) recv(ch <-chan []byte, who string) []byte {
	h.t.Helper()
	select {
	case l, ok := <-ch:
		require.True(h.t, ok, "the %s stream ended", who)
		if who == "client" {
			h.received = append(h.received, l)
		}
		return l
	case <-time.After(waitFor):
		require.FailNow(h.t, fmt.Sprintf("nothing reached the %s within %s", who, waitFor))
	}
	return nil
}

// next returns the next line the client receives.
func (h *harness) next() []byte {
	h.t.Helper()
	return h.recv(h.toClient, "client")
}

// forwarded expects the client's next line to be exactly line.
func (h *harness) forwarded(line string) {
	h.t.Helper()
	got := h.next()
	// Not require.Equal: a line may be megabytes long, and the message clips it.
	require.True(h.t, string(got) == line+"\n", "client got\n%s\nwant the agent's line unchanged\n%s", clipQ(got), line)
}

// emitted expects the client's next line to be a proxy-made message equal,
// as JSON, to want.
func (h *harness) emitted(want string) {
	h.t.Helper()
	got := h.next()
	require.False(h.t, h.agentSent[string(got)], "client got the agent's line\n%s\nwant a proxy-made\n%s", got, want)
	require.JSONEq(h.t, want, string(got), "the proxy-made line the client got")
}

// relay sends an agent line and expects it unchanged at the client.
func (h *harness) relay(line string) {
	h.t.Helper()
	h.agent(line)
	h.forwarded(line)
}

// handshake runs initialize (with clientParams; the agent answers
// agentVersion) and session/new for "s1".
func (h *harness) handshake(clientParams string, agentVersion int) {
	h.t.Helper()
	h.version = agentVersion
	h.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + clientParams + `}`)
	h.relay(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":%d,"agentCapabilities":{"loadSession":true}}}`, agentVersion))
	h.client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	h.relay(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
}

// prompt sends a session/prompt and returns its id.
func (h *harness) prompt(sid string) int {
	h.t.Helper()
	h.nextID++
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go on"}]}}`, h.nextID, sid))
	return h.nextID
}

func (h *harness) cancel(sid string) {
	h.t.Helper()
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
}

func promptResponse(id int, stop string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":%q}}`, id, stop)
}

// end closes the agent's output, waits for Run, and returns what the client
// received after that (the final settlement), then closes the client side.
func (h *harness) end() (rest [][]byte, runErr error) {
	h.t.Helper()
	h.ended = true
	h.aw.Close()
	select {
	case runErr = <-h.done:
	case <-time.After(waitFor):
		require.FailNow(h.t, "Run did not return after the agent's output ended")
	}
	h.coW.Close()
	for l := range h.toClient {
		rest = append(rest, l)
		h.received = append(h.received, l)
	}
	h.cw.Close()
	for range h.toAgent {
	}
	h.validateEmitted()
	if h.checker != nil {
		h.checker.close()
	}
	return rest, runErr
}

// validateEmitted checks every proxy-made line against the official
// schema of the negotiated version: the proxy's own output is held to the
// published contract, whatever the agent sent.
func (h *harness) validateEmitted() {
	h.t.Helper()
	if h.version == 0 {
		return
	}
	v := schematest.For(h.t, h.version)
	if v == nil {
		return
	}
	for _, l := range h.received {
		if h.agentSent[string(l)] {
			continue
		}
		msgs := []json.RawMessage{bytes.TrimSpace(l)}
		if msgs[0][0] == '[' {
			// A batch the proxy rewrote: each message is held to the schema.
			assert.NoError(h.t, json.Unmarshal(msgs[0], &msgs), "proxy-made batch")
		}
		for _, msg := range msgs {
			assert.NoError(h.t, v.Message(msg), "proxy-made line fails the v%d schema", h.version)
			var n struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(msg, &n) == nil && n.Method == "session/update" {
				assert.NoError(h.t, v.Notification(n.Params), "proxy-made session/update fails the v%d schema", h.version)
			}
		}
	}
}

// upd builds a session/update notification line.
func upd(sid, update string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, sid, update)
}

func text(s string) string {
	b, _ := json.Marshal(s)
	return fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%s}}`, b)
}

func cmpUpdate(id, status string, extra ...string) string {
	s := fmt.Sprintf(`{"sessionUpdate":"compaction_update","compactionId":%q,"status":%q`, id, status)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// mintedID is the ID the proxy gives the n-th compaction of an ID-less
// legacy form in a session; it is stable across live and replay.
func mintedID(sid string, tr proxy.Translator, n int) string {
	sum := sha256.Sum256([]byte(sid + "\x00" + string(tr) + "\x00" + strconv.Itoa(n)))
	return "cmp_" + hex.EncodeToString(sum[:12])
}

func clipQ(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%q… (%d bytes)", b[:300], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// recordingChecker is the conformance checker with its violations kept for
// the test, validating session/updates against the official schema too.
type recordingChecker struct {
	t    *testing.T
	ch   *conformance.Checker
	mu   sync.Mutex
	vs   []conformance.Violation
	want []conformance.Rule
}

func newRecordingChecker(t *testing.T) *recordingChecker {
	v1, v2 := schematest.For(t, 1), schematest.For(t, 2)
	return &recordingChecker{t: t, ch: conformance.NewChecker(conformance.WithSchema(v1, v2))}
}

func (r *recordingChecker) Observe(dir conformance.Direction, line int, raw json.RawMessage) []conformance.Violation {
	vs := r.ch.Observe(dir, line, raw)
	r.mu.Lock()
	r.vs = append(r.vs, vs...)
	r.mu.Unlock()
	return vs
}

func (r *recordingChecker) Close() []conformance.Violation {
	vs := r.ch.Close()
	r.mu.Lock()
	r.vs = append(r.vs, vs...)
	r.mu.Unlock()
	return vs
}

// close asserts that the client stream broke exactly the wanted rules.
func (r *recordingChecker) close() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var got []string
	for _, v := range r.vs {
		got = append(got, string(v.Rule))
	}
	var want []string
	for _, w := range r.want {
		want = append(want, string(w))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		for _, v := range r.vs {
			r.t.Logf("violation on the client stream: %s", v)
		}
		assert.Fail(r.t, "client stream violations", "got %v, want %v", got, want)
	}
}

// contains reports whether some line of log holds every part.
func contains(log string, parts ...string) bool {
	for _, l := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }
