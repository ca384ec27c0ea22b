package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// page is a parsed `check --html` page.
type page struct{ root *html.Node }

func parsePage(t *testing.T, b []byte) page {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(b))
	require.NoError(t, err, "html.Parse")
	return page{root}
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasClass(n *html.Node, class string) bool {
	c, _ := attr(n, "class")
	return slices.Contains(strings.Fields(c), class)
}

// all returns the elements under n, in document order, that match.
func all(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

// rows returns the timeline rows of kind (all kinds for "").
func (p page) rows(kind string) []*html.Node {
	return all(p.root, func(n *html.Node) bool {
		k, _ := attr(n, "data-kind")
		return n.Data == "li" && hasClass(n, "row") && (kind == "" || k == kind)
	})
}

// row returns the one row of kind whose data-id is id.
func (p page) row(t *testing.T, kind, id string) *html.Node {
	t.Helper()
	var found []*html.Node
	for _, r := range p.rows(kind) {
		if v, _ := attr(r, "data-id"); v == id {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "rows of kind %s with id %q", kind, id)
	return found[0]
}

// field returns the text of a row's field (updates, summary-field, record,
// known-loss), "" when it has none.
func field(n *html.Node, class string) string {
	var b strings.Builder
	for _, f := range all(n, func(n *html.Node) bool { return n.Data == "div" && hasClass(n, "field") && hasClass(n, class) }) {
		b.WriteString(text(f))
	}
	return b.String()
}

func updates(n *html.Node) []string {
	var out []string
	for _, li := range all(n, func(n *html.Node) bool { return n.Data == "li" && n.Parent != nil && hasClass(n.Parent, "updates") }) {
		out = append(out, text(li))
	}
	return out
}

// violations returns the violation elements in the timeline (not the list
// at the top), as "LINE rule".
func (p page) violations() []string {
	var out []string
	for _, v := range all(p.root, func(n *html.Node) bool { return hasClass(n, "violation") }) {
		line, _ := attr(v, "data-line")
		rule, _ := attr(v, "data-rule")
		out = append(out, line+" "+rule)
	}
	return out
}

// selfContained asserts what every page must be: nothing fetched, no
// script, every link an in-page anchor with exactly one target, which is
// about the line it names.
func (p page) selfContained(t *testing.T) {
	t.Helper()
	ids := map[string]*html.Node{}
	for _, n := range all(p.root, func(*html.Node) bool { return true }) {
		switch n.Data {
		case "script", "img", "iframe", "object", "embed", "link", "base", "form", "video", "audio", "source":
			assert.Fail(t, "an element that runs or fetches", "<%s>", n.Data)
		case "style":
			css := text(n)
			assert.NotContains(t, css, "url(", "the stylesheet fetches")
			assert.NotContains(t, css, "@import", "the stylesheet fetches")
		}
		for _, a := range n.Attr {
			switch {
			case a.Key == "src" || a.Key == "srcset" || a.Key == "action" || a.Key == "style" || strings.HasPrefix(a.Key, "on"):
				assert.Fail(t, "an attribute that fetches or runs", "<%s %s=%q>", n.Data, a.Key, a.Val)
			case a.Key == "id":
				assert.NotContains(t, ids, a.Val, "id %q twice", a.Val)
				ids[a.Val] = n
			}
		}
	}
	csp := all(p.root, func(n *html.Node) bool {
		v, _ := attr(n, "http-equiv")
		return n.Data == "meta" && v == "Content-Security-Policy"
	})
	if assert.Len(t, csp, 1, "the Content-Security-Policy meta") {
		c, _ := attr(csp[0], "content")
		assert.Contains(t, c, "default-src 'none'", "the policy forbids fetches")
	}
	for _, a := range all(p.root, func(n *html.Node) bool { _, ok := attr(n, "href"); return ok }) {
		href, _ := attr(a, "href")
		target, ok := strings.CutPrefix(href, "#")
		if !assert.True(t, ok, "href %q is not an in-page anchor", href) {
			continue
		}
		n, ok := ids[target]
		if assert.True(t, ok, "href %q has no target", href) {
			line, _ := attr(n, "data-line")
			assert.Equal(t, strings.TrimPrefix(target, "L"), line, "the target of %q is about another line", href)
		}
	}
}

// checkHTML runs check --html on a file and returns the result and the page.
func checkHTML(t *testing.T, file string, args ...string) (checkResult, page, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "timeline.html")
	r := checkRun(t, "", append(append([]string{"--html", out}, args...), file)...)
	b, err := os.ReadFile(out)
	require.NoError(t, err, "the page was not written: %+v", r)
	p := parsePage(t, b)
	p.selfContained(t)
	return r, p, b
}

func TestCheckHTMLShowsARecordedClaudeCompactionWithItsViolation(t *testing.T) {
	file := filepath.Join("..", "..", "test", "peers", "testdata", "claude-acp-0.101.0", "compact-cap.jsonl")
	plain := checkRun(t, "", file)
	r, p, _ := checkHTML(t, file)
	assert.Equal(t, plain, r, "--html changes nothing check prints or returns")
	require.Equal(t, 1, r.code, "Claude ACP 0.101.0 sends a second terminal update")

	facts := text(all(p.root, func(n *html.Node) bool { return n.Data == "dl" && hasClass(n, "handshake") })[0])
	assert.Contains(t, facts, "v1 (the client asked 1, the agent answered 1, line 4)")
	assert.Contains(t, facts, "advertised: clientCapabilities.session.compaction = {}")
	assert.Contains(t, facts, "@agentclientprotocol/claude-agent-acp 0.101.0")

	var msgs []string
	for _, r := range p.rows("") {
		k, _ := attr(r, "data-kind")
		if k == "user_message" || k == "agent_message" || k == "compaction" {
			msgs = append(msgs, k)
		}
	}
	assert.Equal(t, []string{"user_message", "agent_message", "agent_message", "user_message", "compaction"}, msgs, "the rows, in order")

	c := p.row(t, "compaction", "336610cf-a34a-454e-b2d8-fd180e2d9e7e")
	status, _ := attr(c, "data-status")
	assert.Equal(t, "completed", status, "the compaction's final status")
	assert.Equal(t, []string{"in_progress · line 17", "completed (summary) · line 19", "completed · line 20"}, updates(c), "its update history")
	assert.Contains(t, field(c, "summary-field"), "MOCK SUMMARY: the user said hello and the assistant greeted them.")
	assert.Contains(t, field(c, "record"), `none: no _meta["acpcompact/record"]`)
	assert.Contains(t, field(c, "known-loss"), "1 loss (3 history items audited)")
	assert.Contains(t, field(c, "known-loss"), "https://code.claude.com/docs/en/auto-mode-classifier-billing")

	assert.Equal(t, []string{"20 terminal"}, p.violations(), "the one violation, once")
	v := all(c, func(n *html.Node) bool { return hasClass(n, "violation") })
	require.Len(t, v, 1, "the violation is shown in the row its line updated")
	id, _ := attr(v[0], "id")
	assert.Equal(t, "L20", id, "anchored at its line")
	assert.Contains(t, text(v[0]), `second terminal: compaction "336610cf-a34a-454e-b2d8-fd180e2d9e7e"`)
	top := all(p.root, func(n *html.Node) bool { id, _ := attr(n, "id"); return id == "violations" })
	require.Len(t, top, 1, "the list of violations at the top")
	assert.Contains(t, text(top[0]), "line 20 terminal")
}

func TestCheckHTMLShowsAKimiLoadReplayingAContinuationSummary(t *testing.T) {
	file := filepath.Join("..", "..", "test", "peers", "testdata", "kimi-code-2.1.0", "load-cap.jsonl")
	r, p, _ := checkHTML(t, file)
	require.Equal(t, 0, r.code, "%+v", r)
	verdict := all(p.root, func(n *html.Node) bool { id, _ := attr(n, "id"); return id == "verdict" })
	require.Len(t, verdict, 1)
	assert.Equal(t, file+": ok, no violations", text(verdict[0]))
	assert.Empty(t, p.violations())

	replay := p.rows("replay")
	require.Len(t, replay, 2, "the replay's start and end")
	assert.Contains(t, text(replay[0]), "session/load: the agent replays the session's history")
	users := p.rows("user_message")
	require.Len(t, users, 1, "the replayed chunks, joined as a client joins them")
	assert.True(t, hasClass(users[0], "replayed"), "the row is marked replayed")
	assert.Contains(t, text(users[0]), "Say hello.The conversation so far has been compacted")
	assert.Contains(t, field(users[0], "known-loss"), "a continuation message: the summary that replaced the history; nothing lost (1 history item audited)")
}

func TestCheckHTMLPlacesEachViolationAtItsLine(t *testing.T) {
	file := filepath.Join("..", "..", "conformance", "testdata", "defect_terminal_after_turn.jsonl")
	r, p, _ := checkHTML(t, file)
	require.Equal(t, 1, r.code)
	assert.Equal(t, []string{"9 after-turn", "7 settlement"}, p.violations(),
		"in the timeline's order: the compaction's row (line 6, updated at line 9) comes before the turn's end (line 7)")

	turns := p.rows("turn")
	require.Len(t, turns, 1)
	assert.Contains(t, text(turns[0]), "turn ends: end_turn")
	assert.Contains(t, text(turns[0]), `compaction "cmp_1" is still "in_progress" when the agent answered session/prompt id 2`,
		"the settlement violation is at the turn's end, line 7")

	c := p.row(t, "compaction", "cmp_1")
	status, _ := attr(c, "data-status")
	assert.Equal(t, "completed", status, "updated in place by the late terminal")
	assert.Equal(t, []string{"in_progress · line 6", "completed · line 9"}, updates(c))
	assert.Contains(t, text(c), "arrived with no turn open", "the after-turn violation is at the row line 9 updated")
	assert.Contains(t, field(c, "known-loss"), "not audited: it completed without a summary")
}

func TestCheckHTMLShowsTheDemosRecordsFallbacksAndReplays(t *testing.T) {
	d := demoRun(t, "--wire")
	require.Equal(t, 0, d.code, "demo --wire: %s", d.stderr)
	file := filepath.Join(t.TempDir(), "demo.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(d.stdout), 0o600))
	r, p, _ := checkHTML(t, file, "--schema=off")
	require.Equal(t, 0, r.code, "%+v", r)

	conns := all(p.root, func(n *html.Node) bool { return n.Data == "section" && hasClass(n, "connection") })
	require.Len(t, conns, 4, "client A live and reloaded, client B live and reloaded")
	assert.Contains(t, text(conns[0]), "an object: compaction_update and compaction_summary_chunk may be sent")
	assert.Contains(t, text(conns[2]), "not advertised (no clientCapabilities.session.compaction): the agent owes a fallback")

	live := page{conns[0]}
	cmp1 := live.row(t, "compaction", "cmp_1")
	assert.Equal(t, []string{"in_progress · line 14", "4 chunks · lines 15–18", "completed (summary) · line 19"}, updates(cmp1))
	assert.Contains(t, field(cmp1, "summary-field"), "## Retained context")
	assert.Contains(t, field(cmp1, "record"), "manual, ")
	assert.Contains(t, field(cmp1, "record"), "by scenario-summarizer")
	assert.Contains(t, field(cmp1, "record"), `"trigger": "manual"`, "the record itself")
	// The demo's first summary cuts its quote of a request short: the
	// timeline's audit finds the URL it lost, as the kit's did for the
	// record.
	assert.Contains(t, field(cmp1, "known-loss"), "https://agentclientprotocol.com/rfds/session-compaction")
	assert.Contains(t, field(cmp1, "record"), "knownLoss", "the record names it too")
	cmp2 := live.row(t, "compaction", "cmp_2")
	assert.Contains(t, text(cmp2), "summary request failed")
	assert.Contains(t, updates(cmp2)[2], "failed (summary cleared, error)")
	status, _ := attr(live.row(t, "compaction", "cmp_3"), "data-status")
	assert.Equal(t, "cancelled", status)

	reloaded := page{conns[1]}
	r1 := reloaded.row(t, "compaction", "cmp_1")
	assert.True(t, hasClass(r1, "replayed"))
	assert.Len(t, updates(r1), 1, "replayed terminal-first: one update")

	fb := page{conns[2]}
	tool := fb.row(t, "tool_call", "compact-cmp_1")
	status, _ = attr(tool, "data-status")
	assert.Equal(t, "completed", status, "client B's fallback tool call")
	assert.Contains(t, text(tool), "Compact conversation")
}

func TestCheckHTMLShowsFallbackMarkersUpdatedInPlace(t *testing.T) {
	file := filepath.Join("..", "..", "conformance", "testdata", "clean_v1_fallback_marker.jsonl")
	r, p, _ := checkHTML(t, file)
	require.Equal(t, 0, r.code, "%+v", r)
	m := p.row(t, "marker", "cmp_1")
	status, _ := attr(m, "data-status")
	assert.Equal(t, "completed", status)
	assert.Equal(t, []string{"started · line 11", "completed · line 13"}, updates(m))
	assert.Contains(t, text(m), `session_info_update _meta["acpcompact/compaction"]`)
	status, _ = attr(p.row(t, "marker", "msg_x"), "data-status")
	assert.Equal(t, "failed", status, "opencode's marker")
}

// hostile is a transcript whose every string tries to become markup, a
// script or a fetch.
const hostile = `client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{"x":"</dd><script>alert(1)</script>"}}},"clientInfo":{"name":"<img src=https://evil.example/c.png>","version":"1"}}}
agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"<link rel=stylesheet href=https://evil.example/s.css>","version":"1"}}}
client {"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s\"><script>alert(2)</script>","prompt":[{"type":"text","text":"<iframe src=https://evil.example/></iframe>"}]}}
agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\"><script>alert(2)</script>","update":{"sessionUpdate":"compaction_update","compactionId":"c\" onmouseover=\"alert(3)","status":"in_progress"}}}
agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\"><script>alert(2)</script>","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"c\" onmouseover=\"alert(3)","content":{"type":"text","text":"<style>@import url(https://evil.example/x.css)</style> see https://evil.example/doc"}}}}
agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\"><script>alert(2)</script>","update":{"sessionUpdate":"compaction_update","compactionId":"c\" onmouseover=\"alert(3)","status":"</span><a href=\"https://evil.example\">x</a>","_meta":{"acpcompact/record":{"trigger":"<b>manual</b>"}}}}}
agent {"jsonrpc":"2.0","id":1,"result":{"stopReason":"<script src=https://evil.example/j.js></script>"}}
`

func TestCheckHTMLEscapesTheTranscriptAndFetchesNothing(t *testing.T) {
	file := checkWriteFile(t, hostile)
	r, p, b := checkHTML(t, file)
	assert.Equal(t, 1, r.code, "the compaction never settles: %+v", r)
	assert.NotContains(t, string(b), "<script", "a script element, escaped or not")
	assert.NotContains(t, string(b), "<iframe")
	c := p.row(t, "compaction", `c" onmouseover="alert(3)`)
	status, _ := attr(c, "data-status")
	assert.Equal(t, `</span><a href="https://evil.example">x</a>`, status, "the status, as text")
	assert.Contains(t, field(c, "summary-field"), "<style>@import url(https://evil.example/x.css)</style> see https://evil.example/doc", "the summary, as text")
	assert.Contains(t, text(p.root), "<iframe src=https://evil.example/></iframe>", "the prompt, as text")
	assert.Contains(t, text(p.root), "<img src=https://evil.example/c.png>", "the client's name, as text")
}

func TestCheckHTMLToStdoutMovesTheReportToStderr(t *testing.T) {
	file := filepath.Join("..", "..", "conformance", "testdata", "defect_terminal_after_turn.jsonl")
	plain := checkRun(t, "", file)
	r := checkRun(t, "", "--html", "-", file)
	assert.Equal(t, 1, r.code, "the exit code is check's")
	assert.Equal(t, plain.stdout, r.stderr, "the report, on stderr")
	require.True(t, strings.HasPrefix(r.stdout, "<!DOCTYPE html>"), "the page, on stdout: %.200q", r.stdout)
	parsePage(t, []byte(r.stdout)).selfContained(t)

	// Both streams at once: the transcript on stdin, the page on stdout.
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	r = checkRun(t, string(src), "-", "--html", "-")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "<stdin>:7: settlement: ")
	assert.Contains(t, r.stdout, "<h1>&lt;stdin&gt;</h1>")
}

func TestCheckHTMLWriteAndReadErrorsExitTwo(t *testing.T) {
	file := filepath.Join("..", "..", "conformance", "testdata", "clean_v1_capability.jsonl")
	r := checkRun(t, "", "--html", filepath.Join(t.TempDir(), "no-such-dir", "t.html"), file)
	assert.Equal(t, 2, r.code, "an unwritable page is an I/O error: %+v", r)
	assert.Contains(t, r.stderr, "acpcompact check: --html: ")

	out := filepath.Join(t.TempDir(), "t.html")
	r = checkRun(t, "", "--html", out, filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.Equal(t, 2, r.code)
	assert.NoFileExists(t, out, "no page for a transcript that could not be read")

	r = checkRun(t, "", "--html", out, file)
	assert.Equal(t, 0, r.code, "%+v", r)
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the page and no temporary file beside it")
	info, err := entries[0].Info()
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm(), "a page anyone may read")
}

// TestTimelineChecksAsCheckTranscript holds the timeline's check to the
// checker's own over every transcript the project keeps, and every page it
// makes of them to what a page must be: self-contained, each violation
// shown once, where its link points.
func TestTimelineChecksAsCheckTranscript(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "conformance", "testdata", "*.jsonl"))
	require.NoError(t, err)
	peers, err := filepath.Glob(filepath.Join("..", "..", "test", "peers", "testdata", "*", "*.jsonl"))
	require.NoError(t, err)
	audits, err := filepath.Glob(filepath.Join("..", "..", "audit", "testdata", "*", "*.jsonl"))
	require.NoError(t, err)
	files = append(append(files, peers...), audits...)
	require.Greater(t, len(files), 100, "the recorded transcripts")
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		want, err := conformance.CheckTranscript(bytes.NewReader(src))
		require.NoError(t, err)
		tl := newTimeline()
		got, err := tl.check(bytes.NewReader(src))
		require.NoError(t, err)
		if !assert.Equal(t, want, got, "%s: the violations", f) {
			continue
		}
		var b bytes.Buffer
		require.NoError(t, tl.writeHTML(&b, f, got), f)
		p := parsePage(t, b.Bytes())
		p.selfContained(t)
		var lines []string
		for _, v := range got {
			lines = append(lines, strconv.Itoa(v.Line)+" "+string(v.Rule))
		}
		assert.ElementsMatch(t, lines, p.violations(), "%s: each violation once", f)
	}
}

func TestCheckHTMLStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "t.html")
	var stdout, stderr bytes.Buffer
	code := runCheckWith(ctx, []string{"--schema=off", "--html", out, "-"}, strings.NewReader(checkCleanTranscript), &stdout, &stderr,
		func() (conformance.Option, error) { return nil, nil })
	assert.Equal(t, 2, code, "stderr: %s", stderr.String())
	assert.NoFileExists(t, out)
}

func TestCheckHTMLReadsMalformedMembersAsAClientDoes(t *testing.T) {
	// An error code that is not an integer, a usage that is not a number
	// and a messageId that is not a string: each row is still shown, the
	// member read as omitted.
	file := checkWriteFile(t, checkInitV1+`agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":7,"content":{"type":"text","text":"still shown"}}}}
agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"usage_update","used":"many","size":10}}}
agent {"jsonrpc":"2.0","id":1,"error":{"code":-32603.5,"message":"boom"}}
`)
	_, p, _ := checkHTML(t, file, "--schema=off")
	agent := p.rows("agent_message")
	require.Len(t, agent, 1)
	assert.Contains(t, text(agent[0]), "still shown")
	usage := p.rows("usage")
	require.Len(t, usage, 1)
	assert.Contains(t, text(usage[0]), "0 of 10 tokens in use")
	turn := p.rows("turn")
	require.Len(t, turn, 1)
	assert.Contains(t, text(turn[0]), "turn ends with an error: boom")
}
