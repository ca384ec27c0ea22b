package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dump prints a timeline one item a line, precisely enough to compare:
// summaries keep their block boundaries, unset fields are left out.
func dump(items []conformance.Item) string {
	var b strings.Builder
	for _, it := range items {
		switch it.Kind {
		case conformance.KindCompaction:
			fmt.Fprintf(&b, "compaction %s %s", it.ID, it.Status)
			if it.Summary != nil {
				fmt.Fprintf(&b, " summary=%s", blocks(it.Summary))
			}
			if it.Error != nil {
				fmt.Fprintf(&b, " error=%q", *it.Error)
			}
			if it.Meta != nil {
				m, _ := json.Marshal(it.Meta)
				fmt.Fprintf(&b, " meta=%s", m)
			}
		case conformance.KindUserMessage, conformance.KindAgentMessage, conformance.KindAgentThought:
			b.WriteString(string(it.Kind))
			if it.ID != "" {
				b.WriteString("[" + it.ID + "]")
			}
			fmt.Fprintf(&b, " %q", it.Text)
		default:
			fmt.Fprintf(&b, "%s %s %s %q", it.Kind, it.ID, it.Status, it.Text)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func blocks(bs []json.RawMessage) string {
	var parts []string
	for _, raw := range bs {
		var b struct{ Type, Text string }
		_ = json.Unmarshal(raw, &b)
		if b.Type == "text" {
			parts = append(parts, fmt.Sprintf("%q", b.Text))
		} else {
			parts = append(parts, "<"+b.Type+">")
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// reducerCases follow the RFD's sentences, grouped by the bullets of its
// "Preview validation" section that concern a client. The capability
// bullet is the agent's obligation and is covered by the checker tests.
var reducerCases = []struct {
	rfd     string
	version int // 0 means 1
	updates []string
	want    string
}{
	// Lifecycle transitions to completed, failed, and cancelled, including
	// runtimes that only expose completed compactions.
	{
		rfd:     "The Agent finishes the same entity by reusing its ID.",
		updates: []string{cu("cmp_1", "in_progress"), cu("cmp_1", "completed")},
		want:    "compaction cmp_1 completed\n",
	},
	{
		rfd:     "failed: Compaction finished unsuccessfully (error is a human-readable description).",
		updates: []string{cu("cmp_1", "in_progress"), cu("cmp_1", "failed", `"error":"context still too large"`)},
		want:    "compaction cmp_1 failed error=\"context still too large\"\n",
	},
	{
		rfd:     "cancelled: Compaction was cancelled before it finished.",
		updates: []string{cu("cmp_1", "in_progress"), cu("cmp_1", "cancelled")},
		want:    "compaction cmp_1 cancelled\n",
	},
	{
		rfd:     "A single compaction_update with status: completed is sufficient; reporting progress is optional.",
		updates: []string{cu("cmp_1", "completed", `"summary":[{"type":"text","text":"s"}]`)},
		want:    "compaction cmp_1 completed summary=[\"s\"]\n",
	},

	// Summary chunk ordering and first-seen ID initialization,
	// authoritative replacement and clearing, completion with an omitted
	// summary, chunks after terminal updates, and failure or cancellation
	// after partial output.
	{
		rfd:     "Clients initialize a first-seen compaction ID with status in_progress and unset optional fields, then apply the notification (a chunk).",
		updates: []string{chunk("cmp_1", "## Retained")},
		want:    "compaction cmp_1 in_progress summary=[\"## Retained\"]\n",
	},
	{
		rfd:     "On a first-seen ID, omission and null both start with no value.",
		updates: []string{cu("cmp_1", "in_progress", `"summary":null`, `"error":null`, `"_meta":null`)},
		want:    "compaction cmp_1 in_progress\n",
	},
	{
		rfd:     "A chunk appends its content block to the current summary (in receive order).",
		updates: []string{cu("cmp_1", "in_progress"), chunk("cmp_1", "a"), chunk("cmp_1", "b"), chunk("cmp_1", "c")},
		want:    "compaction cmp_1 in_progress summary=[\"a\" \"b\" \"c\"]\n",
	},
	{
		rfd:     "Summary is a ContentBlock[]: non-text blocks are kept as blocks.",
		updates: []string{chunk("cmp_1", "a"), `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"image","mimeType":"image/png","data":"AA=="}}`},
		want:    "compaction cmp_1 in_progress summary=[\"a\" <image>]\n",
	},
	{
		rfd:     "A later compaction_update with a concrete summary array replaces all content accumulated from earlier updates and chunks; subsequent chunks append to that replacement.",
		updates: []string{chunk("cmp_1", "a"), chunk("cmp_1", "b"), cu("cmp_1", "in_progress", `"summary":[{"type":"text","text":"R"}]`), chunk("cmp_1", "c")},
		want:    "compaction cmp_1 in_progress summary=[\"R\" \"c\"]\n",
	},
	{
		rfd:     "summary: [] clears the accumulated content.",
		updates: []string{chunk("cmp_1", "a"), cu("cmp_1", "in_progress", `"summary":[]`)},
		want:    "compaction cmp_1 in_progress\n",
	},
	{
		rfd:     "summary: null clears the accumulated content; later chunks start afresh.",
		updates: []string{chunk("cmp_1", "a"), cu("cmp_1", "in_progress", `"summary":null`), chunk("cmp_1", "b")},
		want:    "compaction cmp_1 in_progress summary=[\"b\"]\n",
	},
	{
		rfd:     "An update may omit summary to retain the content accumulated from chunks.",
		updates: []string{chunk("cmp_1", "a"), chunk("cmp_1", "b"), cu("cmp_1", "completed")},
		want:    "compaction cmp_1 completed summary=[\"a\" \"b\"]\n",
	},
	{
		rfd:     "Clients apply chunks in receive order for each compactionId, so a chunk after the terminal update still appends (the checker flags it).",
		updates: []string{cu("cmp_1", "completed", `"summary":[{"type":"text","text":"s"}]`), chunk("cmp_1", "late")},
		want:    "compaction cmp_1 completed summary=[\"s\" \"late\"]\n",
	},
	{
		rfd:     "Failure after partial output: omitting summary keeps the partial content, the error is set.",
		updates: []string{chunk("cmp_1", "partial"), cu("cmp_1", "failed", `"error":"overloaded"`)},
		want:    "compaction cmp_1 failed summary=[\"partial\"] error=\"overloaded\"\n",
	},
	{
		rfd:     "Cancellation after partial output: summary null clears what was streamed.",
		updates: []string{chunk("cmp_1", "partial"), cu("cmp_1", "cancelled", `"summary":null`)},
		want:    "compaction cmp_1 cancelled\n",
	},
	{
		rfd:     "For each patch field, omission leaves the stored value unchanged, null clears it, and a concrete value replaces it (error).",
		updates: []string{cu("cmp_1", "in_progress", `"error":"first"`), cu("cmp_1", "in_progress"), cu("cmp_1", "in_progress", `"error":"second"`), cu("cmp_1", "failed")},
		want:    "compaction cmp_1 failed error=\"second\"\n",
	},
	{
		rfd:     "null clears error.",
		updates: []string{cu("cmp_1", "failed", `"error":"x"`), cu("cmp_1", "failed", `"error":null`)},
		want:    "compaction cmp_1 failed\n",
	},
	{
		rfd:     "A malformed optional field is read as omitted, as the official SDK delivers it (summary a string, error a number, _meta a string).",
		updates: []string{cu("cmp_1", "in_progress", `"summary":[{"type":"text","text":"s"}]`, `"error":"e"`, `"_meta":{"k":1}`), cu("cmp_1", "completed", `"summary":"text"`, `"error":7`, `"_meta":"x"`)},
		want:    "compaction cmp_1 completed summary=[\"s\"] error=\"e\" meta={\"k\":1}\n",
	},
	{
		rfd:     "compaction_summary_chunk _meta is scoped to that chunk; it does not touch the entity's _meta.",
		updates: []string{cu("cmp_1", "in_progress", `"_meta":{"k":1}`), `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"a"},"_meta":{"chunk":true}}`},
		want:    "compaction cmp_1 in_progress summary=[\"a\"] meta={\"k\":1}\n",
	},
	{
		rfd:     "v1: _meta on compaction_update replaces the stored object.",
		updates: []string{cu("cmp_1", "in_progress", `"_meta":{"a":1,"b":{"x":1}}`), cu("cmp_1", "completed", `"_meta":{"b":{"y":2}}`)},
		want:    "compaction cmp_1 completed meta={\"b\":{\"y\":2}}\n",
	},
	{
		rfd:     "v1: _meta null clears it.",
		updates: []string{cu("cmp_1", "in_progress", `"_meta":{"a":1}`), cu("cmp_1", "completed", `"_meta":null`)},
		want:    "compaction cmp_1 completed\n",
	},

	// History replay without duplicating accumulated summary content after
	// reconnecting, including v1 message chunks without IDs on either side
	// of a compaction boundary.
	{
		rfd: "The first notification fixes the entity's timeline position: it follows previously received timeline content and precedes content first received later (v1 chunks without IDs on either side).",
		updates: []string{
			msg("agent_message_chunk", "Before the "), msg("agent_message_chunk", "boundary."),
			cu("cmp_1", "in_progress"),
			msg("agent_message_chunk", "After "), msg("agent_message_chunk", "it."),
		},
		want: lines(`agent_message "Before the boundary."`, "compaction cmp_1 in_progress", `agent_message "After it."`),
	},
	{
		rfd: "Later patches or chunks for an ID-addressed entity update it in place; they do not move or split it around the compaction.",
		updates: []string{
			msg("agent_message_chunk", "Before."),
			cu("cmp_1", "in_progress"),
			msg("agent_message_chunk", "After "),
			chunk("cmp_1", "s"),
			cu("cmp_1", "completed"),
			msg("agent_message_chunk", "still after."),
		},
		want: lines(`agent_message "Before."`, `compaction cmp_1 completed summary=["s"]`, `agent_message "After still after."`),
	},
	{
		rfd: "Message kinds coalesce separately; state updates such as usage_update are not timeline content and split nothing.",
		updates: []string{
			msg("user_message_chunk", "Compact please."),
			msg("agent_thought_chunk", "Thinking."),
			msg("agent_message_chunk", "On "),
			`{"sessionUpdate":"usage_update","used":1,"size":2}`,
			msg("agent_message_chunk", "it."),
		},
		want: lines(`user_message "Compact please."`, `agent_thought "Thinking."`, `agent_message "On it."`),
	},
	{
		rfd:     "History replay uses the same semantics as live delivery: replayed terminal-first after reconnecting, the summary appears once.",
		updates: []string{cu("cmp_1", "completed", `"summary":[{"type":"text","text":"## Retained"}]`)},
		want:    "compaction cmp_1 completed summary=[\"## Retained\"]\n",
	},
	{
		rfd: "Replay does not implicitly reset omitted fields; a replacing summary avoids duplicating content the Client already holds.",
		updates: []string{
			chunk("cmp_1", "## Retained"), cu("cmp_1", "completed", `"error":null`), // live
			cu("cmp_1", "completed"), // replay, summary omitted: kept
			cu("cmp_1", "completed", `"summary":[{"type":"text","text":"## Retained"}]`), // replay, replacing
		},
		want: "compaction cmp_1 completed summary=[\"## Retained\"]\n",
	},
	{
		rfd: "Replayed chunks append to the summary the Client already holds, duplicating it (why replay must be terminal-first).",
		updates: []string{
			chunk("cmp_1", "## Retained"), cu("cmp_1", "completed"), // live
			cu("cmp_1", "in_progress"), chunk("cmp_1", "## Retained"), cu("cmp_1", "completed"), // replay
		},
		want: "compaction cmp_1 completed summary=[\"## Retained\" \"## Retained\"]\n",
	},

	// Unknown statuses and v2 updates, and safe omission of summaries that
	// cannot be exposed to the user.
	{
		rfd:     "Clients preserve an unknown string and present an opaque generic state.",
		updates: []string{cu("cmp_1", "_vendor_verifying"), cu("cmp_2", "paused")},
		want:    lines("compaction cmp_1 _vendor_verifying", "compaction cmp_2 paused"),
	},
	{
		rfd:     "Agents should omit summary when no user-displayable summary is available: the entity completes with no summary.",
		updates: []string{cu("cmp_1", "in_progress"), cu("cmp_1", "completed")},
		want:    "compaction cmp_1 completed\n",
	},
	{
		rfd:     "v2: _meta on compaction_update merges by top-level key; a key set to null is removed; nested objects are replaced, not merged.",
		version: 2,
		updates: []string{
			cu("cmp_1", "in_progress", `"_meta":{"a":1,"b":{"x":1},"c":true}`),
			cu("cmp_1", "completed", `"_meta":{"b":{"y":2},"c":null,"d":"new"}`),
		},
		want: "compaction cmp_1 completed meta={\"a\":1,\"b\":{\"y\":2},\"d\":\"new\"}\n",
	},
	{
		rfd:     "v2: _meta null clears it; a later object starts afresh.",
		version: 2,
		updates: []string{cu("cmp_1", "in_progress", `"_meta":{"a":1}`), cu("cmp_1", "in_progress", `"_meta":null`), cu("cmp_1", "completed", `"_meta":{"b":2}`)},
		want:    "compaction cmp_1 completed meta={\"b\":2}\n",
	},
	{
		rfd:     "v2: message chunks carry a messageId and are addressed by it, in place.",
		version: 2,
		updates: []string{
			`{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"Before "}}`,
			cu("cmp_1", "in_progress"),
			`{"sessionUpdate":"agent_message_chunk","messageId":"m2","content":{"type":"text","text":"After."}}`,
			`{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"boundary."}}`,
			`{"sessionUpdate":"agent_message","messageId":"m2","content":[{"type":"text","text":"After, replaced."}]}`,
			cu("cmp_1", "completed"),
		},
		want: lines(`agent_message[m1] "Before boundary."`, "compaction cmp_1 completed", `agent_message[m2] "After, replaced."`),
	},
	{
		rfd:     "Other timeline updates are kept as generic items, ID-addressed ones patched in place.",
		updates: []string{`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Compact conversation","status":"in_progress"}`, cu("cmp_1", "completed"), `{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}`},
		want:    lines(`tool_call t1 completed "Compact conversation"`, "compaction cmp_1 completed"),
	},
}

func TestReducerFollowsTheRFD(t *testing.T) {
	for _, tc := range reducerCases {
		t.Run(tc.rfd, func(t *testing.T) {
			version := tc.version
			if version == 0 {
				version = 1
			}
			r := conformance.NewReducer(version)
			for _, u := range tc.updates {
				require.NoError(t, r.Apply("s1", json.RawMessage(u)), "Apply(%s)", u)
			}
			assert.Equal(t, tc.want, dump(r.Timeline("s1")), "timeline")
		})
	}
}

func TestReducerDropsWhatAClientDrops(t *testing.T) {
	r := conformance.NewReducer(1)
	for _, u := range []string{
		`[]`,
		`{"compactionId":"cmp_1","status":"in_progress"}`,
		`{"sessionUpdate":"compaction_update","status":"in_progress"}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_1"}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":null}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":"text"}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1"}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"text":"no type"}}`,
	} {
		assert.Error(t, r.Apply("s1", json.RawMessage(u)), "Apply(%s) = nil", u)
	}
	tl := r.Timeline("s1")
	assert.Empty(t, tl, "dropped updates changed the timeline:\n%s", dump(tl))
	assert.Error(t, conformance.NewReducer(3).Apply("s1", json.RawMessage(cu("c", "completed"))), "version 3 accepted")
}

func TestReducerKeepsSessionsApart(t *testing.T) {
	r := conformance.NewReducer(1)
	for _, m := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s2","update":` + cu("cmp_1", "failed") + `}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + cu("cmp_1", "completed") + `}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`,
	} {
		require.NoError(t, r.ApplyMessage(json.RawMessage(m)), "r.ApplyMessage")
	}
	assert.Equal(t, "s2,s1", strings.Join(r.Sessions(), ","), "Sessions()")
	assert.Equal(t, lines("compaction cmp_1 completed", "compaction cmp_1 failed"), dump(r.Timeline("s1"))+dump(r.Timeline("s2")), "timelines")
	assert.Nil(t, r.Timeline("nope"), "unknown session has a timeline")
}

func TestReducerTimelineIsACopy(t *testing.T) {
	r := conformance.NewReducer(1)
	_ = r.Apply("s1", json.RawMessage(cu("cmp_1", "failed", `"error":"e"`, `"_meta":{"k":1}`, `"summary":[{"type":"text","text":"s"}]`)))
	tl := r.Timeline("s1")
	*tl[0].Error = "changed"
	tl[0].Meta["k"] = json.RawMessage(`2`)
	tl[0].Summary[0][0] = 'X'
	assert.Equal(t, "compaction cmp_1 failed summary=[\"s\"] error=\"e\" meta={\"k\":1}\n", dump(r.Timeline("s1")), "caller's edits leaked into the reducer")
}

func TestRender(t *testing.T) {
	r := conformance.NewReducer(1)
	for _, u := range []string{
		msg("user_message_chunk", "Compact please."),
		msg("agent_thought_chunk", "Hmm."),
		msg("agent_message_chunk", "Compacting.\nHold on."),
		cu("cmp_1", "completed", `"summary":[{"type":"text","text":"## Retained\n\nThe schema."}]`),
		cu("cmp_2", "failed", `"error":"too large"`, `"_meta":{"b":2,"a":1}`),
		`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read file","status":"in_progress"}`,
		`{"sessionUpdate":"plan","entries":[]}`,
	} {
		require.NoError(t, r.Apply("s1", json.RawMessage(u)), "r.Apply")
	}
	var b bytes.Buffer
	require.NoError(t, r.Render(&b, "s1"), "r.Render")
	want := lines(
		`[user] Compact please.`,
		`[thought] Hmm.`,
		`[agent] Compacting.\nHold on.`,
		`[compaction cmp_1] completed  summary: ## Retained\n\nThe schema.`,
		`[compaction cmp_2] failed  error: too large  _meta: {"a":1,"b":2}`,
		`[tool_call t1] in_progress  Read file`,
		`[plan]`,
	)
	assert.Equal(t, want, b.String(), "Render")
}

// Addressed names the item each update made or patched, as a client that
// shows updates in place finds the row to change: a chunk without an ID
// patches the message before it, a state update or a refused one touches
// none.
func TestAddressedNamesTheItemAnUpdateTouched(t *testing.T) {
	r := conformance.NewReducer(2)
	assert.Equal(t, -1, r.Addressed("s1"), "before any update")
	for i, step := range []struct {
		update string
		want   int
	}{
		{`{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"a"}}`, 0},
		{`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"b"}}`, 1},
		{`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"c"}}`, 1},
		{`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"in_progress"}`, 2},
		{`{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"d"}}`, 0},
		{`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"s"}}`, 2},
		{`{"sessionUpdate":"tool_call","toolCallId":"t1","status":"pending"}`, 3},
		{`{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}`, -1},
		{`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}`, 3},
		{`{"sessionUpdate":"compaction_update"}`, -1},
	} {
		_ = r.Apply("s1", json.RawMessage(step.update))
		assert.Equal(t, step.want, r.Addressed("s1"), "step %d: %s", i, step.update)
	}
	assert.Equal(t, -1, r.Addressed("s2"), "a session with no update")
}
