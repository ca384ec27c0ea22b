package matrix

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/protocol"
)

// Schema is the official ACP schema Verify checks against, one validator
// per protocol version. A nil validator accepts everything: it is what
// schematest.For returns when the schema is not installed, and then Verify
// checks everything but the schema.
type Schema struct {
	V1, V2 *acpschema.Validator
}

// Verify judges a run of sc. It returns one error per problem:
//   - a step that did not return the error it wanted (Run.StepErrors);
//   - a conformance Checker violation on any connection, the official
//     schema included (conformance.WithSchema);
//   - an agent session/update that is invalid against the official schema
//     of the connection's negotiated version;
//   - any compaction update sent to a v1 client without the capability;
//   - a compaction replayed by session/load or session/resume that the
//     client, holding the entity from before, ends up holding differently
//     from what the replay alone describes (a summary accumulated twice, a
//     stale error): after every replay, each replayed entity must be the
//     same whether the client kept its timeline or rebuilt it;
//   - a timeline, at an OpExpect step or at the end, that differs from the
//     scenario's (Want, WantCompactions, WantReplay, or the AgentScript's).
func Verify(sc Scenario, r *Run, official Schema) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, s := range r.StepErrors {
		fail("step: %s", s)
	}
	v1, v2 := official.V1, official.V2
	var expects [][]string
	if !r.Agent {
		expects = expectRows(sc)
	}
	held := (*conformance.Reducer)(nil) // the client's timeline, kept across reconnects
	var replay []conformance.Line       // the last Load turn's messages
	marks := 0
	for ci, c := range r.Conns {
		lines, marked := stripMarks(c.Lines())
		version := negotiated(lines)
		if held == nil || held.Version() != version {
			held = conformance.NewReducer(version)
		}
		chk := conformance.NewChecker(conformance.WithSchema(v1, v2), conformance.WithStrictReplay())
		var vs []conformance.Violation
		schema := v1
		if version == 2 {
			schema = v2
		}
		loadAt, loadID := -1, ""
		for i, l := range lines {
			vs = append(vs, chk.Observe(l.Dir, l.N, l.Raw)...)
			if e := decodeEnvelope(l.Raw); l.Dir == conformance.FromClient && (e.Method == "session/load" || e.Method == "session/resume") {
				loadAt, loadID = i, string(e.ID)
			}
			if l.Dir == conformance.FromAgent {
				if u, kind, ok := update(l.Raw); ok {
					if err := schema.Update(u); err != nil {
						fail("conn %d line %d: update fails the v%d schema: %v", ci+1, l.N, version, err)
					}
					if !sc.Client.Capable() && (kind == "compaction_update" || kind == "compaction_summary_chunk") {
						fail("conn %d line %d: %s sent to a v1 client without the capability", ci+1, l.N, kind)
					}
				}
				if err := held.ApplyMessage(l.Raw); err != nil {
					fail("conn %d line %d: the reducer cannot apply %s: %v", ci+1, l.N, l.Raw, err)
				}
				if e := decodeEnvelope(l.Raw); loadAt >= 0 && e.Method == "" && string(e.ID) == loadID {
					for _, d := range replayDiffs(held, lines[loadAt:i+1], version) {
						fail("conn %d, replay ending at line %d: %s", ci+1, l.N, d)
					}
					loadAt = -1
				}
			}
			for _, at := range marked[i+1] {
				if at >= len(expects) {
					fail("conn %d: mark %d has no OpExpect step", ci+1, at)
					continue
				}
				marks++
				if d := diffRows(rows(held, r.Agent), expects[at]); d != "" {
					fail("conn %d, at OpExpect #%d (after line %d):\n%s", ci+1, at+1, l.N, d)
				}
			}
		}
		vs = append(vs, chk.Close()...)
		for _, v := range vs {
			fail("conn %d: conformance: %s", ci+1, v)
		}
		if lr := lastLoad(lines); lr != nil {
			replay = lr
		}
	}
	if marks != len(expects) {
		fail("%d OpExpect steps, %d checked: the target did not reach them all", len(expects), marks)
	}
	if held == nil {
		return append(errs, fmt.Errorf("the run recorded no connection"))
	}
	want, wantReplay, wantComps := sc.Want, sc.WantReplay, sc.WantCompactions
	if r.Agent {
		want, wantReplay, wantComps = sc.Agent.Want, sc.Agent.WantReplay, nil
	}
	got := rows(held, r.Agent)
	if want != nil {
		if d := diffRows(got, want); d != "" {
			fail("final timeline:\n%s", d)
		}
	}
	if wantComps != nil {
		var comps []string
		for _, row := range got {
			if strings.HasPrefix(row, "[compaction ") {
				comps = append(comps, row)
			}
		}
		if d := diffRows(comps, wantComps); d != "" {
			fail("final compactions:\n%s", d)
		}
	}
	if wantReplay != nil {
		if replay == nil {
			fail("WantReplay set, but the run has no replay")
		} else {
			fresh := conformance.NewReducer(negotiated(r.Conns[len(r.Conns)-1].Lines()))
			for _, l := range replay {
				if l.Dir == conformance.FromAgent {
					_ = fresh.ApplyMessage(l.Raw)
				}
			}
			if d := diffRows(rows(fresh, r.Agent), wantReplay); d != "" {
				fail("timeline rebuilt from the replay alone:\n%s", d)
			}
		}
	}
	return errs
}

