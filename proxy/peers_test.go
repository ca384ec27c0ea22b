package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The recordings of the real agent releases (test/peers/README.md): both
// sides of each scenario, with and without the client capability.
const peersGlob = "../test/peers/testdata/*/*.jsonl"

// clientMode is how the replayed client sees compaction.
type clientMode struct {
	name    string
	capable bool
	opts    []proxy.Option
}

var clientModes = []clientMode{
	{name: "cap", capable: true},
	{name: "nocap", capable: false},
	{name: "nocap-toolcall", capable: false, opts: []proxy.Option{proxy.WithFallback(fallback.ToolCall())}},
}

// cmp is one compaction as the client must end up holding it.
type cmp struct {
	status string
	err    string // a part of its error text
}

// peerWant is what a scenario of an agent must give the client.
type peerWant struct {
	// cmps are the compactions a client sees: standard entities for a
	// capable one, "Compact conversation" tool calls for one without the
	// capability that gets a tool call (the agent's own or the proxy's).
	cmps []cmp
	// nocap, when set, replaces cmps for a client without the capability.
	nocap *[]cmp
}

// expectFile is what each recording directory says its scenarios must give
// the client (test/peers/testdata/<agent>-<version>/expect.json), beside
// the recordings, so that adding an agent's release adds no Go code here.
// A scenario it does not list must show no compaction at all; a key
// "<scenario>-cap" or "<scenario>-nocap" is for the recording of that mode
// only, and wins over the scenario's.
type expectFile struct {
	Note      string `json:"note"`
	Scenarios map[string]struct {
		Cmps  []expectCmp  `json:"cmps"`
		Nocap *[]expectCmp `json:"nocap"`
	} `json:"scenarios"`
}

type expectCmp struct {
	Status string `json:"status"`
	Error  string `json:"error"`
}

func cmpsOf(es []expectCmp) []cmp {
	out := []cmp{}
	for _, e := range es {
		out = append(out, cmp{status: e.Status, err: e.Error})
	}
	return out
}

// wantFor reads the expectations of a recording directory, and in it the
// recorded mode's entry or the scenario's.
func wantFor(t *testing.T, dir, scenario, recMode string) (peerWant, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		return peerWant{}, false
	}
	var e expectFile
	require.NoError(t, json.Unmarshal(b, &e), "%s/expect.json", dir)
	w, ok := e.Scenarios[scenario+"-"+recMode]
	if !ok {
		w, ok = e.Scenarios[scenario]
	}
	if !ok {
		return peerWant{cmps: []cmp{}}, true
	}
	want := peerWant{cmps: cmpsOf(w.Cmps)}
	if w.Nocap != nil {
		nocap := cmpsOf(*w.Nocap)
		want.nocap = &nocap
	}
	return want, true
}

// TestPeersReplay replays the agent side of every recording through
// proxy.Run, answering each client line with the agent lines that followed
// it in the recording, for a client with the capability, one without it,
// and one without it under --fallback toolcall. The client's stream must
// break no conformance rule (official schema included), hold exactly the
// compactions the scenario calls for, and carry the agent's prose byte for
// byte.
func TestPeersReplay(t *testing.T) {
	files, err := filepath.Glob(peersGlob)
	require.NoError(t, err, "filepath.Glob")
	if len(files) == 0 {
		t.Skipf("no recordings under %s (test/peers/README.md records them)", peersGlob)
	}
	seen := map[string]map[string]bool{} // agent dir -> client modes replayed
	ids := map[string][]string{}         // agent dir/scenario-mode/client mode -> compaction IDs the client holds
	for _, f := range files {
		agentDir := filepath.Base(filepath.Dir(f))
		base := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		scenario, recMode, ok := cutMode(base)
		if !ok {
			continue
		}
		want, known := wantFor(t, filepath.Dir(f), scenario, recMode)
		if !assert.True(t, known, "%s: no expectations for agent %s: add its expect.json", f, agentDir) {
			continue
		}
		for _, mode := range clientModes {
			t.Run(agentDir+"/"+base+"/"+mode.name, func(t *testing.T) {
				ids[agentDir+"/"+scenario+"-"+recMode+"/"+mode.name] = replayPeer(t, f, agentDir, scenario, recMode, mode, want)
			})
			if seen[agentDir] == nil {
				seen[agentDir] = map[string]bool{}
			}
			seen[agentDir][recMode+"->"+mode.name] = true
		}
	}
	for dir, modes := range seen {
		t.Logf("%s: replayed %s", dir, strings.Join(slices.Sorted(maps.Keys(modes)), ", "))
	}
	// Where the wire names the compaction the same live and on replay, the
	// client holds one ID for it: load-before is the live connection, load
	// the fresh process replaying it.
	for _, dir := range []string{"codex-acp-ts-"} {
		for key, replayed := range ids {
			live, ok := ids[strings.Replace(key, "/load-", "/load-before-", 1)]
			if !strings.HasPrefix(key, dir) || !strings.Contains(key, "/load-") || !ok || len(replayed) == 0 {
				continue
			}
			assert.Equal(t, strings.Join(live, ","), strings.Join(replayed, ","), "%s: the compaction IDs of the replay against those live", key)
		}
	}
}

