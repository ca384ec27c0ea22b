package matrix

import (
	"encoding/json"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Step constructors, to keep the scenario table readable.
func start(id protocol.ID) Step           { return Step{Op: OpStart, ID: id, Displayable: true} }
func startHidden(id protocol.ID) Step     { return Step{Op: OpStart, ID: id} }
func chunk(id protocol.ID, s string) Step { return Step{Op: OpChunk, ID: id, Text: s} }
func complete(id protocol.ID) Step        { return Step{Op: OpComplete, ID: id} }
func completeWith(id protocol.ID, texts ...string) Step {
	return Step{Op: OpComplete, ID: id, Summary: SetSummary, Texts: texts}
}
func fail(id protocol.ID, cause string) Step { return Step{Op: OpFail, ID: id, Err: cause} }
func cancel(id protocol.ID) Step             { return Step{Op: OpCancel, ID: id} }
func userCancel() Step                       { return Step{Op: OpUserCancel} }
func message(s string) Step                  { return Step{Op: OpMessage, Text: s} }
func raw(s string) Step                      { return Step{Op: OpRaw, Raw: json.RawMessage(s)} }
func expect(rows ...string) Step             { return Step{Op: OpExpect, Rows: rows} }
func replay(rec emitter.Record) Step         { return Step{Op: OpReplay, Record: rec} }
func wantErr(s Step, err error) Step         { s.WantErr = err; return s }

// withheld is a chunk of a compaction not marked user-displayable: the
// default summary policy withholds it and Chunk returns ErrWithheld.
func withheld(id protocol.ID, s string) Step { return wantErr(chunk(id, s), emitter.ErrWithheld) }

func prompt(steps ...Step) Turn { return Turn{Kind: Prompt, Steps: steps} }
func load(steps ...Step) Turn   { return Turn{Kind: Load, Steps: steps} }

var reconnect = Turn{Kind: Reconnect}

func text(s string) []protocol.ContentBlock { return []protocol.ContentBlock{protocol.Text(s)} }

// Scenarios returns every scenario of the matrix, bullet by bullet.
func Scenarios() []Scenario {
	var all []Scenario
	for _, group := range [][]Scenario{capabilityScenarios(), lifecycleScenarios(), summaryScenarios(), replayScenarios(), unknownV2Scenarios(), omissionScenarios()} {
		all = append(all, group...)
	}
	return all
}

// capabilityScenarios: a v1 client gets compaction updates only when it
// advertised clientCapabilities.session.compaction as an object; live and in
// a session/load replay alike, whatever else it sent instead.
func capabilityScenarios() []Scenario {
	turns := []Turn{
		prompt(message("before"), start("cmp_1"), chunk("cmp_1", "## Kept"), completeWith("cmp_1", "## Kept context"), message("after")),
		load(replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Summary: text("## Kept context"), Displayable: true})),
	}
	// Without compaction items, the v1 client joins the unaddressed
	// message chunks on either side into one message.
	without := []string{"[agent] beforeafter"}
	agentWithout := &AgentScript{
		Flags: []string{"--fallback", "none"},
		Turns: []AgentTurn{{Prompt: "/compact"}, {Load: true}},
		Want:  nil, // set in agentCapabilityWant
	}
	var out []Scenario
	for _, c := range []struct {
		name   string
		client Client
		doc    string
	}{
		{"omitted-capabilities", V1NoCaps, "initialize without clientCapabilities"},
		{"omitted-session", V1NoSession, "clientCapabilities without session"},
		{"session-null", V1SessionNull, "clientCapabilities.session is null"},
		{"omitted-compaction", V1NoCompaction, "clientCapabilities.session without compaction"},
		{"compaction-null", V1Null, "clientCapabilities.session.compaction is null"},
		{"compaction-false", V1False, "compaction is false, which opencode reads as support: it is not"},
		{"compaction-true", V1True, "compaction is true, which codex-acp reads as support: only an object is"},
	} {
		a := *agentWithout
		a.Want = agentCapabilityWant(false)
		a.WantReplay = agentReplayWant(false)
		out = append(out, Scenario{
			Name: c.name, Bullet: BulletCapability, Client: c.client, Turns: turns,
			Doc:        c.doc + ": no compaction update, live or replayed.",
			Want:       without,
			WantReplay: []string{},
			Agent:      &a,
		})
	}
	out = append(out,
		Scenario{
			Name: "capability-object", Bullet: BulletCapability, Client: V1Capable, Turns: turns,
			Doc: "clientCapabilities.session.compaction is {}: compaction updates live and in the replay.",
			Want: []string{
				"[agent] before",
				"[compaction cmp_1] completed  summary: ## Kept context",
				"[agent] after",
			},
			WantReplay: []string{"[compaction cmp_1] completed  summary: ## Kept context"},
			Agent: &AgentScript{
				Turns:      []AgentTurn{{Prompt: "/compact"}, {Load: true}},
				Want:       agentCapabilityWant(true),
				WantReplay: agentReplayWant(true),
			},
		},
		Scenario{
			Name: "fallback-toolcall", Bullet: BulletCapability, Client: V1Null, Fallback: "toolcall", Turns: turns,
			Doc: "A client without the capability and an agent with a tool-call fallback: the fallback, live and replayed, and no compaction update.",
			Want: []string{
				"[agent] before",
				"[tool_call compact-cmp_1] completed  Compact conversation",
				"[agent] after",
			},
			WantReplay: []string{"[tool_call compact-cmp_1] completed  Compact conversation"},
			Agent: &AgentScript{
				Flags:      []string{"--fallback", "toolcall"},
				Turns:      []AgentTurn{{Prompt: "/compact"}, {Load: true}},
				Want:       agentFallbackWant(),
				WantReplay: agentFallbackReplayWant(),
			},
		},
		Scenario{
			Name: "replay-on-new-connection", Bullet: BulletCapability, Client: V1Null,
			Doc: "A compaction run on an earlier connection is replayed on a new one to a client without the capability: nothing of it is sent, and the messages around it stay one message.",
			Turns: []Turn{
				prompt(start("cmp_1"), completeWith("cmp_1", "## Kept")),
				reconnect,
				load(message("before"), replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Summary: text("## Kept"), Displayable: true}), message("after")),
			},
			WantReplay: []string{"[agent] beforeafter"},
			NoAgent:    "the scenario agent serves one connection over stdio; its sessions do not outlive the process",
		},
	)
	return out
}

