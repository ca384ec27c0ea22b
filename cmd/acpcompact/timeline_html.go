package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/conformance"
)

// The page is one file a browser opens from disk: inline CSS, no script,
// nothing fetched (the Content-Security-Policy forbids every fetch, so a
// reference in the transcript's text stays text). html/template escapes
// everything the transcript says.
var timelineTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="acpcompact check --html">
<title>{{.Name}}: the timeline a client shows</title>
<style>
:root { --fg: #1d2330; --muted: #667085; --line: #e3e6ec; --bg: #f7f8fa; --ok: #12733a; --bad: #b42318; --run: #175cd3; --warn: #b54708; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header, main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.5rem; }
h1 { font-size: 1.3rem; margin: .5rem 0 .2rem; word-break: break-all; }
h2 { font-size: 1.1rem; margin: 0 0 .5rem; }
h3 { font-size: 1rem; margin: 1rem 0 .5rem; }
code, pre, .id { font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.sub, .how, .where { color: var(--muted); }
.how { font-weight: normal; }
.rule { font-weight: 700; }
.verdict { font-weight: 600; padding: .4rem .7rem; border-radius: 6px; display: inline-block; }
.verdict.ok { background: #e7f6ec; color: var(--ok); }
.verdict.bad { background: #fdecea; color: var(--bad); }
ol.violations { padding-left: 1.4rem; }
.connection { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.2rem; margin: 1rem 0; }
dl.handshake { display: grid; grid-template-columns: 12rem 1fr; gap: .2rem 1rem; margin: 0 0 .5rem; }
dl.handshake dt { color: var(--muted); }
dl.handshake dd { margin: 0; }
ol.timeline { list-style: none; margin: 0; padding: 0; border-top: 1px solid var(--line); }
li.row { display: grid; grid-template-columns: 7.5rem 1fr 7rem; gap: .2rem 1rem; padding: .45rem .2rem; border-bottom: 1px solid var(--line); }
li.row:target, .violation:target { outline: 2px solid var(--warn); outline-offset: -2px; }
li.row.replayed { background: #f9fafb; }
.label { font-weight: 600; color: var(--muted); }
.row.user .label { color: #6941c6; }
.row.agent .label { color: #026aa2; }
.row.compaction { background: #fbfcff; }
.row.compaction .label { color: var(--run); }
.row.turn .body, .row.replay .body, .row.usage .body { color: var(--muted); }
.body { min-width: 0; }
.text, pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
.where { font-size: 12px; text-align: right; }
.field { display: grid; grid-template-columns: 6.5rem 1fr; gap: 0 .5rem; margin-top: .25rem; }
.key { color: var(--muted); }
ol.updates { margin: 0; padding: 0; list-style: none; }
ol.updates li { display: inline; }
ol.updates li + li::before { content: " \2192  "; color: var(--muted); }
.status { font-weight: 600; padding: 0 .4rem; border-radius: 4px; }
.st-completed { background: #e7f6ec; color: var(--ok); }
.st-failed { background: #fdecea; color: var(--bad); }
.st-cancelled { background: #fff4e5; color: var(--warn); }
.st-running { background: #eaf2ff; color: var(--run); }
.st-other { background: #f2f4f7; color: var(--fg); }
.error { color: var(--bad); }
.summary { background: #f5f7fb; border-left: 3px solid var(--run); padding: .3rem .5rem; }
.none { color: var(--muted); font-style: italic; }
table.loss { border-collapse: collapse; margin-top: .2rem; }
table.loss td, table.loss th { border: 1px solid var(--line); padding: .1rem .4rem; text-align: left; vertical-align: top; }
table.loss th { background: var(--bg); font-weight: 600; }
.violation { grid-column: 1 / -1; background: #fdecea; color: var(--bad); border-radius: 4px; padding: .3rem .5rem; margin-top: .25rem; }
.violation a, ol.violations a { color: inherit; }
details summary { cursor: pointer; color: var(--muted); }
</style>
</head>
<body>
<header>
<h1>{{.Name}}</h1>
<p class="sub">The transcript as the timeline an ACP client shows: messages with their chunks joined, each compaction one row updated in place, with its updates, summary, record and known loss, and each violation the checker found at its line. {{.Counts}}</p>
<p class="verdict {{if .Clean}}ok{{else}}bad{{end}}" id="verdict">{{.Verdict}}</p>
{{- if .Violations}}
<ol class="violations" id="violations">
{{- range .Violations}}
<li data-rule="{{.Rule}}" data-line="{{.Line}}"><a href="#L{{.Line}}">line {{.Line}}</a> <span class="rule">{{.Rule}}</span>: {{.Message}}</li>
{{- end}}
</ol>
{{- end}}
</header>
<main>
{{- range .Conns}}
<section class="connection" id="{{.ID}}">
<h2>{{.Title}}</h2>
<dl class="handshake">
{{- range .Facts}}
<dt>{{.K}}</dt><dd>{{.V}}</dd>
{{- end}}
</dl>
{{- range .Violations}}{{template "violation" .}}{{end}}
{{- range .Sessions}}
<section class="session" id="{{.ID}}" data-session="{{.SID}}">
<h3>Session <code>{{.SID}}</code> <span class="how">({{.How}})</span></h3>
<ol class="timeline">
{{- range .Rows}}{{template "row" .}}{{end}}
</ol>
</section>
{{- end}}
</section>
{{- end}}
</main>
</body>
</html>
{{define "violation"}}
<div class="violation"{{if .ID}} id="{{.ID}}"{{end}} data-rule="{{.Rule}}" data-line="{{.Line}}"><a href="#L{{.Line}}">line {{.Line}}</a> <span class="rule">{{.Rule}}</span>: {{.Message}}</div>
{{- end}}
{{define "row"}}
<li class="row {{.Class}}{{if .Replayed}} replayed{{end}}"{{if .ID}} id="{{.ID}}"{{end}} data-kind="{{.Kind}}"{{if .EntityID}} data-id="{{.EntityID}}"{{end}}{{if .Status}} data-status="{{.Status}}"{{end}} data-line="{{.Line}}">
<span class="label">{{.Label}}</span>
<div class="body">
{{- if or .EntityID .Status}}
<div class="head">{{if .EntityID}}<code class="id">{{.EntityID}}</code> {{end}}{{if .Status}}<span class="status {{.StatusClass}}">{{.Status}}</span>{{end}}{{if .Error}} <span class="error">{{.Error}}</span>{{end}}</div>
{{- end}}
{{- if .Text}}
<div class="text">{{.Text}}</div>
{{- end}}
{{- if .Updates}}
<div class="field updates"><span class="key">updates</span><ol class="updates">{{range .Updates}}<li>{{.}}</li>{{end}}</ol></div>
{{- end}}
{{- if .Compaction}}
<div class="field summary-field"><span class="key">summary</span>{{if .HasSummary}}<pre class="summary">{{.Summary}}</pre>{{else}}<span class="none">{{.Summary}}</span>{{end}}</div>
<div class="field record"><span class="key">record</span><div>{{if .Record}}{{.Record}}{{else}}<span class="none">none: no _meta["acpcompact/record"]</span>{{end}}
{{- if .RecordJSON}}<details><summary>_meta["acpcompact/record"]</summary><pre>{{.RecordJSON}}</pre></details>{{end}}
{{- if .MetaJSON}}<details><summary>_meta</summary><pre>{{.MetaJSON}}</pre></details>{{end}}</div></div>
{{- end}}
{{- range .Audits}}
<div class="field known-loss"><span class="key">known loss</span><div>{{.Text}}
{{- if .Losses}}
<table class="loss"><tr><th>kind</th><th>value</th><th>where</th><th>by</th></tr>
{{- range .Losses}}<tr><td>{{.Kind}}</td><td><code>{{.Value}}</code></td><td>{{.Where}}</td><td>{{.Role}}</td></tr>{{end}}
</table>
{{- end}}</div></div>
{{- end}}
{{- if .NotAudited}}
<div class="field known-loss"><span class="key">known loss</span><span class="none">{{.NotAudited}}</span></div>
{{- end}}
{{- if .Content}}
<div class="field"><span class="key">content</span><div class="text">{{.Content}}</div></div>
{{- end}}
</div>
<span class="where">line {{.Line}}{{if .Replayed}}, replayed{{end}}</span>
{{- range .Violations}}{{template "violation" .}}{{end}}
</li>
{{- end}}
`))

type pageView struct {
	Name, Verdict, Counts string
	Clean                 bool
	Violations            []violationView
	Conns                 []connView
}

type violationView struct {
	ID      string // "L12" where this is the first element about line 12, else ""
	Line    int
	Rule    conformance.Rule
	Message string
}

type fact struct{ K, V string }

type connView struct {
	ID, Title  string
	Facts      []fact
	Violations []violationView
	Sessions   []sessionView
}

type sessionView struct {
	ID, SID, How string
	Rows         []rowView
}

type rowView struct {
	ID, Class, Kind, Label  string
	EntityID, Status, Error string
	StatusClass             string
	Line                    int
	Replayed                bool
	Text                    string
	Updates                 []string
	Compaction, HasSummary  bool
	Summary                 string
	Record, RecordJSON      string
	MetaJSON                string
	Audits                  []auditView
	NotAudited              string
	Content                 string
	Violations              []violationView
}

type auditView struct {
	Text   string
	Losses []audit.Loss
}

// writeHTML writes the page; name is the transcript's, vs what the checker
// found (as check prints them).
func (t *timeline) writeHTML(w io.Writer, name string, vs []conformance.Violation) error {
	ids := map[string]bool{}
	// anchor returns "L<line>" the first time a line is anchored, so every
	// link to a line has exactly one target.
	anchor := func(line int) string {
		id := fmt.Sprintf("L%d", line)
		if ids[id] {
			return ""
		}
		ids[id] = true
		return id
	}
	violations := func(vs []conformance.Violation) []violationView {
		var out []violationView
		for _, v := range vs {
			out = append(out, violationView{ID: anchor(v.Line), Line: v.Line, Rule: v.Rule, Message: v.Message})
		}
		return out
	}
	p := pageView{Name: name, Verdict: summary(name, vs), Clean: len(vs) == 0}
	for _, v := range vs {
		p.Violations = append(p.Violations, violationView{Line: v.Line, Rule: v.Rule, Message: v.Message})
	}
	var nSessions, nCompactions int
	for _, c := range t.conns {
		cv := connView{ID: fmt.Sprintf("c%d", c.n), Title: fmt.Sprintf("Connection %d", c.n), Facts: c.hs.facts(c.line)}
		cv.Violations = violations(c.violations)
		for i, s := range c.sessions {
			nSessions++
			sv := sessionView{ID: fmt.Sprintf("c%d-s%d", c.n, i+1), SID: s.id, How: s.how}
			for _, r := range s.rows {
				rv := r.view(anchor(r.line))
				rv.Violations = violations(r.vs)
				if rv.Compaction {
					nCompactions++
				}
				sv.Rows = append(sv.Rows, rv)
			}
			cv.Sessions = append(cv.Sessions, sv)
		}
		p.Conns = append(p.Conns, cv)
	}
	if len(t.unplaced) > 0 {
		// Lines the timeline never saw: shown in a connection of their own
		// so that their links, too, have a target.
		p.Conns = append(p.Conns, connView{ID: "unplaced", Title: "Lines outside any connection", Violations: violations(t.unplaced)})
	}
	p.Counts = fmt.Sprintf("%s, %s, %s.", plural(len(t.conns), "connection"), plural(nSessions, "session"), plural(nCompactions, "compaction"))
	var b bytes.Buffer
	if err := timelineTemplate.Execute(&b, p); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// facts says what the handshake negotiated.
func (h *tlHandshake) facts(line int) []fact {
	if line == 0 {
		return []fact{{"initialize", "none before these messages: the checker assumes v1 with the capability"}}
	}
	fs := []fact{{"initialize", fmt.Sprintf("line %d", line)}}
	if h.client != "" {
		fs = append(fs, fact{"client", h.client})
	}
	if h.agent != "" {
		fs = append(fs, fact{"agent", h.agent})
	}
	asked := "no integer protocolVersion"
	if h.asked >= 0 {
		asked = fmt.Sprint(h.asked)
	}
	var version string
	switch {
	case h.err != "":
		version = fmt.Sprintf("the client asked %s; initialize failed: %s", asked, h.err)
	case h.answerLine == 0:
		version = fmt.Sprintf("the client asked %s; the agent never answered", asked)
	case h.answered >= 0:
		version = fmt.Sprintf("v%d (the client asked %s, the agent answered %d, line %d)", h.answered, asked, h.answered, h.answerLine)
	default:
		version = fmt.Sprintf("the client asked %s; the agent's answer (line %d) has no integer protocolVersion, so the client's request decides", asked, h.answerLine)
	}
	fs = append(fs, fact{"protocol version", version})
	var capability string
	raw := strings.TrimSpace(string(h.capability))
	switch {
	case h.version() == 2:
		capability = "v2 needs none: compaction updates may be sent"
	case !h.capSet:
		capability = "not advertised (no clientCapabilities.session.compaction): the agent owes a fallback, never a compaction_update"
	case strings.HasPrefix(raw, "{"):
		capability = fmt.Sprintf("advertised: clientCapabilities.session.compaction = %s, an object: compaction_update and compaction_summary_chunk may be sent", tlClip(raw, 200))
	default:
		capability = fmt.Sprintf("clientCapabilities.session.compaction = %s, not an object: counts as not advertised; the agent owes a fallback, never a compaction_update", tlClip(raw, 200))
	}
	return append(fs, fact{"compaction capability", capability})
}

func tlClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// statusClass maps a status to one of the page's fixed classes, so no
// transcript text becomes a class name.
func statusClass(s string) string {
	switch s {
	case "completed":
		return "st-completed"
	case "failed":
		return "st-failed"
	case "cancelled":
		return "st-cancelled"
	case "in_progress", "started", "pending":
		return "st-running"
	}
	return "st-other"
}

// view is the row as the page shows it; id is its anchor, if any.
func (r *tlRow) view(id string) rowView {
	v := rowView{ID: id, Line: r.line, Replayed: r.replayed}
	if r.item < 0 {
		v.Kind, v.Class, v.Label, v.Text = r.kind, r.kind, r.label, r.text
		if r.kind == "marker" {
			v.EntityID, v.Status = r.markerID, r.status
			v.Text = fmt.Sprintf(`session_info_update _meta[%q] (a fallback marker)`, r.metaKey)
		}
		if r.kind == "violation" {
			v.Label = "violation"
		}
	} else {
		it := r.it
		v.Kind = string(it.Kind)
		switch it.Kind {
		case conformance.KindUserMessage:
			v.Class, v.Label, v.Text = "msg user", "you", demoBlocksText(it.Content)
		case conformance.KindAgentMessage:
			v.Class, v.Label, v.Text = "msg agent", "agent", demoBlocksText(it.Content)
		case conformance.KindAgentThought:
			v.Class, v.Label, v.Text = "msg thought", "thought", demoBlocksText(it.Content)
		case conformance.KindCompaction:
			v.Class, v.Label, v.EntityID, v.Status, v.Compaction = "compaction", "compaction", it.ID, it.Status, true
			if it.Error != nil {
				v.Error = *it.Error
			}
			v.HasSummary = it.Summary != nil
			v.Summary = "none"
			if v.HasSummary {
				v.Summary = demoBlocksText(it.Summary)
			}
			v.Record = strings.TrimSuffix(demoRecord(it.Meta), `  (_meta["acpcompact/record"])`)
			if raw, ok := it.Meta["acpcompact/record"]; ok {
				v.RecordJSON = tlIndent(raw)
				if v.Record == "" {
					v.Record = "present, but not a record object"
				}
			}
			if len(it.Meta) > 0 && (len(it.Meta) > 1 || v.RecordJSON == "") {
				m, _ := json.Marshal(it.Meta) // a map: keys sorted
				v.MetaJSON = tlIndent(m)
			}
			if len(r.reports) == 0 {
				v.NotAudited = notAudited(it)
			}
		case "tool_call":
			v.Class, v.Label, v.EntityID, v.Status, v.Text = "tool", "tool call", it.ID, it.Status, it.Text
			v.Content = demoToolContent(it.Raw)
		default:
			v.Class, v.Label, v.EntityID, v.Status, v.Text = "other", string(it.Kind), it.ID, it.Status, it.Text
		}
	}
	if v.Status != "" {
		v.StatusClass = statusClass(v.Status)
	}
	if r.hist != nil {
		v.Updates = r.hist.strings()
	}
	for _, rep := range r.reports {
		v.Audits = append(v.Audits, auditOf(rep))
	}
	return v
}

func notAudited(it conformance.Item) string {
	switch it.Status {
	case "completed":
		return "not audited: it completed without a summary"
	case "failed", "cancelled":
		return "not audited: it " + it.Status + ", so no summary replaced the history"
	}
	return "not audited: it has not completed"
}

func auditOf(r audit.Report) auditView {
	prefix := ""
	if r.Form == "continuation" {
		prefix = "a continuation message: the summary that replaced the history; "
	}
	switch n := len(r.KnownLoss); {
	case r.HistoryItems == 0:
		return auditView{Text: prefix + "no history before it on this connection to audit"}
	case n == 0:
		return auditView{Text: prefix + fmt.Sprintf("nothing lost (%s audited)", plural(r.HistoryItems, "history item"))}
	default:
		losses := "1 loss"
		if n > 1 {
			losses = fmt.Sprintf("%d losses", n)
		}
		return auditView{Text: prefix + fmt.Sprintf("%s (%s audited):", losses, plural(r.HistoryItems, "history item")), Losses: r.KnownLoss}
	}
}

func tlIndent(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// strings writes each step: a status (with what else it did), repeats
// counted, a run of chunks counted, each with its lines.
func (h *tlHistory) strings() []string {
	var out []string
	for _, s := range h.steps {
		what := s.what
		switch {
		case s.what == "chunk" && s.n == 1:
			what = "1 chunk"
		case s.what == "chunk":
			what = fmt.Sprintf("%d chunks", s.n)
		case s.what == "":
			what = "(no status)"
		case s.n > 1:
			what = fmt.Sprintf("%s ×%d", s.what, s.n)
		}
		if s.note != "" {
			what += " (" + s.note + ")"
		}
		where := fmt.Sprintf("line %d", s.first)
		if s.last != s.first {
			where = fmt.Sprintf("lines %d–%d", s.first, s.last)
		}
		if s.replayed {
			where += ", replayed"
		}
		out = append(out, what+" · "+where)
	}
	return out
}
