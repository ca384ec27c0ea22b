package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/proxy"
)

// Rule is one column of the matrix.
type Rule struct {
	Key, Title, Help string
}

// Rules are the matrix's columns, in order.
var Rules = []Rule{
	{"gate", "gate object-only", "no compaction_update or compaction_summary_chunk reaches a v1 client whose clientCapabilities.session.compaction is not an object (checker rule capability; the -nocap recordings)"},
	{"terminal", "one terminal per ID", "no update or chunk for a compaction after its terminal update (checker rule terminal)"},
	{"settled", "settled before the turn ends", "every compaction, and every fallback tool call, settled before the prompt response (checker rules settlement and fallback; the fallback rule is not applied to the legacy-prose recordings, whose model reply is exactly \"Compacting...\", prose the checker cannot tell from Claude's legacy text form)"},
	{"cancel", "cancel ≠ failure", "a compaction whose turn the client cancelled ends cancelled (or completed, if the agent finished it first), never failed (compact-cancel-cap), and none ends cancelled without a cancel (checker rule cancel)"},
	{"outside", "nothing outside a turn", "no compaction update, and no fallback compaction tool call starting or settling, outside a turn (checker rule after-turn)"},
	{"summary", "summary shown", "every completed compaction a capable client holds has a summary"},
	{"replay", "replay equals live", "session/load shows each compaction as the live connection left it, status and summary (load-cap against load-before-cap; checker rule replay)"},
	{"record", "record facts", "terminal compaction updates carry the compaction record, _meta[\"acpcompact/record\"]"},
}

// Verdict is a cell's outcome for one path (direct or through the proxy).
type Verdict int

// The verdicts: no recording decides the rule, every deciding recording
// keeps it, or one breaks it.
const (
	NA Verdict = iota
	Pass
	Fail
)

// Cell is one release × rule: its verdict direct and through the proxy,
// each with the recording that decides it and why.
type Cell struct {
	Direct, Proxy             Verdict
	DirectFile, ProxyFile     string // relative to test/peers/testdata
	DirectReason, ProxyReason string
}

// Matrix is the whole table.
type Matrix struct {
	Releases []string
	Cells    map[string]map[string]*Cell // release -> rule key -> cell
}

// run is what a client received over one recording, and what the checker
// and reducer made of it.
type run struct {
	mode       string // cap or nocap
	scenario   string
	violations []conformance.Violation
	reducer    *conformance.Reducer
	received   [][]byte
}

// Build replays every recording under dir, directly and through the proxy,
// and judges each rule.
func Build(dir string) (*Matrix, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := &Matrix{Cells: map[string]map[string]*Cell{}}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, e.Name(), "*.jsonl"))
		if len(files) == 0 {
			continue
		}
		slices.Sort(files)
		rel := e.Name()
		m.Releases = append(m.Releases, rel)
		cells := map[string]*Cell{}
		for _, r := range Rules {
			cells[r.Key] = &Cell{}
		}
		m.Cells[rel] = cells
		direct, viaProxy := map[string]*run{}, map[string]*run{}
		for _, f := range files {
			base := strings.TrimSuffix(filepath.Base(f), ".jsonl")
			scenario, mode, ok := cutMode(base)
			if !ok {
				continue
			}
			lines, err := readRecording(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			d := runDirect(lines)
			p, err := runProxy(lines)
			if err != nil {
				return nil, fmt.Errorf("%s through the proxy: %w", f, err)
			}
			d.mode, d.scenario, p.mode, p.scenario = mode, scenario, mode, scenario
			direct[base], viaProxy[base] = d, p
		}
		for _, base := range slices.Sorted(mapsKeys(direct)) {
			file := rel + "/" + base + ".jsonl"
			for _, r := range Rules {
				c := cells[r.Key]
				v, why := judge(r.Key, direct[base], direct)
				merge(&c.Direct, &c.DirectFile, &c.DirectReason, v, file, why)
				v, why = judge(r.Key, viaProxy[base], viaProxy)
				merge(&c.Proxy, &c.ProxyFile, &c.ProxyReason, v, file, why)
			}
		}
	}
	slices.SortFunc(m.Releases, compareReleases)
	return m, nil
}