// replayDiffs compares each compaction a replay carries, as the replay
// alone builds it, with the entity the client holds after applying the
// replay on top of what it had.
func replayDiffs(held *conformance.Reducer, replay []conformance.Line, version int) []string {
	fresh := conformance.NewReducer(version)
	for _, l := range replay {
		if l.Dir == conformance.FromAgent {
			_ = fresh.ApplyMessage(l.Raw)
		}
	}
	var out []string
	for _, sid := range fresh.Sessions() {
		kept := map[string]conformance.Item{}
		for _, it := range held.Timeline(sid) {
			if it.Kind == conformance.KindCompaction {
				kept[it.ID] = it
			}
		}
		for _, it := range fresh.Timeline(sid) {
			if it.Kind != conformance.KindCompaction {
				continue
			}
			h := kept[it.ID]
			if a, b := entity(h), entity(it); a != b {
				out = append(out, fmt.Sprintf("compaction %s: the client that kept its timeline holds %s, the replay describes %s", it.ID, a, b))
			}
		}
	}
	return out
}

// entity renders a compaction's state without its _meta.
func entity(it conformance.Item) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(it.Status))
	b.WriteString(" summary ")
	if it.Summary == nil {
		b.WriteString("none")
	} else {
		sum, _ := json.Marshal(it.Summary)
		b.Write(sum)
	}
	b.WriteString(" error ")
	if it.Error == nil {
		b.WriteString("none")
	} else {
		b.WriteString(strconv.Quote(*it.Error))
	}
	return b.String()
}

// expectRows lists the Rows of the scenario's OpExpect steps in order.
func expectRows(sc Scenario) [][]string {
	var out [][]string
	for _, t := range sc.Turns {
		for _, s := range t.Steps {
			if s.Op == OpExpect {
				out = append(out, s.Rows)
			}
		}
	}
	return out
}

// stripMarks removes MarkMethod lines. marked[k] lists the marks that
// followed the first k remaining lines.
func stripMarks(in []conformance.Line) ([]conformance.Line, map[int][]int) {
	out := make([]conformance.Line, 0, len(in))
	marked := map[int][]int{}
	for _, l := range in {
		e := decodeEnvelope(l.Raw)
		if l.Dir == conformance.FromAgent && e.Method == MarkMethod {
			var p struct {
				N int `json:"n"`
			}
			_ = json.Unmarshal(e.Params, &p)
			marked[len(out)] = append(marked[len(out)], p.N)
			continue
		}
		out = append(out, l)
	}
	// A mark before any line is checked against the empty timeline when
	// the first line is applied; no target sends one.
	return out, marked
}

// negotiated reads the protocol version the agent answered initialize
// with (1 when there is none).
func negotiated(lines []conformance.Line) int {
	initID := ""
	for _, l := range lines {
		e := decodeEnvelope(l.Raw)
		switch {
		case l.Dir == conformance.FromClient && e.Method == "initialize":
			initID = string(e.ID)
		case l.Dir == conformance.FromAgent && e.Method == "" && initID != "" && string(e.ID) == initID:
			var res struct {
				ProtocolVersion int `json:"protocolVersion"`
			}
			if json.Unmarshal(e.Result, &res) == nil && res.ProtocolVersion == 2 {
				return 2
			}
			return 1
		}
	}
	return 1
}

// lastLoad returns the messages of the connection's last replay: from the
// client's session/load (or session/resume) request to the agent's response.
func lastLoad(lines []conformance.Line) []conformance.Line {
	start, id := -1, ""
	var out []conformance.Line
	for i, l := range lines {
		e := decodeEnvelope(l.Raw)
		if l.Dir == conformance.FromClient && (e.Method == "session/load" || e.Method == "session/resume") {
			start, id = i, string(e.ID)
			continue
		}
		if start >= 0 && l.Dir == conformance.FromAgent && e.Method == "" && string(e.ID) == id {
			out = lines[start : i+1]
			start = -1
		}
	}
	return out
}