func cutMode(base string) (scenario, mode string, ok bool) {
	for _, m := range []string{"-nocap", "-cap"} {
		if s, found := strings.CutSuffix(base, m); found {
			return s, m[1:], true
		}
	}
	return "", "", false
}

// peerLine is one recorded message.
type peerLine struct {
	fromClient bool
	raw        []byte
}

func readRecording(t *testing.T, path string) []peerLine {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "os.Open")
	defer f.Close()
	lines, errs := conformance.ReadTranscript(f)
	require.Empty(t, errs, "%s: errors reading the transcript", path)
	out := make([]peerLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, peerLine{fromClient: l.Dir == conformance.FromClient, raw: l.Raw})
	}
	return out
}

// withCapability rewrites an initialize request's clientCapabilities to
// carry session.compaction {} or not; other lines are returned as they
// are.
func withCapability(t *testing.T, raw []byte, capable bool) []byte {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["method"] != "initialize" {
		return raw
	}
	params, _ := m["params"].(map[string]any)
	caps, _ := params["clientCapabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		params["clientCapabilities"] = caps
	}
	session, _ := caps["session"].(map[string]any)
	if capable {
		if session == nil {
			session = map[string]any{}
		}
		session["compaction"] = map[string]any{}
		caps["session"] = session
	} else if session != nil {
		delete(session, "compaction")
		if len(session) == 0 {
			delete(caps, "session")
		}
	}
	b, err := json.Marshal(m)
	require.NoError(t, err, "json.Marshal")
	return b
}

const syncMethod = "_acpcompact_test/sync"

func isSync(line []byte) bool { return bytes.Contains(line, []byte(`"method":"`+syncMethod+`"`)) }

// peerRun is the outcome of one replay.
type peerRun struct {
	agentLines  [][]byte // every agent line sent, in order
	received    [][]byte // what the client received, without the sync lines
	violations  []conformance.Violation
	reducer     *conformance.Reducer
	version     int
	logs        *wiretest.Buffer
	agentNative bool // the agent's own lines carry a compaction form a client without the capability sees
	// events are the client's lines and what it received, in the order
	// the client saw them.
	events []peerLine
}