// lifecycleScenarios: every compaction ends completed, failed or
// cancelled, before the turn ends, and only a user's cancel is cancelled.
func lifecycleScenarios() []Scenario {
	return []Scenario{
		{
			Name: "completed", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "in_progress, then completed.",
			Turns: []Turn{prompt(start("cmp_1"), expect("[compaction cmp_1] in_progress"), complete("cmp_1"))},
			Want:  []string{"[compaction cmp_1] completed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact"}}, Want: agentCompactWant()},
		},
		{
			Name: "completed-only-runtime", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "A runtime that only exposes the completed compaction reports start and completion at once; the client sees one entity at that point of the timeline.",
			Turns: []Turn{prompt(message("before"), start("cmp_1"), completeWith("cmp_1", "## Kept"), message("after"))},
			Want:  []string{"[agent] before", "[compaction cmp_1] completed  summary: ## Kept", "[agent] after"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact nosummary"}}, Want: agentNoSummaryWant()},
		},
		{
			Name: "single-terminal-update", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:     "The RFD's minimum: one compaction_update with status completed and nothing else (sent verbatim; the emitter always starts with in_progress) is a conformant, complete lifecycle.",
			Turns:   []Turn{prompt(raw(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed","summary":[{"type":"text","text":"## Kept"}]}`))},
			Want:    []string{"[compaction cmp_1] completed  summary: ## Kept"},
			NoAgent: "the scenario agent reports through the emitter, which always sends in_progress first",
		},
		{
			Name: "failed", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "in_progress, then failed with the runtime's error.",
			Turns: []Turn{prompt(start("cmp_1"), fail("cmp_1", "provider overloaded"))},
			Want:  []string{"[compaction cmp_1] failed  error: provider overloaded"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact fail"}}, Want: agentFailWant()},
		},
		{
			Name: "failed-before-start", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "A failure reported before any start still gives the client in_progress, then failed.",
			Turns: []Turn{prompt(fail("cmp_1", "provider overloaded"))},
			Want:  []string{"[compaction cmp_1] failed  error: provider overloaded"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact failearly"}}, Want: []string{"[compaction c1] failed  error: *"}},
		},
		{
			Name: "cancelled-by-runtime", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "The client cancels; the runtime reports the compaction cancelled.",
			Turns: []Turn{prompt(start("cmp_1"), userCancel(), cancel("cmp_1"))},
			Want:  []string{"[compaction cmp_1] cancelled"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact slow", Cancel: true}}, Want: []string{"[compaction c1] cancelled"}},
		},
		{
			Name: "cancelled-left-open", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "The client cancels and the runtime never reports again: the compaction is settled cancelled before the prompt response.",
			Turns: []Turn{prompt(start("cmp_1"), userCancel())},
			Want:  []string{"[compaction cmp_1] cancelled"},
			Agent: &AgentScript{Flags: []string{"--cancel-grace", "0"}, Turns: []AgentTurn{{Prompt: "/compact hang", Cancel: true}}, Want: []string{"[compaction c1] cancelled"}},
		},
		{
			Name: "cancelled-before-start", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "The client's session/cancel arrives before the runtime starts compacting and the runtime never reports: the compaction is settled cancelled (a user cancel), not failed.",
			Turns: []Turn{prompt(userCancel(), start("cmp_1"))},
			Want:  []string{"[compaction cmp_1] cancelled"},
			Agent: &AgentScript{
				Flags: []string{"--cancel-grace", "0", "--compaction-timeout", "2s"},
				Turns: []AgentTurn{{Prompt: "/compact hang", CancelEarly: true}},
				Want:  []string{"[compaction c1] cancelled"},
			},
		},
		{
			Name: "turn-ended-open", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "The turn ends with the compaction still open and no cancel: it is failed, not cancelled, before the response.",
			Turns: []Turn{prompt(start("cmp_1"))},
			Want:  []string{"[compaction cmp_1] failed  error: the turn ended before the compaction finished"},
			Agent: &AgentScript{Flags: []string{"--compaction-timeout", "300ms"}, Turns: []AgentTurn{{Prompt: "/compact hang"}}, Want: []string{"[compaction c1] failed  error: compaction timed out*"}},
		},
		{
			Name: "one-terminal-only", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "A second terminal report is dropped: exactly one terminal update per ID.",
			Turns: []Turn{prompt(start("cmp_1"), complete("cmp_1"), wantErr(fail("cmp_1", "late"), emitter.ErrSettled), wantErr(cancel("cmp_1"), emitter.ErrSettled))},
			Want:  []string{"[compaction cmp_1] completed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact twice"}}, Want: agentTwiceWant()},
		},
		{
			Name: "crash", Bullet: BulletLifecycle, Client: V1Capable,
			Doc:   "The runtime panics mid-compaction, after a chunk: the compaction is settled failed before the prompt's error response, and the partial summary is cleared.",
			NoKit: "a panicking handler ends the test process; agentkit's panic tests run it in a subprocess",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "## Retained"), fail("cmp_1", emitter.ErrAgentCrashed.Error()))},
			Want:  []string{"[compaction cmp_1] failed  error: the agent crashed during compaction"},
			// The partial summary streamed before the panic is cleared, as
			// the replay of the compaction's record clears it.
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact panic"}},
				Want: []string{"[compaction c1] failed  error: the agent crashed during compaction"}},
		},
	}
}