// rows renders a reducer's timeline of its first session, one row per
// item (conformance.Reducer.Render). For agent runs, compaction IDs
// become c1, c2, ... in order of first appearance and _meta is dropped.
func rows(r *conformance.Reducer, agent bool) []string {
	ss := r.Sessions()
	if len(ss) == 0 {
		return nil
	}
	var b strings.Builder
	_ = r.Render(&b, ss[0])
	out := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(out) == 1 && out[0] == "" {
		out = nil
	}
	if !agent {
		return out
	}
	ids := map[string]string{}
	var order []string
	for _, it := range r.Timeline(ss[0]) {
		if it.Kind == conformance.KindCompaction {
			if _, ok := ids[it.ID]; !ok {
				ids[it.ID] = "c" + strconv.Itoa(len(ids)+1)
				order = append(order, it.ID)
			}
		}
	}
	// Longest IDs first, so none is replaced inside another.
	slices.SortFunc(order, func(a, b string) int { return len(b) - len(a) })
	for i, row := range out {
		if j := strings.Index(row, "  _meta: "); j >= 0 {
			row = row[:j]
		}
		for _, id := range order {
			row = strings.ReplaceAll(row, id, ids[id])
		}
		out[i] = row
	}
	return out
}

// diffRows compares timelines; "*" in a wanted row matches any text. It
// returns "" when they match.
func diffRows(got, want []string) string {
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = rowMatches(got[i], want[i])
	}
	if ok {
		return ""
	}
	return "got:\n  " + strings.Join(quoteAll(got), "\n  ") + "\nwant:\n  " + strings.Join(quoteAll(want), "\n  ")
}

func rowMatches(got, want string) bool {
	parts := strings.Split(want, "*")
	if len(parts) == 1 {
		return got == want
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	got = got[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(got, p)
		if i < 0 {
			return false
		}
		got = got[i+len(p):]
	}
	return strings.HasSuffix(got, last) && len(got) >= len(last)
}

var unprintable = regexp.MustCompile(`[^\x20-\x7e]`)

func quoteAll(rows []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = unprintable.ReplaceAllStringFunc(r, strconv.Quote)
	}
	if len(out) == 0 {
		return []string{"(empty)"}
	}
	return out
}

