package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"golang.org/x/sync/errgroup"
)

const demoUsage = `usage: acpcompact demo [--wire] [--fallback NAME] [--verbose]

Runs the scenario agent (the one examples/scenario-agent serves) in this process against two
ACP v1 clients, one that advertises clientCapabilities.session.compaction and
one that does not. Each plays the same script (a normal prompt, /compact,
/compact fail, a /compact slow it cancels after a couple of chunks) with the
agent keeping its sessions in a temporary state directory. Then that agent is
stopped, a new agent process starts on the same directory (this program,
re-executed as 'acpcompact demo-agent'), and the client loads the session
from it. The timeline each client would show is printed: one row per message
or compaction, each compaction updated in place. No network, API key or model
is needed.

--wire prints the JSON-RPC messages instead, in the transcript format that
'acpcompact check' reads:

  acpcompact demo --wire > t.jsonl && acpcompact check t.jsonl

`

// demoScript is what each client sends; demoSlow is cancelled mid-stream.
var demoScript = []string{"hello, scenario agent", demoAudited, "/compact", "/compact fail", demoSlow}

// demoAudited is the request the first compaction's summary quotes cut
// short: the audit of that summary names the URL it lost.
const demoAudited = "please check docs/records.md against https://agentclientprotocol.com/rfds/session-compaction"

const (
	demoSlow = "/compact slow"
	// demoChunksBeforeCancel is how many summary chunks the capable client
	// waits for before it sends session/cancel.
	demoChunksBeforeCancel = 2
	demoCwd                = "/home/user/project"
	demoTimeout            = 30 * time.Second // a hang guard; the demo takes about a second
)

// demoClient is one of the two clients the demo compares.
type demoClient struct {
	name    string
	capable bool
}

// demoConn is one finished client connection and what to call it.
type demoConn struct {
	title   string // in the transcript
	heading string // over the timeline
	cl      *client.Client
	sid     string
}