// summaryScenarios: chunks append in receive order; a summary replaces, null
// or [] clears, omission keeps; nothing follows a terminal update.
func summaryScenarios() []Scenario {
	return []Scenario{
		{
			Name: "chunk-order", Bullet: BulletSummary, Client: V1Capable,
			Doc: "Chunks append in order; the completion omits the summary and keeps them.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "one "), chunk("cmp_1", "two "), chunk("cmp_1", "three"),
				expect("[compaction cmp_1] in_progress  summary: one two three"), complete("cmp_1"))},
			Want:    []string{"[compaction cmp_1] completed  summary: one two three"},
			NoAgent: "the scenario agent's /compact replaces its chunks; see authoritative-replacement",
		},
		{
			Name: "first-seen-initialization", Bullet: BulletSummary, Client: V1Capable,
			Doc: "The emitter refuses a chunk before the start (nothing is sent), and its first update for an ID is a bare in_progress: the client's first-seen initialization needs nothing else.",
			Turns: []Turn{prompt(wantErr(chunk("cmp_1", "early"), emitter.ErrNotOpen), start("cmp_1"),
				expect("[compaction cmp_1] in_progress"), chunk("cmp_1", "x"), complete("cmp_1"))},
			Want:    []string{"[compaction cmp_1] completed  summary: x"},
			NoAgent: "the scenario agent cannot be made to chunk before a start",
		},
		{
			Name: "first-seen-by-chunk", Bullet: BulletSummary, Client: V1Capable,
			Doc: "A chunk for a first-seen ID (sent verbatim, as agents not on the emitter may) creates an in_progress entity holding it.",
			Turns: []Turn{prompt(
				raw(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_9","content":{"type":"text","text":"x"}}`),
				expect("[compaction cmp_9] in_progress  summary: x"),
				raw(`{"sessionUpdate":"compaction_update","compactionId":"cmp_9","status":"completed"}`))},
			Want:    []string{"[compaction cmp_9] completed  summary: x"},
			NoAgent: "the scenario agent cannot be made to chunk before a start",
		},
		{
			Name: "authoritative-replacement", Bullet: BulletSummary, Client: V1Capable,
			Doc: "The completion's summary replaces everything streamed.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "draft one"), chunk("cmp_1", " draft two"),
				expect("[compaction cmp_1] in_progress  summary: draft one draft two"), completeWith("cmp_1", "## Final", " summary"))},
			Want:  []string{"[compaction cmp_1] completed  summary: ## Final summary"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact"}}, Want: agentCompactWant()},
		},
		{
			Name: "clearing-null", Bullet: BulletSummary, Client: V1Capable,
			Doc:   "summary: null clears what was streamed.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "draft"), Step{Op: OpComplete, ID: "cmp_1", Summary: ClearSummary})},
			Want:  []string{"[compaction cmp_1] completed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact fail"}}, Want: agentFailWant()},
		},
		{
			Name: "clearing-empty", Bullet: BulletSummary, Client: V1Capable,
			Doc:     "A summary with no blocks clears what was streamed too.",
			Turns:   []Turn{prompt(start("cmp_1"), chunk("cmp_1", "draft"), Step{Op: OpComplete, ID: "cmp_1", Summary: EmptySummary})},
			Want:    []string{"[compaction cmp_1] completed"},
			NoAgent: "the scenario agent clears with null only (see clearing-null)",
		},
		{
			Name: "completion-omits-summary", Bullet: BulletSummary, Client: V1Capable,
			Doc:   "A completion without a summary keeps the streamed one; one without any summary at all leaves none.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "a"), chunk("cmp_1", "b"), complete("cmp_1"), start("cmp_2"), complete("cmp_2"))},
			Want:  []string{"[compaction cmp_1] completed  summary: ab", "[compaction cmp_2] completed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact nosummary"}}, Want: agentNoSummaryWant()},
		},
		{
			Name: "chunks-after-terminal", Bullet: BulletSummary, Client: V1Capable,
			Doc: "Chunks after the terminal update (completed or failed) are dropped before the wire.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "kept"), complete("cmp_1"), wantErr(chunk("cmp_1", " late"), emitter.ErrSettled),
				start("cmp_2"), fail("cmp_2", "boom"), wantErr(chunk("cmp_2", "late"), emitter.ErrSettled))},
			Want:    []string{"[compaction cmp_1] completed  summary: kept", "[compaction cmp_2] failed  error: boom"},
			NoAgent: "the scenario agent cannot be made to chunk after a terminal update",
		},
		{
			Name: "failure-after-partial-output", Bullet: BulletSummary, Client: V1Capable,
			Doc: "A failure after streamed output: the partial summary was never confirmed, so it goes whether the failure omits the summary or clears it; a failure that confirms it as its summary keeps it.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "partial"), fail("cmp_1", "boom"),
				start("cmp_2"), chunk("cmp_2", "partial"), Step{Op: OpFail, ID: "cmp_2", Err: "boom", Summary: ClearSummary},
				start("cmp_3"), chunk("cmp_3", "partial"), Step{Op: OpFail, ID: "cmp_3", Err: "boom", Summary: SetSummary, Texts: []string{"partial"}})},
			Want: []string{"[compaction cmp_1] failed  error: boom", "[compaction cmp_2] failed  error: boom",
				"[compaction cmp_3] failed  summary: partial  error: boom"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact fail"}}, Want: agentFailWant()},
		},
		{
			Name: "cancellation-after-partial-output", Bullet: BulletSummary, Client: V1Capable,
			Doc: "A cancel after streamed output, reported by the runtime or settled at the end of the turn: the partial summary goes either way.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "partial"), start("cmp_2"), chunk("cmp_2", "partial"), userCancel(),
				Step{Op: OpCancel, ID: "cmp_1", Summary: ClearSummary})},
			Want:  []string{"[compaction cmp_1] cancelled", "[compaction cmp_2] cancelled"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact slow", Cancel: true}}, Want: []string{"[compaction c1] cancelled"}},
		},
		{
			Name: "turn-ended-after-partial-output", Bullet: BulletSummary, Client: V1Capable,
			Doc:   "The turn ends while a compaction that streamed output is open: the settlement by the turn's end fails it and clears the partial summary, as its replay does.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "partial"), expect("[compaction cmp_1] in_progress  summary: partial"))},
			Want:  []string{"[compaction cmp_1] failed  error: the turn ended before the compaction finished"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact panic"}},
				Want: []string{"[compaction c1] failed  error: the agent crashed during compaction"}},
		},
		{
			Name: "interleaved-compactions", Bullet: BulletSummary, Client: V1Capable,
			Doc: "Two open compactions: each ID's chunks append to its own entity, in receive order.",
			Turns: []Turn{prompt(start("cmp_1"), start("cmp_2"), chunk("cmp_1", "one"), chunk("cmp_2", "two"), chunk("cmp_1", " more"),
				complete("cmp_2"), complete("cmp_1"))},
			Want:  []string{"[compaction cmp_1] completed  summary: one more", "[compaction cmp_2] completed  summary: two"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact twice"}}, Want: agentTwiceWant()},
		},
	}
}

