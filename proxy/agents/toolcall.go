package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/jsonedit"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/protocol"
)

// The "Compact conversation" tool call: a form two families share (Claude
// ACP from 0.75 to a client without the capability, codex-acp
// TypeScript), and this project's own tool call fallback.

// ToolCall: a tool_call titled "Compact conversation" (or whose
// _meta.claudeCode.toolName is "compact") and its tool_call_updates
// (Claude Agent ACP 0.75+, codex-acp TypeScript).
const ToolCall Translator = "toolcall"

const (
	compactToolTitle = "Compact conversation"
	compactToolName  = "compact"
	toolFailedPrefix = "Compaction failed: "
	toolFailedBare   = "Compaction failed"
	toolCancelled    = "Compaction cancelled"
)

func init() {
	register([]Def{{
		Name: ToolCall, Kinds: []string{"tool_call", "tool_call_update", "agent_message_chunk"},
		Update: toolCallSignal, Synth: toolCallSynth{}, ToolCall: true,
	}})
}

type toolContent struct {
	Type    string `json:"type"`
	Content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// claudeRawOutput is the rawOutput Claude ACP sends with its compaction
// tool call: the facts after completion.
type claudeRawOutput struct {
	Trigger    string `json:"trigger"`
	PreTokens  int64  `json:"preTokens"`
	PostTokens int64  `json:"postTokens"`
	DurationMs *int64 `json:"durationMs"`
}

// read returns the trigger and the facts Claude reported (nil when none).
func (ro claudeRawOutput) read() (protocol.Trigger, *Facts) {
	var trigger protocol.Trigger
	switch ro.Trigger {
	case "manual":
		trigger = protocol.Manual
	case "auto", "automatic":
		trigger = protocol.Auto
	}
	if ro.PreTokens > 0 || ro.PostTokens > 0 || ro.DurationMs != nil {
		return trigger, &Facts{TokensBefore: ro.PreTokens, TokensAfter: ro.PostTokens, DurationMs: ro.DurationMs}
	}
	return trigger, nil
}

// airCompaction reads _meta.jetbrains.air.contextCompaction, what Claude
// ACP sends a JetBrains AIR client in place of a tool call's rawOutput
// (nil when meta has none).
func airCompaction(meta json.RawMessage) *claudeRawOutput {
	var air struct {
		JetBrains struct {
			Air struct {
				CC *claudeRawOutput `json:"contextCompaction"`
			} `json:"air"`
		} `json:"jetbrains"`
	}
	if json.Unmarshal(meta, &air) != nil {
		return nil
	}
	return air.JetBrains.Air.CC
}

// AIRFacts reads the facts of a compaction_update that Claude ACP sends a
// JetBrains AIR client (update is the update object): air says the update
// carries _meta.jetbrains.air.contextCompaction at all, facts what it
// reported there (nil while it says nothing but its version: Claude's
// first completed update, whose facts follow in a second one).
func AIRFacts(update json.RawMessage) (air bool, trigger protocol.Trigger, facts *Facts) {
	var u struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(update, &u) != nil || len(u.Meta) == 0 {
		return false, "", nil
	}
	cc := airCompaction(u.Meta)
	if cc == nil {
		return false, "", nil
	}
	trigger, facts = cc.read()
	return true, trigger, facts
}

// toolCallSignal reads the compaction tool call ("Compact conversation")
// and its updates; in a message chunk, the provider's error text said
// while one is open (ErrorText).
func toolCallSignal(s State, u *Update) (Signal, Verdict) {
	if u.Kind == "agent_message_chunk" {
		if u.Quirks&ErrorText == 0 {
			return Signal{}, NotMine
		}
		if text, ok := toolErrorText(s, u); ok {
			return Signal{Kind: Note, Reason: text}, Noted
		}
		return Signal{}, NotMine
	}
	toolID, _ := skim.String(u.ToolCallID)
	if toolID == "" || !skim.Exact(u.ToolCallID) {
		return Signal{}, NotMine // an ID clients may decode otherwise is not followed
	}
	sig := Signal{ID: protocol.ID(toolID)}
	if u.Kind == "tool_call" {
		title, _ := skim.String(u.Title)
		name, _ := skim.String(u.ToolName)
		sig.NewTool = title == compactToolTitle || name == compactToolName
	}
	if !sig.NewTool && !s.IsTool(toolID) {
		return Signal{}, NotMine
	}
	// A compaction tool call's updates are few: read them whole, for what
	// a rewriting must keep.
	var m struct {
		Meta      json.RawMessage `json:"_meta"`
		RawOutput json.RawMessage `json:"rawOutput"`
		Content   []toolContent   `json:"content"`
	}
	_ = json.Unmarshal(u.Raw, &m) // what is unreadable is simply not kept
	sig.ToolMeta = m.Meta
	// The facts: Claude ACP's rawOutput, or, to a JetBrains AIR client,
	// the same in _meta.jetbrains.air.contextCompaction (no rawOutput).
	var ro claudeRawOutput
	switch {
	case len(m.RawOutput) > 0 && !skim.IsNull(m.RawOutput):
		sig.RawOutput = m.RawOutput
		_ = json.Unmarshal(m.RawOutput, &ro)
	case len(m.Meta) > 0:
		if cc := airCompaction(m.Meta); cc != nil {
			ro = *cc
		}
	}
	sig.Trigger, sig.Facts = ro.read()
	switch status, _ := skim.String(u.Status); status {
	case "completed":
		sig.Kind = Completed
		sig.FactsFollow = u.Quirks&RawOutputFollows != 0
	case "failed":
		sig.Kind, sig.Reason = Failed, toolFailure(m.Content)
		if sig.Reason == toolCancelled || sig.Reason == toolCancelled+"." {
			// This project's tool call fallback (and an agent built on
			// it) says a cancel so, since ACP tool calls have no
			// cancelled status.
			sig.Kind, sig.Reason = Aborted, ""
		}
	default:
		sig.Kind = Progress
		if u.Kind == "tool_call" {
			sig.Kind = Start
		}
	}
	return sig, Found
}

// toolErrorText reads the text of a message chunk said while a compaction
// tool call of the session is open (ErrorText): codex-acp's provider
// error, which a failure the proxy settles then carries.
func toolErrorText(s State, u *Update) (string, bool) {
	raw := u.ContentText
	if len(raw) < 3 || len(raw) > MaxSignalBytes || HasMessageID(u.Raw) || !s.ToolOpen() {
		return "", false
	}
	text, _ := skim.String(raw)
	text = strings.TrimSpace(text)
	return text, text != ""
}

// toolFailure extracts <err> from the peers' "Compaction failed: <err>".
func toolFailure(content []toolContent) string {
	for _, tc := range content {
		if tc.Content.Type != "text" {
			continue
		}
		t := strings.TrimSpace(tc.Content.Text)
		if t == toolFailedBare || t == toolFailedBare+"." {
			return ""
		}
		return strings.TrimSpace(strings.TrimPrefix(t, toolFailedPrefix))
	}
	return ""
}

// toolCallSynth renders the terminal form the proxy adds to an agent's own
// "Compact conversation" tool call: a tool_call_update of the agent's tool
// call ID (the compaction ID here) to failed, since ACP tool calls have no
// cancelled status; and, while it is open, an in_progress update as its
// heartbeat.
type toolCallSynth struct{}

type toolCallUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"`
	ToolCallID    string            `json:"toolCallId"`
	Status        string            `json:"status"`
	Content       []toolCallContent `json:"content,omitempty"`
}