// runPeer replays one recording for a client in mode.
func runPeer(t *testing.T, path string, mode clientMode) *peerRun {
	t.Helper()
	rec := readRecording(t, path)
	// Segments: each client line, then the agent lines that followed it.
	type segment struct {
		client []byte
		agent  [][]byte
	}
	var segs []segment
	for _, l := range rec {
		if l.fromClient {
			segs = append(segs, segment{client: append(withCapability(t, l.raw, mode.capable), '\n')})
			continue
		}
		require.NotEmpty(t, segs, "%s: an agent line before any client line", path)
		segs[len(segs)-1].agent = append(segs[len(segs)-1].agent, l.raw)
	}

	run := &peerRun{logs: &wiretest.Buffer{}, version: 1, reducer: conformance.NewReducer(1)}
	logger := slog.New(slog.NewTextHandler(run.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := proxy.New(append([]proxy.Option{proxy.WithLogger(logger)}, mode.opts...)...)
	require.NoError(t, err, "proxy.New")
	cr, cw := io.Pipe()
	coR, coW := io.Pipe()
	aiR, aiW := io.Pipe()
	aoR, aoW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), cr, coW, aiW, aoR) }()
	toClient := make(chan []byte, 1024)
	go readLines(coR, toClient)

	// The scripted agent: it waits for each client line, checks that it
	// arrived byte for byte, and answers with what followed it in the
	// recording, then a sync notification the client waits for.
	agentErr := make(chan error, 1)
	go func() {
		defer aoW.Close()
		br := bufio.NewReader(aiR)
		for i, s := range segs {
			got, err := br.ReadBytes('\n')
			if err != nil {
				agentErr <- fmt.Errorf("reading client line %d: %w", i, err)
				return
			}
			if !bytes.Equal(got, s.client) {
				agentErr <- fmt.Errorf("the agent received %q, not what the client sent %q", got, s.client)
				return
			}
			for _, a := range s.agent {
				if _, err := aoW.Write(append(bytes.Clone(a), '\n')); err != nil {
					agentErr <- err
					return
				}
			}
			fmt.Fprintf(aoW, `{"jsonrpc":"2.0","method":%q,"params":{"n":%d}}`+"\n", syncMethod, i)
		}
		agentErr <- nil
	}()

	v1, v2 := schematest.For(t, 1), schematest.For(t, 2)
	checker := conformance.NewChecker(conformance.WithSchema(v1, v2))
	observe := func(dir conformance.Direction, n int, raw []byte) {
		run.violations = append(run.violations, checker.Observe(dir, n, bytes.TrimSpace(raw))...)
	}
	n := 0
	receive := func(line []byte) {
		n++
		observe(conformance.FromAgent, n, line)
		run.received = append(run.received, line)
		run.events = append(run.events, peerLine{raw: line})
		assert.NoError(t, run.reducer.ApplyMessage(bytes.TrimSpace(line)), "the client's reducer refused %s", clipQ(line))
	}
	for i, s := range segs {
		n++
		observe(conformance.FromClient, n, s.client)
		run.events = append(run.events, peerLine{fromClient: true, raw: s.client})
		_, err := cw.Write(s.client)
		require.NoError(t, err, "client write")
		run.agentLines = append(run.agentLines, s.agent...)
	wait:
		for {
			select {
			case line, ok := <-toClient:
				require.True(t, ok, "the client stream ended during segment %d", i)
				if isSync(line) {
					break wait
				}
				receive(line)
			case err := <-agentErr:
				require.NoError(t, err, "the agent's side of the recording")
				agentErr <- nil
			case <-time.After(waitFor):
				require.FailNow(t, fmt.Sprintf("no sync for segment %d within %s", i, waitFor))
			}
		}
	}
	// The recording ends: the client closes its input, the agent its
	// output; what the proxy settles at the end reaches the client too.
	cw.Close()
	select {
	case err := <-done:
		assert.NoError(t, err, "Run")
	case <-time.After(waitFor):
		require.FailNow(t, "Run did not return")
	}
	coW.Close()
	for line := range toClient {
		if !isSync(line) {
			receive(line)
		}
	}
	aiR.Close()
	run.violations = append(run.violations, checker.Close()...)
	for _, a := range run.agentLines {
		if bytes.Contains(a, []byte(`"compaction_update"`)) || bytes.Contains(a, []byte(`"title":"Compact conversation"`)) {
			run.agentNative = true
		}
	}
	return run
}