func mapsKeys(m map[string]*run) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// merge folds one recording's verdict into a cell: the first failure
// decides; otherwise the first pass.
func merge(v *Verdict, file, reason *string, got Verdict, f, why string) {
	switch {
	case got == Fail && *v != Fail:
		*v, *file, *reason = Fail, f, why
	case got == Pass && *v == NA:
		*v, *file, *reason = Pass, f, why
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

func (r *run) has(rules ...conformance.Rule) (conformance.Violation, bool) {
	for _, v := range r.violations {
		if slices.Contains(rules, v.Rule) {
			return v, true
		}
	}
	return conformance.Violation{}, false
}

func (r *run) compactions() []conformance.Item {
	var out []conformance.Item
	for _, s := range r.reducer.Sessions() {
		for _, it := range r.reducer.Timeline(s) {
			if it.Kind == conformance.KindCompaction {
				out = append(out, it)
			}
		}
	}
	return out
}

// sawCompaction: the client saw a compaction, standard or as the fallback
// tool call.
func (r *run) sawCompaction() bool {
	if len(r.compactions()) > 0 {
		return true
	}
	for _, l := range r.received {
		if bytes.Contains(l, []byte(`"title":"Compact conversation"`)) || bytes.Contains(l, []byte(`"toolCallId":"compact-`)) {
			return true
		}
	}
	return false
}

func violation(v conformance.Violation) string {
	return fmt.Sprintf("line %d: %s: %s", v.Line, v.Rule, v.Message)
}

// judge decides one rule over one recording's run.
func judge(rule string, r *run, all map[string]*run) (Verdict, string) {
	byRule := func(rules ...conformance.Rule) (Verdict, string) {
		if v, ok := r.has(rules...); ok {
			return Fail, violation(v)
		}
		if r.sawCompaction() {
			return Pass, "kept"
		}
		return NA, ""
	}
	switch rule {
	case "gate":
		if r.mode != "nocap" {
			return NA, ""
		}
		if v, ok := r.has(conformance.RuleCapability); ok {
			return Fail, violation(v)
		}
		return Pass, "no standard update reached the client without the capability"
	case "terminal":
		return byRule(conformance.RuleTerminal)
	case "settled":
		if r.scenario == "legacy-prose" {
			// The model's reply there is exactly "Compacting...": prose
			// the checker cannot tell from Claude's legacy text form.
			return byRule(conformance.RuleSettlement)
		}
		return byRule(conformance.RuleSettlement, conformance.RuleFallback)
	case "outside":
		return byRule(conformance.RuleAfterTurn)
	case "cancel":
		if v, ok := r.has(conformance.RuleCancel); ok {
			return Fail, violation(v)
		}
		if r.scenario != "compact-cancel" || r.mode != "cap" {
			return NA, ""
		}
		cs := r.compactions()
		if len(cs) == 0 {
			return NA, ""
		}
		for _, c := range cs {
			if c.Status != "cancelled" && c.Status != "completed" {
				return Fail, fmt.Sprintf("the compaction %s of the cancelled turn ends %s", c.ID, c.Status)
			}
		}
		return Pass, "the compaction of the cancelled turn ends cancelled (or completed, when the agent finished it)"
	case "summary":
		if r.mode != "cap" {
			return NA, ""
		}
		decided := false
		for _, c := range r.compactions() {
			if c.Status != "completed" {
				continue
			}
			if len(c.Summary) == 0 {
				return Fail, fmt.Sprintf("compaction %s completed without a summary", c.ID)
			}
			decided = true
		}
		if decided {
			return Pass, "every completed compaction has a summary"
		}
		return NA, ""
	case "replay":
		if v, ok := r.has(conformance.RuleReplay); ok {
			return Fail, violation(v)
		}
		if r.scenario != "load" || r.mode != "cap" {
			return NA, ""
		}
		live, ok := all["load-before-cap"]
		if !ok {
			return NA, ""
		}
		want, got := shown(live.compactions()), shown(r.compactions())
		if len(want) == 0 && len(got) == 0 {
			return NA, ""
		}
		if !slices.Equal(want, got) {
			return Fail, fmt.Sprintf("live the client held %v, the replay shows %v", want, got)
		}
		return Pass, "the replay shows what live showed"
	case "record":
		cs := r.compactions()
		if len(cs) == 0 {
			return NA, ""
		}
		for _, c := range cs {
			if _, ok := c.Meta["acpcompact/record"]; !ok {
				return Fail, fmt.Sprintf("compaction %s carries no record", c.ID)
			}
		}
		return Pass, "every compaction carries its record"
	}
	return NA, ""
}

// shown is what a client shows of its compactions: status and summary.
func shown(cs []conformance.Item) []string {
	var out []string
	for _, c := range cs {
		var text strings.Builder
		for _, b := range c.Summary {
			var blk struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(b, &blk)
			text.WriteString(blk.Text)
		}
		s := text.String()
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		out = append(out, fmt.Sprintf("%s %q", c.Status, s))
	}
	return out
}

type line struct {
	fromClient bool
	n          int
	raw        []byte
}

func readRecording(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ls, errs := conformance.ReadTranscript(f)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	out := make([]line, 0, len(ls))
	for _, l := range ls {
		out = append(out, line{fromClient: l.Dir == conformance.FromClient, n: l.N, raw: l.Raw})
	}
	return out, nil
}

// runDirect is what a client gets from the agent's own lines.
func runDirect(lines []line) *run {
	r := &run{reducer: conformance.NewReducer(1)}
	ch := conformance.NewChecker()
	for _, l := range lines {
		dir := conformance.FromAgent
		if l.fromClient {
			dir = conformance.FromClient
		} else {
			r.received = append(r.received, l.raw)
			_ = r.reducer.ApplyMessage(l.raw)
		}
		r.violations = append(r.violations, ch.Observe(dir, l.n, l.raw)...)
	}
	r.violations = append(r.violations, ch.Close()...)
	return r
}

const syncMethod = "_acpcompact_matrix/sync"

// waitFor bounds every wait of a replay through the proxy.
const waitFor = 20 * time.Second

// runProxy replays a recording through the proxy (its public API, over
// pipes): a scripted agent answers each client line with the agent lines
// that followed it in the recording, then a sync notification the client
// waits for, so the proxy sees the lines in the recorded order.
func runProxy(lines []line) (*run, error) {
	type segment struct {
		client []byte
		agent  [][]byte
	}
	var segs []segment
	for _, l := range lines {
		if l.fromClient {
			segs = append(segs, segment{client: append(bytes.Clone(l.raw), '\n')})
			continue
		}
		if len(segs) == 0 {
			return nil, errors.New("an agent line before any client line")
		}
		segs[len(segs)-1].agent = append(segs[len(segs)-1].agent, l.raw)
	}
	p, err := proxy.New(proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	cr, cw := io.Pipe()
	coR, coW := io.Pipe()
	aiR, aiW := io.Pipe()
	aoR, aoW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cr, coW, aiW, aoR) }()
	toClient := make(chan []byte, 1024)
	go func() {
		defer close(toClient)
		br := bufio.NewReaderSize(coR, 1<<20)
		for {
			l, err := br.ReadBytes('\n')
			if len(bytes.TrimSpace(l)) > 0 {
				toClient <- bytes.TrimSpace(l)
			}
			if err != nil {
				return
			}
		}
	}()
	agentErr := make(chan error, 1)
	go func() {
		defer aoW.Close()
		br := bufio.NewReaderSize(aiR, 1<<20)
		for i, s := range segs {
			if _, err := br.ReadBytes('\n'); err != nil {
				agentErr <- fmt.Errorf("reading client line %d: %w", i, err)
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
		// Drain what the proxy still writes to the agent.
		_, _ = io.Copy(io.Discard, br)
		agentErr <- nil
	}()

	r := &run{reducer: conformance.NewReducer(1)}
	ch := conformance.NewChecker()
	n := 0
	receive := func(l []byte) {
		n++
		r.received = append(r.received, l)
		_ = r.reducer.ApplyMessage(l)
		r.violations = append(r.violations, ch.Observe(conformance.FromAgent, n, l)...)
	}
	isSync := func(l []byte) bool { return bytes.Contains(l, []byte(`"method":"`+syncMethod+`"`)) }
	for i, s := range segs {
		n++
		r.violations = append(r.violations, ch.Observe(conformance.FromClient, n, bytes.TrimSpace(s.client))...)
		if _, err := cw.Write(s.client); err != nil {
			return nil, fmt.Errorf("client write: %w", err)
		}
	wait:
		for {
			select {
			case l, ok := <-toClient:
				if !ok {
					return nil, fmt.Errorf("the client stream ended during segment %d", i)
				}
				if isSync(l) {
					break wait
				}
				receive(l)
			case err := <-agentErr:
				if err != nil {
					return nil, err
				}
				agentErr <- nil
			case <-time.After(waitFor):
				return nil, fmt.Errorf("no sync for segment %d within %s", i, waitFor)
			}
		}
	}
	cw.Close()
	select {
	case <-done:
	case <-time.After(waitFor):
		return nil, errors.New("the proxy did not stop")
	}
	coW.Close()
	for l := range toClient {
		if !isSync(l) {
			receive(l)
		}
	}
	aiR.Close()
	r.violations = append(r.violations, ch.Close()...)
	return r, nil
}

// compareReleases orders releases by agent, then by version, newest
// first.
func compareReleases(a, b string) int {
	an, av := splitRelease(a)
	bn, bv := splitRelease(b)
	if an != bn {
		return strings.Compare(an, bn)
	}
	for i := 0; i < len(av) && i < len(bv); i++ {
		if av[i] != bv[i] {
			return bv[i] - av[i]
		}
	}
	return len(bv) - len(av)
}

func splitRelease(s string) (string, []int) {
	k := strings.LastIndexByte(s, '-')
	if k < 0 {
		return s, nil
	}
	var v []int
	for _, p := range strings.Split(s[k+1:], ".") {
		n := 0
		fmt.Sscanf(p, "%d", &n)
		v = append(v, n)
	}
	return s[:k], v
}

func (v Verdict) word() string {
	switch v {
	case Pass:
		return "yes"
	case Fail:
		return "NO"
	}
	return "–"
}

// Markdown is the matrix as a Markdown table: one row per release, one
// column per rule, each cell "direct / proxy", linked to the recordings
// that decide them.
func (m *Matrix) Markdown() string {
	var b strings.Builder
	b.WriteString("# The conformance matrix\n\n")
	b.WriteString("Generated by `go run ./test/peers/cmd/matrix` from the recordings of real agent releases in\n")
	b.WriteString("[test/peers/testdata](../test/peers/testdata) (do not edit; `go test ./test/peers/cmd/matrix` fails when it is stale).\n")
	b.WriteString("Each cell is **direct / through the proxy**: what a client gets from the agent's own lines, and what it gets\n")
	b.WriteString("when `acpcompact proxy` runs in between. `yes` keeps the rule in every recording that decides it, `NO` breaks it\n")
	b.WriteString("(linked: the recording that decides it), `–` no recording decides it. The same page, coloured: [matrix.html](matrix.html).\n\n")
	b.WriteString("| release |")
	for _, r := range Rules {
		b.WriteString(" " + r.Title + " |")
	}
	b.WriteString("\n|---|")
	for range Rules {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, rel := range m.Releases {
		b.WriteString("| " + rel + " |")
		for _, r := range Rules {
			c := m.Cells[rel][r.Key]
			b.WriteString(" " + mdVerdict(c.Direct, c.DirectFile) + " / " + mdVerdict(c.Proxy, c.ProxyFile) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nThe rules:\n\n")
	for _, r := range Rules {
		b.WriteString("- **" + r.Title + "**: " + r.Help + ".\n")
	}
	return b.String()
}

func mdVerdict(v Verdict, file string) string {
	if v == NA || file == "" {
		return v.word()
	}
	return "[" + v.word() + "](../test/peers/testdata/" + file + ")"
}

// HTML is the matrix as one self-contained page: inline CSS, no script,
// no fetch; each cell coloured and linked to its recording, its reason in
// a tooltip.
func (m *Matrix) HTML() string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>acpcompact: the conformance matrix</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:4px 6px;text-align:center}
th{background:#f4f4f4;font-weight:600;vertical-align:bottom}
td.rel{text-align:left;font-family:ui-monospace,monospace;white-space:nowrap}
span.v{display:inline-block;min-width:2.6em;border-radius:3px;padding:1px 4px;margin:1px}
span.pass{background:#c8f0c8}span.fail{background:#f6b8b8;font-weight:600}span.na{background:#eee;color:#888}
a{color:inherit;text-decoration:none}a:hover{text-decoration:underline}
p.legend span.v{margin-right:.5em}
</style></head><body>
<h1>The conformance matrix</h1>
<p>Generated by <code>go run ./test/peers/cmd/matrix</code> from the recordings of real agent releases in
<code>test/peers/testdata</code>. Each cell shows <b>direct</b> (the agent's own lines, as a client gets them) and
<b>proxy</b> (through <code>acpcompact proxy</code>); a coloured cell links to the recording that decides it, and its
tooltip says why.</p>
<p class="legend"><span class="v pass">yes</span>kept in every recording that decides it
<span class="v fail">NO</span>broken (the linked recording)
<span class="v na">–</span>no recording decides it</p>
<table><thead><tr><th>release</th>`)
	for _, r := range Rules {
		fmt.Fprintf(&b, `<th title="%s">%s<br><small>direct · proxy</small></th>`, html.EscapeString(r.Help), html.EscapeString(r.Title))
	}
	b.WriteString("</tr></thead><tbody>\n")
	for _, rel := range m.Releases {
		fmt.Fprintf(&b, `<tr><td class="rel">%s</td>`, html.EscapeString(rel))
		for _, r := range Rules {
			c := m.Cells[rel][r.Key]
			fmt.Fprintf(&b, `<td>%s%s</td>`, htmlVerdict("direct", c.Direct, c.DirectFile, c.DirectReason),
				htmlVerdict("proxy", c.Proxy, c.ProxyFile, c.ProxyReason))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table>\n<h2>The rules</h2>\n<dl>\n")
	for _, r := range Rules {
		fmt.Fprintf(&b, "<dt>%s</dt><dd>%s</dd>\n", html.EscapeString(r.Title), html.EscapeString(r.Help))
	}
	b.WriteString("</dl>\n</body></html>\n")
	return b.String()
}

func htmlVerdict(path string, v Verdict, file, why string) string {
	class := map[Verdict]string{Pass: "pass", Fail: "fail", NA: "na"}[v]
	label := v.word()
	if v == NA || file == "" {
		return fmt.Sprintf(`<span class="v %s" title="%s: no recording decides it">%s</span>`, class, path, label)
	}
	title := path + ": " + file
	if why != "" {
		title += ": " + why
	}
	return fmt.Sprintf(`<a href="../test/peers/testdata/%s"><span class="v %s" title="%s">%s</span></a>`,
		html.EscapeString(file), class, html.EscapeString(title), label)
}