// replayScenarios: a replay reproduces each settled compaction once,
// terminal-first, with authoritative summary and error patches, so a
// client that still holds the entity does not get its content twice.
func replayScenarios() []Scenario {
	live := prompt(message("before"), start("cmp_1"), chunk("cmp_1", "## Kept "), chunk("cmp_1", "context"), complete("cmp_1"), message("after"))
	history := load(message("before"), replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Summary: text("## Kept context"), Displayable: true}), message("after"))
	agent := &AgentScript{Turns: []AgentTurn{{Prompt: "/compact"}, {Load: true}}, Want: agentCapabilityWant(true), WantReplay: agentReplayWant(true)}
	return []Scenario{
		{
			Name: "reconnect-v1-message-boundary", Bullet: BulletReplay, Client: V1Capable,
			Doc:             "After a reconnect, the replay puts the compaction between the ID-less message chunks on either side, and the client that held the streamed summary still holds it once.",
			Turns:           []Turn{live, reconnect, history},
			WantCompactions: []string{"[compaction cmp_1] completed  summary: ## Kept context"},
			WantReplay:      []string{"[agent] before", "[compaction cmp_1] completed  summary: ## Kept context", "[agent] after"},
			Agent:           agent,
		},
		{
			Name: "reconnect-v2", Bullet: BulletReplay, Client: V2,
			Doc:             "The same on v2, replayed by session/resume with replayFrom start.",
			Turns:           []Turn{live, reconnect, history},
			WantCompactions: []string{"[compaction cmp_1] completed  summary: ## Kept context"},
			WantReplay:      []string{"[agent] before", "[compaction cmp_1] completed  summary: ## Kept context", "[agent] after"},
			Agent:           &AgentScript{Turns: agent.Turns, Want: agentV2ReplayWant(), WantReplay: agentV2ReplayOnlyWant()},
		},
		{
			Name: "replay-twice", Bullet: BulletReplay, Client: V1Capable,
			Doc: "Replaying twice on one connection still leaves one summary.",
			Turns: []Turn{
				prompt(start("cmp_1"), chunk("cmp_1", "## Kept"), complete("cmp_1")),
				load(replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Summary: text("## Kept"), Displayable: true})),
				load(replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Summary: text("## Kept"), Displayable: true})),
			},
			Want:       []string{"[compaction cmp_1] completed  summary: ## Kept"},
			WantReplay: []string{"[compaction cmp_1] completed  summary: ## Kept"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact"}, {Load: true}, {Load: true}}, WantReplay: agentReplayWant(true),
				Want: agentReplayTwiceWant()},
		},
		{
			Name: "replay-clears-what-the-runtime-did-not-keep", Bullet: BulletReplay, Client: V1Capable,
			Doc: "A failed compaction that streamed output is replayed with summary null and its error: the held partial summary is cleared, not kept beside a second copy.",
			Turns: []Turn{
				prompt(start("cmp_1"), chunk("cmp_1", "partial"), fail("cmp_1", "boom")),
				reconnect,
				load(replay(emitter.Record{ID: "cmp_1", Status: protocol.Failed, Error: "boom"})),
			},
			Want:       []string{"[compaction cmp_1] failed  error: boom"},
			WantReplay: []string{"[compaction cmp_1] failed  error: boom"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact fail"}, {Load: true}}, Want: agentFailReplayWant(),
				WantReplay: agentFailReplayOnlyWant()},
		},
		{
			Name: "replay-skips-running", Bullet: BulletReplay, Client: V1Capable,
			Doc: "A compaction still running elsewhere is not replayed (no live turn here would settle it); its ID stays used.",
			Turns: []Turn{
				load(message("before"), replay(emitter.Record{ID: "cmp_1", Status: protocol.InProgress})),
				prompt(wantErr(start("cmp_1"), emitter.ErrIDReused), start("cmp_2"), complete("cmp_2")),
			},
			Want:       []string{"[agent] before", "[compaction cmp_2] completed"},
			WantReplay: []string{"[agent] before"},
			NoAgent:    "the scenario agent's history is only what it ran itself",
		},
		{
			Name: "replayed-id-never-reused", Bullet: BulletReplay, Client: V1Capable,
			Doc: "After a replay, the replayed ID cannot start a new compaction on the new connection.",
			Turns: []Turn{
				prompt(start("cmp_1"), complete("cmp_1")),
				reconnect,
				load(replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed})),
				prompt(wantErr(start("cmp_1"), emitter.ErrIDReused), start("cmp_2"), complete("cmp_2")),
			},
			Want:    []string{"[compaction cmp_1] completed", "[compaction cmp_2] completed"},
			NoAgent: "the scenario agent mints its own IDs",
		},
	}
}

