package emitter

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/acpcompact/acpcompact/protocol"
)

// DefaultRecordKey is the `_meta` key under which WithRecords places a
// compaction's Details.
const DefaultRecordKey = "acpcompact/record"

// Details is the record of one compaction as a state transition: what was
// replaced, by what, how, and what may have been lost. The runtime fills in
// what it knows; the emitter adds the trigger, the status and the timing.
// It travels, when WithRecords is on, under a namespaced `_meta` key of the
// terminal update (in every mode, and on replay), so clients and log
// pipelines that read `_meta` see the same facts.
type Details struct {
	// Trigger is why the compaction ran (manual, auto, idle).
	Trigger protocol.Trigger `json:"trigger,omitempty"`
	// Status is the terminal status.
	Status protocol.Status `json:"status,omitempty"`
	// TokensBefore and TokensAfter are the context size around the
	// compaction, in tokens.
	TokensBefore int64 `json:"tokensBefore,omitempty"`
	TokensAfter  int64 `json:"tokensAfter,omitempty"`
	// ContextWindow is the model's context size in tokens; with
	// TokensAfter it makes the optional usage_update (WithUsageUpdates).
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// StartedAt and EndedAt bound the compaction; DurationMs is their
	// difference in milliseconds.
	StartedAt  time.Time `json:"startedAt,omitzero"`
	EndedAt    time.Time `json:"endedAt,omitzero"`
	DurationMs int64     `json:"durationMs"`
	// Source is the range of history the summary replaced.
	Source *MessageRange `json:"source,omitempty"`
	// KeptTail is the recent range kept verbatim after the summary.
	KeptTail *MessageRange `json:"keptTail,omitempty"`
	// Summarizer is the model and configuration that wrote the summary.
	Summarizer *Summarizer `json:"summarizer,omitempty"`
	// KnownLoss lists what the summary is known to have dropped: the
	// runtime's own notes (Kind "note": open promises, tool outputs,
	// uncertainty, in its words) and what an audit of the summary against
	// the history it replaced found (WithAudit).
	KnownLoss []Loss `json:"knownLoss,omitempty"`
	// SummaryBytes is the size of the summary text the runtime produced,
	// whether or not it was shown.
	SummaryBytes int64 `json:"summaryBytes,omitempty"`
}

// Loss is one thing a summary is known to have dropped.
type Loss struct {
	// Kind says what was lost: "note" for a runtime's own words, else the
	// kind of reference or open item an audit found (package audit's
	// kinds: "path", "url", "commit", "open-request", ...).
	Kind string `json:"kind"`
	// Value is the lost reference or open item as the history held it, or
	// the note.
	Value string `json:"value"`
	// Where is its first place in the history (a message or tool call ID,
	// "line 12"), when known.
	Where string `json:"where,omitempty"`
}

// UnmarshalJSON reads a loss object, or a string, the form of records
// written before losses were structured, as a note.
func (l *Loss) UnmarshalJSON(b []byte) error {
	var note string
	if json.Unmarshal(b, &note) == nil {
		*l = Loss{Kind: "note", Value: note}
		return nil
	}
	type plain Loss
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*l = Loss(p)
	return nil
}

// MessageRange names a contiguous range of the session's history.
type MessageRange struct {
	FirstMessageID string `json:"firstMessageId,omitempty"`
	LastMessageID  string `json:"lastMessageId,omitempty"`
	// Count is the number of messages in the range.
	Count int `json:"count,omitempty"`
}

// Summarizer identifies what produced the summary.
type Summarizer struct {
	Model string `json:"model,omitempty"`
	// PromptID names the summarization prompt or its version; the prompt
	// text itself stays in the process.
	PromptID string `json:"promptId,omitempty"`
	// Config holds other settings (temperature, max tokens), verbatim.
	Config map[string]json.RawMessage `json:"config,omitempty"`
}

// WithDetails attaches the compaction's record to its terminal update.
func WithDetails(d Details) SettleOption {
	return func(o *settleOptions) { o.details = &d }
}

// WithRecords places each compaction's Details under key in the `_meta` of
// its terminal update, live and on replay, in every mode. An empty key
// means DefaultRecordKey. Off by default: records can name models and
// message ranges an operator may not want to share with the client.
func WithRecords(key string) Option {
	// Defaulted once, here: the option may be applied by many emitters at
	// once (a kit applies its options to every connection's emitter).
	if key == "" {
		key = DefaultRecordKey
	}
	return func(c *config) { c.recordKey = key }
}

// WithUsageUpdates sends a `usage_update` after a completed compaction
// whose Details carry TokensAfter and ContextWindow, so the client's
// context gauge drops at the boundary. It goes to the client in every mode
// but Off, since usage_update is a plain v1 update.
func WithUsageUpdates() Option { return func(c *config) { c.usageUpdates = true } }

// terminalMeta builds the `_meta` of a terminal update with ACP's patch
// rules: in v1 a concrete `_meta` replaces the stored one, so it must repeat
// the start's keys to keep them; in v2 it merges by top-level key, so only
// the new keys are sent. It returns nil when there is nothing to send,
// which leaves the stored value unchanged in both versions.
func terminalMeta(version int, start, settle protocol.Meta, recordKey string, d *Details) protocol.Meta {
	if settle == nil && (recordKey == "" || d == nil) {
		return nil
	}
	out := protocol.Meta{}
	if version != 2 {
		maps.Copy(out, start)
	}
	maps.Copy(out, settle)
	if recordKey != "" && d != nil {
		if raw, err := json.Marshal(d); err == nil {
			out[recordKey] = raw
		}
	}
	return out
}

// firstSightMeta is terminalMeta for a terminal update that is the
// client's first sight of the compaction (a replay, or one that settled
// unseen): there is no stored _meta to patch, so v1 and v2 alike get the
// whole of it.
func firstSightMeta(start, settle protocol.Meta, recordKey string, d *Details) protocol.Meta {
	if m := terminalMeta(1, start, settle, recordKey, d); m != nil {
		return m
	}
	if len(start) > 0 {
		return start
	}
	return nil
}