// runDemo implements "acpcompact demo"; args exclude the subcommand name.
func runDemo(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", demoUsage, stderr)
	wire := fs.Bool("wire", false, "print the raw JSON-RPC transcript (client/agent lines) instead of the timeline")
	fb := fs.String("fallback", scenario.DefaultFallback,
		"the form a client without the capability gets: "+strings.Join(fallback.Names(), ", "))
	verbose := fs.Bool("verbose", false, "log the agent's and agentkit's events to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "acpcompact demo: unexpected arguments %q\n", fs.Args())
		return 2
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if _, err := fallback.ByName(*fb); err != nil {
		fmt.Fprintf(stderr, "acpcompact demo: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	d := demo{cfg: scenario.Config{Fallback: *fb, Logger: logger, Audit: true}, verbose: *verbose, stderr: stderr}

	clients := []demoClient{
		{name: "A", capable: true},
		{name: "B", capable: false},
	}
	if !*wire {
		fmt.Fprintf(stdout, "acpcompact demo: the scenario agent, in process, and two ACP v1 clients.\n")
		fmt.Fprintf(stdout, "Client A advertises clientCapabilities.session.compaction and gets compaction_update /\n")
		fmt.Fprintf(stdout, "compaction_summary_chunk; client B does not, and gets the %q fallback instead.\n", *fb)
		fmt.Fprintf(stdout, "The agent keeps each session in a file of a temporary state directory; after the\n")
		fmt.Fprintf(stdout, "live session it is stopped, and a new agent process loads the session from the file.\n")
	}
	for _, dc := range clients {
		conns, err := d.play(ctx, dc)
		if err != nil {
			fmt.Fprintf(stderr, "acpcompact demo: client %s: %v\n", dc.name, err)
			return 1
		}
		if *wire {
			err = demoWriteWire(stdout, conns)
		} else {
			err = demoWriteTimelines(stdout, dc, *fb, conns)
		}
		if err != nil {
			fmt.Fprintf(stderr, "acpcompact demo: %v\n", err)
			return 1
		}
	}
	if !*wire {
		fmt.Fprintf(stdout, "\nSee the messages themselves with 'acpcompact demo --wire'; check them with\n'acpcompact demo --wire > t.jsonl && acpcompact check t.jsonl'.\n")
	}
	return 0
}

// demo runs the scenario agent for the demo's clients.
type demo struct {
	cfg     scenario.Config // with the temporary state directory
	verbose bool
	stderr  io.Writer
}

// play runs one client against the agent: the script on a live connection
// to an agent in this process, which is then stopped; then session/load on
// a new agent process that reads the session from the state directory, a
// temporary one, removed before anything is printed.
func (d demo) play(ctx context.Context, dc demoClient) ([]demoConn, error) {
	dir, err := os.MkdirTemp("", "acpcompact-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d.cfg.StateDir = dir
	agent, err := scenario.New(d.cfg)
	if err != nil {
		return nil, err
	}
	var sid string
	live, err := demoServe(ctx, agent, dc.capable, func(ctx context.Context, cl *client.Client) error {
		var err error
		if sid, err = cl.NewSession(ctx, demoCwd); err != nil {
			return fmt.Errorf("session/new: %w", err)
		}
		for _, p := range demoScript {
			if err := demoPrompt(ctx, cl, sid, p, dc.capable); err != nil {
				return fmt.Errorf("prompt %q: %w", p, err)
			}
		}
		return nil
	})
	// The agent stops, failed or not: its files are closed before the
	// state directory is removed.
	if cerr := agent.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("stopping the agent: %w", cerr)
	}
	if err != nil {
		return nil, err
	}

	loaded, how, err := d.reload(ctx, dc.capable, sid)
	if err != nil {
		return nil, err
	}
	capability := "with the capability"
	if !dc.capable {
		capability = "without the capability"
	}
	return []demoConn{
		{title: fmt.Sprintf("client %s (v1, %s): live session, the agent in process %d", dc.name, capability, os.Getpid()), cl: live, sid: sid,
			heading: fmt.Sprintf("Live session %s (the agent runs in this process, pid %d)", sid, os.Getpid())},
		{title: fmt.Sprintf("client %s (v1, %s): the agent stopped, session/load in %s", dc.name, capability, how), cl: loaded, sid: sid,
			heading: fmt.Sprintf("After a restart: that agent was stopped; %s reads\n  %s from the state directory, and session/load replays the history", how, sid+".jsonl")},
	}, nil
}

// reload starts a new agent on the state directory and loads sid from it
// (session/load), then stops that agent. The new agent is a new process,
// this program re-executed as "acpcompact demo-agent"; where a process
// cannot be started (or does not initialize), a new agent in this process
// stands in, and how says so.
func (d demo) reload(ctx context.Context, capable bool, sid string) (cl *client.Client, how string, err error) {
	exe, err := os.Executable()
	if err == nil {
		var pid int
		cl, pid, err = d.loadInProcess(ctx, exe, capable, sid)
		if !errors.Is(err, errNoAgentProcess) {
			return cl, fmt.Sprintf("a new agent process (pid %d)", pid), err
		}
	}
	fmt.Fprintf(d.stderr, "acpcompact demo: no new agent process (%v); a new agent in this process loads the session instead\n", err)
	agent, err := scenario.New(d.cfg)
	if err != nil {
		return nil, "", err
	}
	cl, err = demoServe(ctx, agent, capable, func(ctx context.Context, cl *client.Client) error {
		if err := cl.Load(ctx, sid, demoCwd); err != nil {
			return fmt.Errorf("session/load: %w", err)
		}
		return nil
	})
	if cerr := agent.Close(); err == nil {
		err = cerr
	}
	return cl, "a new agent in this process", err
}

// errNoAgentProcess marks a new agent process that could not be started,
// or did not initialize, for reload to fall back to an agent in this
// process.
var errNoAgentProcess = errors.New("cannot start")

// loadInProcess runs exe demo-agent on the state directory, loads sid from
// it and ends its input, upon which it exits. The process and its client
// are one errgroup: the first failure of either ends the other (the
// process is killed when the client fails; the client's calls end when the
// process exits), and is the error returned.
func (d demo) loadInProcess(ctx context.Context, exe string, capable bool, sid string) (*client.Client, int, error) {
	args := []string{demoAgentCommand, "--state-dir", d.cfg.StateDir, "--fallback", d.cfg.Fallback}
	if d.verbose {
		args = append(args, "--verbose")
	}
	g, gctx := errgroup.WithContext(ctx)
	cmd := exec.CommandContext(gctx, exe, args...)
	cmd.Stderr = d.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errNoAgentProcess, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errNoAgentProcess, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errNoAgentProcess, err)
	}
	cl := client.New(gctx, duplex{stdout, stdin})
	var initialized atomic.Bool
	g.Go(func() error {
		// Wait closes stdout: not before the client has read all of it.
		<-cl.Done()
		err := cmd.Wait()
		switch {
		case err != nil && !initialized.Load():
			return fmt.Errorf("%w: the new agent process: %w", errNoAgentProcess, err)
		case err != nil:
			return fmt.Errorf("the new agent process: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		defer stdin.Close() // the end of its input: the agent answers what it read and exits
		if _, err := cl.Initialize(gctx, 1, capable); err != nil {
			return fmt.Errorf("%w: initialize: %w", errNoAgentProcess, err)
		}
		initialized.Store(true)
		if err := cl.Load(gctx, sid, demoCwd); err != nil {
			return fmt.Errorf("session/load: %w", err)
		}
		return nil
	})
	return cl, cmd.Process.Pid, g.Wait()
}

// demoServe serves a new connection of agent over net.Pipe, initializes a
// v1 client on it and runs use, then hangs up. The agent's Serve and the
// client are one errgroup: the first failure ends the other (Serve by the
// group's context, the client's calls likewise) and is the error returned,
// so that neither outlives a failure of the other.
func demoServe(ctx context.Context, agent *scenario.Agent, capable bool, use func(context.Context, *client.Client) error) (*client.Client, error) {
	agentEnd, clientEnd := net.Pipe()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := agent.Serve(gctx, agentEnd); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		return nil
	})
	cl := client.New(gctx, clientEnd)
	g.Go(func() error {
		defer cl.Close() // the hang-up: Serve settles what is open and returns
		if _, err := cl.Initialize(gctx, 1, capable); err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		return use(gctx, cl)
	})
	return cl, g.Wait()
}

// demoPrompt runs one prompt; the slow one is cancelled once a couple of
// chunks (or, without the capability, the fallback's start) arrived.
func demoPrompt(ctx context.Context, cl *client.Client, sid, text string, capable bool) error {
	turn, err := cl.StartPrompt(ctx, sid, text)
	if err != nil {
		return err
	}
	if text == demoSlow {
		chunks := 0
		wait, stop := context.WithTimeout(ctx, 2*time.Second) // the "none" fallback shows nothing to wait for
		_, _ = cl.Wait(wait, turn.From(), func(m client.Message) bool {
			if m.Dir != conformance.FromAgent || m.Method != "session/update" {
				return false
			}
			if !capable {
				return true // the fallback's start form
			}
			if m.Kind == "compaction_summary_chunk" {
				chunks++
			}
			return chunks >= demoChunksBeforeCancel
		})
		stop()
		if err := cl.Cancel(ctx, sid); err != nil {
			return err
		}
	}
	o, err := turn.Wait(ctx)
	if err != nil {
		return err
	}
	if o.Err != nil {
		return o.Err
	}
	return nil
}

// demoWriteWire prints each connection's record as a transcript, headed by
// a comment line.
func demoWriteWire(w io.Writer, conns []demoConn) error {
	for _, c := range conns {
		if _, err := fmt.Fprintf(w, "# %s\n", c.title); err != nil {
			return err
		}
		if err := c.cl.WriteTranscript(w); err != nil {
			return err
		}
	}
	return nil
}

func demoWriteTimelines(w io.Writer, dc demoClient, fb string, conns []demoConn) error {
	var b strings.Builder
	how := "advertises the compaction capability: standard updates"
	if !dc.capable {
		how = fmt.Sprintf("no compaction capability: the %q fallback", fb)
	}
	head := fmt.Sprintf("Client %s  (%s)", dc.name, how)
	fmt.Fprintf(&b, "\n%s\n%s\n", head, strings.Repeat("=", len(head)))
	for i, c := range conns {
		fmt.Fprintf(&b, "\n  %s\n\n", c.heading)
		v := newDemoView(c.cl.Messages(), c.sid, i > 0)
		v.render(&b)
		fmt.Fprintf(&b, "\n  %s\n", demoVerdict(c.cl))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// demoVerdict runs the conformance checker (without the schema, which
// needs the npm package) over a connection's record.
func demoVerdict(cl *client.Client) string {
	var t bytes.Buffer
	_ = cl.WriteTranscript(&t)
	n := len(cl.Messages())
	vs, err := conformance.CheckTranscript(&t)
	switch {
	case err != nil:
		return "conformance check failed: " + err.Error()
	case len(vs) == 0:
		return fmt.Sprintf("conformance checker: %d messages, no violations", n)
	}
	var s []string
	for _, v := range vs {
		s = append(s, v.String())
	}
	return fmt.Sprintf("conformance checker: %d messages, %d violations:\n    %s", n, len(vs), strings.Join(s, "\n    "))
}

// demoView is a session's timeline as the client shows it: the reference
// reducer's items (messages, compactions, tool calls), plus rows a client
// shows from elsewhere, each anchored before the reducer item that came
// after it: the user's own prompts (a v1 client echoes them itself), the
// end of each turn, usage updates and fallback markers (session_info_update
// _meta, which the reducer leaves to the client).
type demoView struct {
	items   []conformance.Item
	extras  []demoExtra
	history map[string]*demoHistory
	replay  bool
}

type demoExtra struct {
	at    int // the number of reducer items before it
	label string
	text  string
	key   string // a marker's entity key, else ""
}

// demoHistory is the sequence of updates an entity received.
type demoHistory struct {
	steps  []string
	chunks int
}

func (h *demoHistory) status(s string) {
	h.flush()
	if n := len(h.steps); n > 0 && strings.HasPrefix(h.steps[n-1], s) {
		// Heartbeats repeat in_progress: count them.
		var k int
		if _, err := fmt.Sscanf(strings.TrimPrefix(h.steps[n-1], s), " x%d", &k); err != nil {
			k = 1
		}
		h.steps[n-1] = fmt.Sprintf("%s x%d", s, k+1)
		return
	}
	h.steps = append(h.steps, s)
}

func (h *demoHistory) chunk() { h.chunks++ }

func (h *demoHistory) flush() {
	switch h.chunks {
	case 0:
		return
	case 1:
		h.steps = append(h.steps, "1 chunk")
	default:
		h.steps = append(h.steps, fmt.Sprintf("%d chunks", h.chunks))
	}
	h.chunks = 0
}

func (h *demoHistory) String() string {
	h.flush()
	return strings.Join(h.steps, ", ")
}

func newDemoView(msgs []client.Message, sid string, replay bool) *demoView {
	v := &demoView{history: map[string]*demoHistory{}, replay: replay}
	red := conformance.NewReducer(1)
	markers := map[string]int{}
	chunks := 0 // summary chunks received since the last prompt
	hist := func(key string) *demoHistory {
		h, ok := v.history[key]
		if !ok {
			h = &demoHistory{}
			v.history[key] = h
		}
		return h
	}
	for _, m := range msgs {
		at := len(red.Timeline(sid))
		switch {
		case m.Dir == conformance.FromClient && m.Method == "session/prompt":
			// A v1 client shows the user's prompt itself; the agent does
			// not echo it. Its own message ID keeps it a row of its own.
			var p struct {
				Prompt []json.RawMessage `json:"prompt"`
			}
			_ = json.Unmarshal(demoParams(m.Raw), &p)
			chunks = 0
			for _, blk := range p.Prompt {
				u, _ := json.Marshal(map[string]any{"sessionUpdate": "user_message_chunk", "messageId": fmt.Sprintf("local-%d", m.Seq), "content": blk})
				_ = red.Apply(sid, u)
			}
		case m.Dir == conformance.FromClient && m.Method == "session/cancel":
			text := "(cancel: session/cancel)"
			if chunks > 0 {
				text = fmt.Sprintf("(cancel: session/cancel, after %d summary chunks)", chunks)
			}
			v.extras = append(v.extras, demoExtra{at: at, label: "you", text: text})
		case m.Dir == conformance.FromAgent && m.Response && m.Method == "session/prompt":
			var r struct {
				StopReason string `json:"stopReason"`
			}
			_ = json.Unmarshal(m.Result, &r)
			text := "turn ends: " + r.StopReason
			if m.Error != nil {
				text = "turn ends with error: " + m.Error.Message
			}
			v.extras = append(v.extras, demoExtra{at: at, text: text})
		case m.Dir == conformance.FromAgent && m.Method == "session/update" && m.SessionID == sid:
			_ = red.ApplyMessage(m.Raw)
			switch m.Kind {
			case "compaction_update":
				hist("compaction\x00" + m.CompactionID).status(m.Status)
			case "compaction_summary_chunk":
				hist("compaction\x00" + m.CompactionID).chunk()
				chunks++
			case "tool_call", "tool_call_update":
				if m.Status != "" {
					hist("tool\x00" + m.ToolCallID).status(m.Status)
				}
			case "usage_update":
				var u struct{ Used, Size int64 }
				_ = json.Unmarshal(m.Update, &u)
				v.extras = append(v.extras, demoExtra{at: at, label: "context", text: fmt.Sprintf("%s of %s tokens in use (usage_update)", demoNum(u.Used), demoNum(u.Size))})
			case "session_info_update":
				key, id, status := demoMarker(m.Update)
				if key == "" {
					break
				}
				hist(key).status(status)
				text := id + "  " + status + "\n" + `session_info_update _meta["` + strings.Split(key, "\x00")[0] + `"]`
				if i, ok := markers[key]; ok {
					v.extras[i].text = text
					break
				}
				markers[key] = len(v.extras)
				v.extras = append(v.extras, demoExtra{at: at, label: "marker", text: text, key: key})
			}
		}
	}
	v.items = red.Timeline(sid)
	return v
}

func demoParams(raw json.RawMessage) json.RawMessage {
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Params
}

// demoMarker reads a fallback marker (acpcompact's or opencode's) from a
// session_info_update.
func demoMarker(update json.RawMessage) (key, id, status string) {
	var u struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(update, &u)
	for _, mk := range []struct{ key, idField string }{
		{fallback.DefaultMarkerKey, "compactionId"},
		{fallback.OpencodeMarkerKey, "messageId"},
	} {
		var val map[string]any
		if raw, ok := u.Meta[mk.key]; ok && json.Unmarshal(raw, &val) == nil {
			id, _ = val[mk.idField].(string)
			status, _ = val["status"].(string)
			return mk.key + "\x00" + id, id, status
		}
	}
	return "", "", ""
}

const demoIndent = "    "

func (v *demoView) render(b *strings.Builder) {
	next := 0
	extrasBefore := func(at int) {
		for ; next < len(v.extras) && v.extras[next].at <= at; next++ {
			e := v.extras[next]
			if e.label == "" {
				demoRow(b, "", e.text)
				continue
			}
			demoRow(b, e.label, e.text)
			if e.key != "" {
				if h := v.history[e.key]; h != nil && !v.replay {
					demoRow(b, "", "updates: "+h.String())
				}
			}
		}
	}
	for i, it := range v.items {
		extrasBefore(i)
		v.renderItem(b, it)
	}
	extrasBefore(len(v.items))
}

// demoRow writes one row: a label column, then text; the text's further
// lines are indented under its first, blank ones dropped.
func demoRow(b *strings.Builder, label, text string) {
	lines := strings.Split(strings.Trim(text, "\n"), "\n")
	fmt.Fprintf(b, "%s%-11s %s\n", demoIndent, label, lines[0])
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		fmt.Fprintf(b, "%s%-11s %s\n", demoIndent, "", l)
	}
}

func (v *demoView) renderItem(b *strings.Builder, it conformance.Item) {
	switch it.Kind {
	case conformance.KindUserMessage:
		demoRow(b, "you", it.Text)
	case conformance.KindAgentMessage:
		demoRow(b, "agent", it.Text)
	case conformance.KindAgentThought:
		demoRow(b, "thought", it.Text)
	case conformance.KindCompaction:
		head := it.ID + "  " + it.Status
		if it.Error != nil {
			head += ": " + *it.Error
		}
		demoRow(b, "compaction", head)
		if h := v.history["compaction\x00"+it.ID]; h != nil {
			steps := h.String()
			if v.replay {
				steps += " (replayed: one terminal update)"
			}
			demoRow(b, "", "updates: "+steps)
		}
		if it.Summary != nil {
			demoRow(b, "", "summary: "+demoIndentLines(demoBlocksText(it.Summary), "         "))
		}
		if rec := demoRecord(it.Meta); rec != "" {
			demoRow(b, "", "record:  "+rec)
		}
		for _, l := range demoAudit(it.Meta) {
			demoRow(b, "", "lost:    "+l)
		}
	case "tool_call":
		demoRow(b, "tool call", fmt.Sprintf("%s  %q  %s", it.ID, it.Text, it.Status))
		if h := v.history["tool\x00"+it.ID]; h != nil {
			steps := h.String()
			if v.replay {
				steps += " (replayed: one tool_call)"
			}
			demoRow(b, "", "updates: "+steps)
		}
		if c := demoToolContent(it.Raw); c != "" {
			demoRow(b, "", "content: "+c)
		}
	default:
		demoRow(b, string(it.Kind), strings.TrimSpace(it.ID+"  "+it.Status+"  "+it.Text))
	}
}

func demoIndentLines(s, indent string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var keep []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n"+indent)
}

func demoBlocksText(blocks []json.RawMessage) string {
	var b strings.Builder
	for _, raw := range blocks {
		var blk struct{ Type, Text string }
		_ = json.Unmarshal(raw, &blk)
		if blk.Type == "text" {
			b.WriteString(blk.Text)
		} else {
			b.WriteString("[" + blk.Type + "]")
		}
	}
	return b.String()
}

// demoRecord summarizes the acpcompact/record a terminal update carries.
func demoRecord(meta map[string]json.RawMessage) string {
	raw, ok := meta["acpcompact/record"]
	if !ok {
		return ""
	}
	var r struct {
		Trigger      string `json:"trigger"`
		TokensBefore int64  `json:"tokensBefore"`
		TokensAfter  int64  `json:"tokensAfter"`
		Summarizer   *struct {
			Model string `json:"model"`
		} `json:"summarizer"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return ""
	}
	parts := []string{r.Trigger}
	switch {
	case r.TokensBefore > 0 && r.TokensAfter > 0:
		parts = append(parts, fmt.Sprintf("%s -> %s tokens", demoNum(r.TokensBefore), demoNum(r.TokensAfter)))
	case r.TokensBefore > 0:
		parts = append(parts, fmt.Sprintf("%s tokens before", demoNum(r.TokensBefore)))
	}
	if r.Summarizer != nil && r.Summarizer.Model != "" {
		parts = append(parts, "by "+r.Summarizer.Model)
	}
	return strings.Join(parts, ", ") + `  (_meta["acpcompact/record"])`
}

// demoAudit lists what the audit found a summary lost (the record's
// knownLoss, the runtime's own notes left out).
func demoAudit(meta map[string]json.RawMessage) []string {
	var r struct {
		KnownLoss []emitter.Loss `json:"knownLoss"`
	}
	if json.Unmarshal(meta["acpcompact/record"], &r) != nil {
		return nil
	}
	var out []string
	for _, l := range r.KnownLoss {
		if l.Kind == "note" {
			continue
		}
		line := l.Kind + " " + l.Value
		if l.Where != "" {
			line += "  (" + l.Where + "; audited)"
		}
		out = append(out, line)
	}
	return out
}

// demoToolContent returns the text content of a tool call update.
func demoToolContent(raw json.RawMessage) string {
	var u struct {
		Content []struct {
			Content json.RawMessage `json:"content"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &u)
	var blocks []json.RawMessage
	for _, c := range u.Content {
		blocks = append(blocks, c.Content)
	}
	return demoBlocksText(blocks)
}

// demoNum writes n with thousands separators.
func demoNum(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 && r != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