// replayPeer replays one recording and checks it; it returns the IDs of the
// compactions the client holds.
func replayPeer(t *testing.T, path, agentDir, scenario, recMode string, mode clientMode, want peerWant) (ids []string) {
	run := runPeer(t, path, mode)
	defer func() {
		if t.Failed() || os.Getenv("PEERS_DUMP") != "" {
			t.Logf("client received:\n%s\nproxy log:\n%s", joinLines(run.received), run.logs.String())
		}
	}()
	for _, v := range run.violations {
		if scenario == "legacy-prose" && !mode.capable && v.Rule == conformance.RuleFallback &&
			strings.Contains(v.Message, `text fallback "Compacting..."`) {
			// The model's reply "Compacting..." in a chunk without a
			// messageId (codex-acp 0.16, Qwen Code, Gemini CLI tag none)
			// reads to the checker as a text fallback left open; it is
			// the agent's prose, forwarded unchanged, as it must be.
			t.Logf("expected checker reading of the model's prose: %s", v)
			continue
		}
		assert.Fail(t, "violation on the client stream", "%s", v)
	}

	// Every line the client got that the agent sent is the agent's line,
	// byte for byte, in the agent's order; responses, requests and other
	// notifications all pass; and so does model prose (a chunk with a
	// messageId), except Claude's continuation message that a capable
	// client gets as a compaction.
	forwarded := map[string]bool{}
	j := 0
	for _, line := range run.received {
		l := bytes.TrimSuffix(line, []byte("\n"))
		for k := j; k < len(run.agentLines); k++ {
			if bytes.Equal(run.agentLines[k], l) {
				forwarded[string(l)] = true
				j = k + 1
				break
			}
		}
	}
	everything := scenario == "hello" || scenario == "legacy-prose"
	for _, a := range run.agentLines {
		if forwarded[string(a)] {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update struct {
					Kind      string `json:"sessionUpdate"`
					MessageID string `json:"messageId"`
					Content   struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		_ = json.Unmarshal(a, &m)
		u := m.Params.Update
		switch {
		case everything:
			assert.Fail(t, "the agent's line did not reach the client unchanged", "%s", clipQ(a))
		case m.Method != "session/update":
			assert.Fail(t, fmt.Sprintf("the agent's %q message did not reach the client unchanged", m.Method), "%s", clipQ(a))
		case u.MessageID != "" && strings.HasSuffix(u.Kind, "_chunk") &&
			!(mode.capable && u.Kind == "user_message_chunk" && strings.HasPrefix(u.Content.Text, "This session is being continued")):
			assert.Fail(t, "model prose did not reach the client unchanged", "%s", clipQ(a))
		}
	}

	// The compactions the client holds.
	expected := want.cmps
	if !mode.capable && want.nocap != nil {
		expected = *want.nocap
	}
	if !mode.capable && len(mode.opts) == 0 && !run.agentNative {
		// The agent's own text forms reach such a client as they came.
		expected = nil
	}
	got := clientCompactions(run.reducer, mode.capable)
	var gotS, wantS []string
	for _, c := range got {
		gotS = append(gotS, c.status)
		ids = append(ids, strings.TrimPrefix(c.id, "compact-"))
	}
	for _, c := range expected {
		s := c.status
		if !mode.capable && s == "cancelled" {
			s = "failed" // a tool call has no cancelled status
		}
		wantS = append(wantS, s)
	}
	require.Equal(t, strings.Join(wantS, ","), strings.Join(gotS, ","), "the compactions the client holds")
	for i, c := range expected {
		g := got[i]
		if c.err != "" {
			assert.Contains(t, g.err, c.err, "compaction %d: error", i)
		}
		if !mode.capable && c.status == "cancelled" {
			assert.Contains(t, g.err, "cancelled", "compaction %d: how a cancel reads", i)
		}
	}

	// What the agent reported reaches the record (Claude's rawOutput,
	// Qwen's token counts) whatever the client.
	if facts := reportedFacts(run.agentLines); facts != nil && len(got) > 0 && (mode.capable || len(mode.opts) > 0) {
		rec := got[len(got)-1].record
		for k, v := range facts {
			val := rec[k]
			if k == "source.count" {
				src, _ := rec["source"].(map[string]any)
				val = src["count"]
			}
			if f, ok := val.(float64); ok {
				val = int64(f)
			}
			assert.Equal(t, fmt.Sprint(v), fmt.Sprint(val), "record %s (record %v)", k, rec)
		}
	}
	// Nothing about compaction reaches the client outside a turn (or a
	// session/load's replay).
	for _, line := range outsideTurns(run) {
		assert.Fail(t, "the client received a compaction line outside a turn", "%s", clipQ(line))
	}
	// Kimi's /compact reports after its turn: the client gets it when the
	// next turn begins, terminal-first, before anything else of that turn.
	if scenario == "compact-then-hello" && len(expected) > 0 {
		checkDeliveredAtNextTurn(t, run, got)
	}
	// The continuation message's framing never reaches a capable client,
	// nor, under the default summary policy, the summary the proxy reads
	// from it (a compaction the agent replays itself keeps its own).
	if mode.capable && scenario == "load" && strings.HasPrefix(agentDir, "claude-") && sentContinuation(run.agentLines) {
		for _, line := range run.received {
			assert.False(t, bytes.Contains(line, []byte("read the full transcript at")), "the continuation's model-facing text reached the client: %s", clipQ(line))
			assert.False(t, bytes.Contains(line, []byte("This session is being continued")), "the continuation's model-facing text reached the client: %s", clipQ(line))
		}
		if len(got) > 0 {
			assert.False(t, got[0].summary, "the continuation's compaction carries a summary under the default summary policy")
		}
	}
	return ids
}

// sentContinuation reports whether the agent replayed Claude's
// continuation message.
func sentContinuation(agentLines [][]byte) bool {
	for _, a := range agentLines {
		if bytes.Contains(a, []byte(`"text":"This session is being continued`)) {
			return true
		}
	}
	return false
}

func joinLines(ls [][]byte) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(strings.TrimRight(clipQ(l), "\n"))
		b.WriteByte('\n')
	}
	return b.String()
}