// VerifyLiveReplay judges a run's history replay (Run.History): what a
// client holds of each compaction at the end of the live transcript must be
// what a client that only sees the replay holds. It compares, per
// compaction ID, the status, summary (as a client shows it: adjacent text
// blocks joined, since chunks split text arbitrarily) and error; for a
// client without the capability, the status of each fallback tool call
// ("compact-<ID>", fallback.ToolCallID). Every compaction the runtime
// reported must be replayed, and every update of the replay must be valid
// against the official schema and respect the capability gate.
//
// skip is set, with errs nil, when there is nothing to compare: the run has
// no history, or the scenario's client holds no compaction entity (a v1
// client without the capability and without a tool-call fallback), or no
// compaction of the scenario went through the emitter (a runtime has no
// record of what it sent verbatim).
func VerifyLiveReplay(sc Scenario, r *Run, official Schema) (errs []error, skip string) {
	if r.History == nil {
		return nil, "the run has no history replay"
	}
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, s := range r.StepErrors {
		if strings.HasPrefix(s, "history: ") {
			fail("step: %s", s)
		}
	}
	var live *conformance.Reducer
	for _, c := range r.Conns {
		lines, _ := stripMarks(c.Lines())
		if v := negotiated(lines); live == nil || live.Version() != v {
			live = conformance.NewReducer(v)
		}
		for _, l := range lines {
			if l.Dir == conformance.FromAgent {
				_ = live.ApplyMessage(l.Raw) // Verify reports what cannot be applied
			}
		}
	}
	hlines, _ := stripMarks(r.History.Lines())
	version := live.Version()
	if hasInitialize(hlines) {
		version = negotiated(hlines)
	}
	schema := official.V1
	if version == 2 {
		schema = official.V2
	}
	fresh := conformance.NewReducer(version)
	for _, l := range hlines {
		if l.Dir != conformance.FromAgent {
			continue
		}
		if u, kind, ok := update(l.Raw); ok {
			if err := schema.Update(u); err != nil {
				fail("history line %d: update fails the v%d schema: %v", l.N, version, err)
			}
			if !sc.Client.Capable() && (kind == "compaction_update" || kind == "compaction_summary_chunk") {
				fail("history line %d: %s sent to a v1 client without the capability", l.N, kind)
			}
		}
		if err := fresh.ApplyMessage(l.Raw); err != nil {
			fail("history line %d: the reducer cannot apply %s: %v", l.N, l.Raw, err)
		}
	}

	liveItems, freshItems := replayable(live), replayable(fresh)
	reported := r.Reported
	if r.Agent {
		reported = nil
		for _, key := range liveItems.order {
			reported = append(reported, strings.TrimPrefix(strings.TrimPrefix(key, "compaction "), "tool_call "+fallback.ToolCallIDPrefix))
		}
	}
	compared := 0
	seen := map[string]bool{}
	for _, id := range reported {
		key := "compaction " + id
		if !sc.Client.Capable() {
			key = "tool_call " + fallback.ToolCallID(protocol.ID(id))
		}
		seen[key] = true
		l, inLive := liveItems.m[key]
		f, inFresh := freshItems.m[key]
		switch {
		case !inLive && !inFresh:
			continue // the client shows this compaction neither way
		case !inFresh:
			fail("%s: the client held it live (%s), the replay does not carry it", key, l)
		case !inLive:
			fail("%s: the replay carries it (%s), the live client never held it", key, f)
		case l != f:
			fail("%s: the live client holds %s, a client that only sees the replay holds %s", key, l, f)
		}
		compared++
	}
	for _, key := range freshItems.order {
		if _, ok := liveItems.m[key]; !ok && !seen[key] {
			fail("%s: the replay carries it (%s), the live client never held it", key, freshItems.m[key])
		}
	}
	if compared == 0 && len(errs) == 0 {
		switch {
		case !sc.Client.Capable():
			return nil, "the client holds no compaction entity: a v1 client without the capability gets " + fallbackName(sc.Fallback)
		case len(reported) == 0:
			return nil, "no compaction of this scenario went through the emitter: the runtime has no record of what it sent verbatim"
		}
		return nil, "the client holds none of the reported compactions"
	}
	return errs, ""
}

func fallbackName(name string) string {
	if name == "" {
		return "nothing of compaction"
	}
	return "the " + name + " fallback, which has no compaction entity to compare"
}

// items are the replayable items of a timeline by key, in timeline order.
type items struct {
	m     map[string]string
	order []string
}

// replayable renders the compactions ("compaction <ID>": status, summary
// as a client shows it, error) and the fallback tool calls ("tool_call
// compact-<ID>": status) of a reducer's first session.
func replayable(r *conformance.Reducer) items {
	out := items{m: map[string]string{}}
	ss := r.Sessions()
	if len(ss) == 0 {
		return out
	}
	for _, it := range r.Timeline(ss[0]) {
		var key, val string
		switch {
		case it.Kind == conformance.KindCompaction:
			key, val = "compaction "+it.ID, shown(it)
		case it.Kind == "tool_call" && strings.HasPrefix(it.ID, fallback.ToolCallIDPrefix):
			key, val = "tool_call "+it.ID, strconv.Quote(it.Status)
		default:
			continue
		}
		if _, ok := out.m[key]; !ok {
			out.order = append(out.order, key)
		}
		out.m[key] = val
	}
	return out
}

// shown renders a compaction as a client shows it: status, summary with
// adjacent text blocks joined, error.
func shown(it conformance.Item) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(it.Status))
	b.WriteString(" summary ")
	if it.Summary == nil {
		b.WriteString("none")
	} else {
		var parts []string
		text := ""
		for _, raw := range it.Summary {
			var blk struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(raw, &blk) == nil && blk.Type == "text" {
				text += blk.Text
				continue
			}
			if text != "" {
				parts = append(parts, strconv.Quote(text))
				text = ""
			}
			parts = append(parts, string(raw))
		}
		if text != "" {
			parts = append(parts, strconv.Quote(text))
		}
		b.WriteString("[" + strings.Join(parts, ",") + "]")
	}
	b.WriteString(" error ")
	if it.Error == nil {
		b.WriteString("none")
	} else {
		b.WriteString(strconv.Quote(*it.Error))
	}
	return b.String()
}

func hasInitialize(lines []conformance.Line) bool {
	for _, l := range lines {
		if l.Dir == conformance.FromClient && decodeEnvelope(l.Raw).Method == "initialize" {
			return true
		}
	}
	return false
}