type toolCallContent struct {
	Type    string                `json:"type"`
	Content protocol.ContentBlock `json:"content"`
}

// Render implements emitter.Renderer.
func (toolCallSynth) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	switch ev.Kind {
	case emitter.EventHeartbeat:
		return n.Notify(ctx, ev.SessionID, toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: string(ev.ID), Status: "in_progress"})
	case emitter.EventSettled:
	default:
		return nil
	}
	u := toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: string(ev.ID), Status: "completed"}
	if ev.Status != protocol.Completed {
		text := toolCancelled
		if ev.Status != protocol.Cancelled {
			text = toolFailedBare
			if e, _ := ev.Error.Get(); e != "" && e != toolFailedBare {
				text = toolFailedPrefix + e
			}
		}
		u.Status = "failed"
		u.Content = []toolCallContent{{Type: "content", Content: protocol.Text(text)}}
	}
	return n.Notify(ctx, ev.SessionID, u)
}

// KeepToolCall returns a Notifier that rewrites the tool call a fallback
// renders for a compaction (tool call ID from) into the agent's own tool
// call (ID to), keeping the agent's _meta (merged under the fallback's)
// and, on its terminal update, its rawOutput.
func KeepToolCall(n emitter.Notifier, from, to string, meta, rawOutput json.RawMessage) emitter.Notifier {
	return &toolCallKeeper{n: n, from: from, to: to, meta: meta, rawOutput: rawOutput}
}

// toolCallKeeper rewrites the tool call a fallback renders for a
// compaction into the agent's own tool call.
type toolCallKeeper struct {
	n               emitter.Notifier
	from, to        string
	meta, rawOutput json.RawMessage
}

// Notify implements emitter.Notifier.
func (k *toolCallKeeper) Notify(ctx context.Context, sid string, update any) error {
	b, err := json.Marshal(update)
	if err != nil {
		return err
	}
	var u map[string]json.RawMessage
	if json.Unmarshal(b, &u) != nil {
		return k.n.Notify(ctx, sid, update)
	}
	var kind, id, status string
	_ = json.Unmarshal(u["sessionUpdate"], &kind)
	_ = json.Unmarshal(u["toolCallId"], &id)
	_ = json.Unmarshal(u["status"], &status)
	if (kind != "tool_call" && kind != "tool_call_update") || id != k.from {
		return k.n.Notify(ctx, sid, update)
	}
	u["toolCallId"], _ = json.Marshal(k.to)
	if len(k.meta) > 0 {
		var agent, mine map[string]json.RawMessage
		if json.Unmarshal(k.meta, &agent) == nil {
			_ = json.Unmarshal(u["_meta"], &mine)
			for key, v := range agent {
				if _, ok := mine[key]; !ok {
					if mine == nil {
						mine = map[string]json.RawMessage{}
					}
					mine[key] = v
				}
			}
			if len(mine) > 0 {
				u["_meta"] = jsonedit.Marshal(mine)
			}
		}
	}
	if len(k.rawOutput) > 0 && (status == "completed" || status == "failed") {
		if _, ok := u["rawOutput"]; !ok {
			u["rawOutput"] = bytes.Clone(k.rawOutput)
		}
	}
	return k.n.Notify(ctx, sid, jsonedit.Marshal(u))
}