// unknownV2Scenarios: statuses the client does not know are kept as
// opaque states, and v2 connections get the same lifecycle with v2's
// state_update turns and _meta merge.
func unknownV2Scenarios() []Scenario {
	ext := func(name string, c Client, status string) Scenario {
		return Scenario{
			Name: name, Bullet: BulletUnknownV2, Client: c,
			Doc: "A " + status + " status (sent verbatim between the emitter's updates) is preserved as an opaque state, and the later terminal update ends the lifecycle.",
			Turns: []Turn{prompt(start("cmp_1"),
				raw(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"`+status+`"}`),
				expect("[compaction cmp_1] "+status), complete("cmp_1"))},
			Want:    []string{"[compaction cmp_1] completed"},
			NoAgent: "the scenario agent sends only the statuses ACP defines",
		}
	}
	return []Scenario{
		ext("extension-status", V1Capable, "_vendor_paused"),
		ext("future-status", V1Capable, "archived"),
		ext("extension-status-v2", V2, "_vendor_paused"),
		{
			Name: "unknown-status-not-replayed", Bullet: BulletUnknownV2, Client: V1Capable,
			Doc:        "A record with an unknown status is not terminal, so it is not replayed.",
			Turns:      []Turn{load(replay(emitter.Record{ID: "cmp_1", Status: "_vendor_paused"}))},
			Want:       nil,
			WantReplay: []string{},
			NoAgent:    "the scenario agent's history is only what it ran itself",
		},
		{
			Name: "v2-completed", Bullet: BulletUnknownV2, Client: V2,
			Doc:   "A v2 compaction with chunks and a replacing summary, before the idle state_update.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "draft"), completeWith("cmp_1", "## Kept"))},
			Want:  []string{"[compaction cmp_1] completed  summary: ## Kept"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact"}}, Want: agentV2CompactWant()},
		},
		{
			Name: "v2-failed", Bullet: BulletUnknownV2, Client: V2,
			Doc:   "A v2 failure after a chunk: the draft is cleared.",
			Turns: []Turn{prompt(start("cmp_1"), chunk("cmp_1", "draft"), fail("cmp_1", "summary request failed"))},
			Want:  []string{"[compaction cmp_1] failed  error: summary request failed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact fail"}}, Want: agentV2FailWant()},
		},
		{
			Name: "v2-cancelled", Bullet: BulletUnknownV2, Client: V2,
			Doc:   "A v2 cancel settles the compaction before the idle state_update.",
			Turns: []Turn{prompt(start("cmp_1"), userCancel())},
			Want:  []string{"[compaction cmp_1] cancelled"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact slow", Cancel: true}}, Want: agentV2CancelWant()},
		},
		{
			Name: "v2-meta-merge", Bullet: BulletUnknownV2, Client: V2,
			Doc: "v2 merges a compaction_update's _meta by key, so the terminal update sends only its own keys; the client ends with both.",
			Turns: []Turn{prompt(Step{Op: OpStart, ID: "cmp_1", Meta: protocol.Meta{"a": json.RawMessage(`1`)}},
				Step{Op: OpComplete, ID: "cmp_1", Meta: protocol.Meta{"b": json.RawMessage(`2`)}})},
			Want:    []string{`[compaction cmp_1] completed  _meta: {"a":1,"b":2}`},
			NoAgent: "the scenario agent's _meta carries timings; the agent rows leave _meta out",
		},
		{
			Name: "v1-meta-replace", Bullet: BulletUnknownV2, Client: V1Capable,
			Doc: "v1 replaces _meta whole, so the terminal update repeats the start's keys; the client ends with the same object as on v2.",
			Turns: []Turn{prompt(Step{Op: OpStart, ID: "cmp_1", Meta: protocol.Meta{"a": json.RawMessage(`1`)}},
				Step{Op: OpComplete, ID: "cmp_1", Meta: protocol.Meta{"b": json.RawMessage(`2`)}})},
			Want:    []string{`[compaction cmp_1] completed  _meta: {"a":1,"b":2}`},
			NoAgent: "the scenario agent's _meta carries timings; the agent rows leave _meta out",
		},
	}
}

// omissionScenarios: a summary the runtime did not mark user-displayable
// never leaves the process, live or replayed, and neither does error text
// unfit for the user.
func omissionScenarios() []Scenario {
	return []Scenario{
		{
			Name: "not-displayable", Bullet: BulletSafeOmission, Client: V1Capable,
			Doc: "Chunks and the final summary of a compaction not marked user-displayable are withheld (Chunk says so: ErrWithheld); the completion omits the summary.",
			Turns: []Turn{prompt(startHidden("cmp_1"), withheld("cmp_1", "secret"), expect("[compaction cmp_1] in_progress"),
				completeWith("cmp_1", "secret summary"))},
			Want:  []string{"[compaction cmp_1] completed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact nosummary"}}, Want: agentNoSummaryWant()},
		},
		{
			Name: "not-displayable-v2", Bullet: BulletSafeOmission, Client: V2,
			Doc:   "The same on v2.",
			Turns: []Turn{prompt(startHidden("cmp_1"), withheld("cmp_1", "secret"), completeWith("cmp_1", "secret summary"))},
			Want:  []string{"[compaction cmp_1] completed"},
			Agent: &AgentScript{Turns: []AgentTurn{{Prompt: "/compact nosummary"}}, Want: agentV2NoSummaryWant()},
		},
		{
			Name: "not-displayable-failure", Bullet: BulletSafeOmission, Client: V1Capable,
			Doc:     "A failed compaction not marked user-displayable shows its error, never its partial summary.",
			Turns:   []Turn{prompt(startHidden("cmp_1"), withheld("cmp_1", "secret"), fail("cmp_1", "boom"))},
			Want:    []string{"[compaction cmp_1] failed  error: boom"},
			NoAgent: "the scenario agent marks its summaries user-displayable",
		},
		{
			Name: "not-displayable-replay", Bullet: BulletSafeOmission, Client: V1Capable,
			Doc: "A replayed record whose summary is not marked user-displayable replays summary: null.",
			Turns: []Turn{
				prompt(startHidden("cmp_1"), withheld("cmp_1", "secret"), complete("cmp_1")),
				reconnect,
				load(replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Summary: text("secret")})),
			},
			Want:       []string{"[compaction cmp_1] completed"},
			WantReplay: []string{"[compaction cmp_1] completed"},
			NoAgent:    "the scenario agent marks its summaries user-displayable",
		},
		{
			Name: "unfit-error-text", Bullet: BulletSafeOmission, Client: V1Capable,
			Doc:     "A stack trace is not shown as the error: the generic text is.",
			Turns:   []Turn{prompt(start("cmp_1"), fail("cmp_1", "panic: boom\n\ngoroutine 7 [running]:\nmain.compact()"))},
			Want:    []string{"[compaction cmp_1] failed  error: Compaction failed"},
			NoAgent: "the scenario agent's failures are single-line prose",
		},
	}
}