// seenCompaction is a compaction the client holds.
type seenCompaction struct {
	id, status, err string
	summary         bool
	record          map[string]any
}

// clientCompactions lists the compactions in the client's timelines: the
// standard entities for a capable client, the "Compact conversation" tool
// calls (the agent's own or a fallback's) for one without the capability.
func clientCompactions(r *conformance.Reducer, capable bool) []seenCompaction {
	var out []seenCompaction
	for _, sid := range r.Sessions() {
		for _, it := range r.Timeline(sid) {
			switch {
			case capable && it.Kind == conformance.KindCompaction:
				c := seenCompaction{id: it.ID, status: it.Status, summary: len(it.Summary) > 0}
				if it.Error != nil {
					c.err = *it.Error
				}
				if raw, ok := it.Meta["acpcompact/record"]; ok {
					_ = json.Unmarshal(raw, &c.record)
				}
				out = append(out, c)
			case !capable && it.Kind == "tool_call" && (it.Text == "Compact conversation" || strings.HasPrefix(it.ID, "compact-")):
				c := seenCompaction{id: it.ID, status: it.Status}
				var u struct {
					Content []struct {
						Content struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"content"`
					Meta map[string]json.RawMessage `json:"_meta"`
				}
				_ = json.Unmarshal(it.Raw, &u)
				for _, ct := range u.Content {
					c.err += ct.Content.Text
				}
				if raw, ok := u.Meta["acpcompact/record"]; ok {
					_ = json.Unmarshal(raw, &c.record)
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// claudeFacts is what Claude reports of a compaction, in a tool call's
// rawOutput or, to a JetBrains AIR client, in
// _meta.jetbrains.air.contextCompaction.
type claudeFacts struct {
	Trigger    string `json:"trigger"`
	PreTokens  int64  `json:"preTokens"`
	PostTokens int64  `json:"postTokens"`
	DurationMs *int64 `json:"durationMs"`
}

// record is what the compaction's record must carry of f.
func (f *claudeFacts) record() map[string]any {
	trigger := f.Trigger
	if trigger == "automatic" {
		trigger = "auto"
	}
	r := map[string]any{"trigger": trigger, "tokensBefore": f.PreTokens, "tokensAfter": f.PostTokens}
	if f.DurationMs != nil {
		r["durationMs"] = *f.DurationMs
	}
	return r
}

// reportedFacts is what the agent's lines report about the last
// compaction that the record must carry: Claude's rawOutput (or, to a
// JetBrains AIR client, its _meta.jetbrains.air.contextCompaction), Qwen's
// token counts.
func reportedFacts(agentLines [][]byte) map[string]any {
	var facts map[string]any
	for _, a := range agentLines {
		var m struct {
			Params struct {
				Update struct {
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
					RawOutput *claudeFacts `json:"rawOutput"`
					Meta      struct {
						CC *struct {
							Phase              string `json:"phase"`
							OriginalTokenCount int64  `json:"originalTokenCount"`
							NewTokenCount      int64  `json:"newTokenCount"`
						} `json:"contextCompression"`
						// What Claude ACP sends a JetBrains AIR client in
						// place of rawOutput.
						JetBrains struct {
							Air struct {
								CC *claudeFacts `json:"contextCompaction"`
							} `json:"air"`
						} `json:"jetbrains"`
					} `json:"_meta"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(a, &m) != nil {
			continue
		}
		u := m.Params.Update
		for _, cf := range []*claudeFacts{u.RawOutput, u.Meta.JetBrains.Air.CC} {
			if cf != nil && cf.Trigger != "" {
				facts = cf.record()
			}
		}
		if cc := u.Meta.CC; cc != nil && cc.Phase == "done" {
			facts = map[string]any{"tokensBefore": cc.OriginalTokenCount, "tokensAfter": cc.NewTokenCount}
		}
		if f := textFacts(u.Content.Text); f != nil {
			facts = f
		}
	}
	return facts
}

// textFacts reads the facts of the texts that carry them: Kimi Code's
// "Compaction completed.\n- Messages compacted: N\n- Tokens before: A\n-
// Tokens after: B" and Copilot CLI's "Compacted conversation history and
// removed N message(s) and M tokens.".
func textFacts(text string) map[string]any {
	num := func(s string) int64 {
		n, _ := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 10, 64)
		return n
	}
	if rest, ok := strings.CutPrefix(text, "Compaction completed.\n"); ok {
		f := map[string]any{}
		for _, l := range strings.Split(rest, "\n") {
			k, v, _ := strings.Cut(l, ": ")
			switch k {
			case "- Messages compacted":
				f["source.count"] = num(v)
			case "- Tokens before":
				f["tokensBefore"] = num(v)
			case "- Tokens after":
				f["tokensAfter"] = num(v)
			}
		}
		return f
	}
	if rest, ok := strings.CutPrefix(text, "Compacted conversation history and removed "); ok {
		n, _, _ := strings.Cut(rest, " ")
		return map[string]any{"trigger": "manual", "source.count": num(n)}
	}
	return nil
}

// outsideTurns lists the compaction lines the client received while none
// of its session's turns or replays was under way: compaction updates and
// summary chunks, and the tool calls and markers the proxy made (the
// agent's own legacy lines pass as they come to a client that keeps them).
func outsideTurns(run *peerRun) [][]byte {
	agentSent := map[string]bool{}
	for _, a := range run.agentLines {
		agentSent[string(a)] = true
	}
	type request struct{ sid string }
	pending := map[string]request{} // request id -> a prompt or load of a session
	busy := map[string]int{}        // session -> prompts and loads under way
	var out [][]byte
	for _, ev := range run.events {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					Kind       string                     `json:"sessionUpdate"`
					ToolCallID string                     `json:"toolCallId"`
					Title      string                     `json:"title"`
					Meta       map[string]json.RawMessage `json:"_meta"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(ev.raw, &m) != nil {
			continue
		}
		id := string(m.ID)
		if ev.fromClient {
			if (m.Method == "session/prompt" || m.Method == "session/load") && id != "" {
				pending[id] = request{m.Params.SessionID}
				busy[m.Params.SessionID]++
			}
			continue
		}
		if m.Method == "" {
			if r, ok := pending[id]; ok {
				delete(pending, id)
				busy[r.sid]--
			}
			continue
		}
		u := m.Params.Update
		made := !agentSent[string(bytes.TrimSuffix(ev.raw, []byte("\n")))]
		compaction := u.Kind == "compaction_update" || u.Kind == "compaction_summary_chunk" ||
			(made && (u.Kind == "tool_call" || u.Kind == "tool_call_update")) ||
			(made && u.Kind == "session_info_update" && u.Meta != nil)
		if m.Method == "session/update" && compaction && busy[m.Params.SessionID] == 0 {
			out = append(out, ev.raw)
		}
	}
	return out
}

// checkDeliveredAtNextTurn checks that the compaction Kimi reported after
// a turn reaches the client as the first line of the session's next turn,
// in one terminal update, its first (terminal-first), with its record.
func checkDeliveredAtNextTurn(t *testing.T, run *peerRun, got []seenCompaction) {
	t.Helper()
	lastPrompt := -1
	for i, ev := range run.events {
		if ev.fromClient && bytes.Contains(ev.raw, []byte(`"session/prompt"`)) {
			lastPrompt = i
		}
	}
	require.GreaterOrEqual(t, lastPrompt, 0, "no prompt")
	require.Less(t, lastPrompt+1, len(run.events), "no line after the last prompt")
	first := run.events[lastPrompt+1].raw
	assert.True(t, bytes.Contains(first, []byte(`"completed"`)), "the next turn begins with %s, want the held compaction, completed", clipQ(first))
	assert.True(t, bytes.Contains(first, []byte(`"compaction_update"`)) || bytes.Contains(first, []byte(`"Compact conversation"`)),
		"the next turn begins with %s, want the held compaction (an update or its tool call)", clipQ(first))
	id := ""
	if len(got) > 0 {
		id = got[0].id
	}
	for _, ev := range run.events[:lastPrompt+1] {
		if !ev.fromClient && id != "" {
			assert.False(t, bytes.Contains(ev.raw, []byte(id)), "the client saw the held compaction before the next turn: %s", clipQ(ev.raw))
		}
	}
	if len(got) > 0 {
		assert.NotNil(t, got[0].record, "the held compaction carries no record")
	}
}
