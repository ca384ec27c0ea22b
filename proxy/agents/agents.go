// Package agents is what the proxy knows of real ACP agents: for each
// agent family, the recognisers of its legacy compaction signals (its
// Translators) and its Profiles, the rows that say which releases send
// what and which recognisers apply to them.
//
// Its one job is to say what an agent's line means. A recogniser reads
// an update and the read-only State the proxy shows it, and answers with a
// Signal (a compaction starts, progresses, ends, or a line stands for one
// in a history replay); it never writes, settles or keeps anything. What
// becomes of the line, and of the compaction, is the proxy's: its policy
// table decides the line's fate, and its lifecycle follows the compaction
// through the emitter.
//
// Each family lives in a file of its own (claude.go, codex.go, ...) that
// registers its translators and its profile rows; adding an agent is
// adding such a file, its recordings under test/peers/testdata, and
// nothing else. The registry is filled once, at package initialisation,
// and never changes after: it is safe for concurrent use.
package agents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/protocol"
)

// Translator names one recogniser of a legacy compaction signal.
type Translator string

// MaxSignalBytes bounds the updates inspected for a text signal: every
// legacy text is short, so a long message chunk is never decoded.
const MaxSignalBytes = 4 << 10

// Kind is what a signal says of its compaction.
type Kind int

// The signal kinds.
const (
	// Start: a compaction started.
	Start Kind = iota + 1
	// Progress: a non-terminal update of a started compaction.
	Progress
	// Done: a compaction reported only after the fact, with its outcome
	// (Signal.Status).
	Done
	// Completed, Failed, Aborted: outcomes. Aborted is an interruption:
	// cancelled if the user cancelled the turn, else failed.
	Completed
	Failed
	Aborted
	// Await: a line the next one confirms as the agent's signal or not
	// (codex's text, Kimi's automatic start).
	Await
	// Continuation: a replayed message that stands for a compaction
	// (Claude's continuation, Kimi's summary).
	Continuation
	// Note: no signal, but a provider's error text the proxy keeps for a
	// failure it may settle (Signal.Reason).
	Note
	// Absorb: no signal: a replayed line that belongs to a compaction
	// already shown, left out for a client that sees that compaction.
	Absorb
)

// Facts is what an agent reported about a compaction beyond its status.
type Facts struct {
	TokensBefore, TokensAfter int64
	DurationMs                *int64
	// Messages is how many messages the compaction replaced (the record's
	// source.count); 0 when the agent did not say.
	Messages int
}

// Signal is one recognised legacy signal.
type Signal struct {
	Kind Kind
	// ID is the compaction's ID when the form carries one ("" for text
	// forms, whose IDs the proxy mints).
	ID      protocol.ID
	Trigger protocol.Trigger
	Reason  string
	// Status is the outcome of a Done signal: "" is completed, else
	// failed (with Reason) or cancelled.
	Status protocol.Status
	// Background: a start of a compaction that outlives its turn (Kimi
	// Code's /compact): the client sees it once it settled.
	Background bool
	// StandIn: the line stands for a compaction only in a history replay
	// and only to a client that reads compaction updates (a continuation
	// message, a replayed command result); any other client gets the
	// line as it came.
	StandIn bool
	// Pairs: a Continuation that a command result replayed after it may
	// claim (see Claims).
	Pairs bool
	// Claims: an Absorb that uses up the newest unclaimed replayed
	// continuation of the session.
	Claims bool
	// Rest is the message to send in place of the agent's line when it
	// carried more than the signal (nil: nothing is left to send).
	Rest []byte
	// Keep: the agent's line is forwarded as well, after what the proxy
	// writes for it (it says more than the signal).
	Keep  bool
	Facts *Facts
	// ToolMeta and RawOutput are the agent's own, kept for a tool call
	// fallback.
	ToolMeta, RawOutput json.RawMessage
	// Summary is the compaction's summary, as the agent's line holds it;
	// Displayable says the agent showed it to the user as it is (so it
	// passes the summary policy), rather than wrote it for the model.
	Summary     []protocol.ContentBlock
	Displayable bool
	// NewTool: the update is a tool call that makes ID a compaction tool
	// call, whose later updates are its signals.
	NewTool bool
	// Confirms: the signal confirms the line that awaits it.
	Confirms bool
	// Foreign: an outcome whose text is not one of its form's outcome
	// texts (Claude Code's command output for a text-form compaction): a
	// client that gets the agent's own lines gets the form's terminal text
	// too, which a client reads as the end of what it saw start.
	Foreign bool
	// FactsFollow: a completion whose facts the agent sends in its next
	// update (RawOutputFollows): it waits for them, briefly.
	FactsFollow bool
}

// Outcome maps an outcome signal to a status and an error text. Only a
// user cancel is a cancel: an interruption in a turn the client did not
// cancel is a failure.
func (s Signal) Outcome(userCancelled bool) (protocol.Status, string) {
	switch s.Kind {
	case Done:
		switch s.Status {
		case "", protocol.Completed:
			return protocol.Completed, ""
		case protocol.Cancelled:
			return protocol.Cancelled, ""
		}
		return protocol.Failed, s.Reason
	case Completed:
		return protocol.Completed, ""
	case Aborted:
		if userCancelled {
			return protocol.Cancelled, ""
		}
		if s.Reason == "" {
			return protocol.Failed, "Compaction interrupted"
		}
	}
	return protocol.Failed, s.Reason
}

// Update is the session/update a recogniser reads: the members the proxy
// picked out of the agent's message, raw (JSON as it came, nil when
// absent), valid while the proxy handles the line.
type Update struct {
	Session string
	Kind    string // params.update.sessionUpdate
	Msg     []byte // the whole message
	Raw     []byte // params.update
	// The members most recognisers read.
	ContentType, ContentText  []byte
	ToolCallID, Title, Status []byte
	ToolName                  []byte // _meta.claudeCode.toolName
	Marker                    []byte // _meta["opencode/compaction"]
	// Quirks are the agent profile's.
	Quirks Quirk
}

// State is what a recogniser may read of the proxy's connection, for the
// update's session: read only.
type State interface {
	// Replaying reports whether a history replay of the session is in
	// flight (session/load).
	Replaying() bool
	// Command is the slash command of the prompt that runs the session's
	// turn ("" for none, or no turn).
	Command() string
	// Awaiting is the translator whose line waits, for this
	// session, waiting for the next line to confirm it ("" for none).
	Awaiting() Translator
	// Open is how many compactions of t's ID-less forms are open in the
	// session.
	Open(t Translator) int
	// PendingReplay reports whether the replay in flight showed a start of
	// t's ID-less forms not yet claimed.
	PendingReplay(t Translator) bool
	// IsTool reports whether toolCallID is a compaction tool call of the
	// session.
	IsTool(toolCallID string) bool
	// ToolOpen reports whether a compaction tool call of the session is
	// open.
	ToolOpen() bool
	// AfterEmptyChunk reports whether the session's last
	// agent_message_chunk was an empty text (ProseAfterEmptyChunk).
	AfterEmptyChunk() bool
}

// Verdict is what an update recogniser says of an update.
type Verdict uint8

const (
	// NotMine: not this translator's; the others look.
	NotMine Verdict = iota
	// Found: a signal.
	Found
	// Mine: this translator's, but not a signal: nobody else looks.
	Mine
	// Noted: not a signal, but a fact the proxy keeps (a Note).
	Noted
)

// Def is one translator: where and how its signal is recognised, and the
// terminal form the proxy adds to it.
type Def struct {
	Name Translator
	// Kinds are the sessionUpdate kinds whose updates Update reads.
	Kinds  []string
	Update func(s State, u *Update) (Signal, Verdict)
	// Prefixes begin the texts of the translator's agent_message_chunk
	// forms, decoded. Text is handed exactly the texts that begin with
	// one of them, and the cheap check that passes a chunk on to the text
	// recognisers at all is derived from them (Set.Recognise), so a form
	// whose prefix is not declared is never recognised.
	Prefixes []string
	Text     func(s State, u *Update, text string) (Signal, bool)
	// Synth renders the terminal form the proxy adds to the translator's
	// own lines when they are forwarded as they came (a client without
	// the capability, and no fallback configured): nil when it has none.
	Synth emitter.Renderer
	// ToolCall: the compaction is the agent's own tool call, with the
	// compaction's ID as its tool call ID, which a tool call fallback
	// renders in place of its own (keeping its _meta and rawOutput).
	ToolCall bool
	// TurnError recognises, in the error text of a failed prompt, the
	// failure of a compaction reported only that way, and its trigger;
	// nil for none.
	TurnError func(text string) (protocol.Trigger, bool)
}

// registry is every family's translators and profiles, in registration
// order (the files' order): filled by the families' init functions, read
// only afterwards.
var registry struct {
	defs     []*Def
	profiles []Profile
}

// register adds a family's translators and profile rows. The profiles of
// one agent are listed oldest first.
func register(defs []Def, profiles ...Profile) {
	for i := range defs {
		registry.defs = append(registry.defs, &defs[i])
	}
	for _, p := range profiles {
		r, err := parseRange(p.Range)
		if err != nil {
			panic("agents: profile " + p.Name + ": " + err.Error())
		}
		p.r = r
		registry.profiles = append(registry.profiles, p)
	}
}

// Translators returns every translator's name, in the order the proxy's
// flags list them and its recognisers look at an update.
func Translators() []Translator {
	out := make([]Translator, len(registry.defs))
	for i, d := range registry.defs {
		out[i] = d.Name
	}
	return out
}

// Lookup returns a translator's definition; nil for a name none has.
func Lookup(name Translator) *Def {
	for _, d := range registry.defs {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// Set is a connection's translators, as its profile (and the proxy's
// configuration) chose them, arranged for the hot path. The zero Set has
// none. A Set is read only once made.
type Set struct {
	on     []*Def
	quirks Quirk
	// byKind lists, per sessionUpdate kind, the translators whose update
	// recogniser reads it; text, those with text forms; both in registry
	// order. A handful of kinds: a scan costs less than a map's hash.
	byKind []kindReaders
	text   []*Def
	// first marks the bytes a JSON string may begin with (after its
	// quote) when its text begins with a prefix of text's: each prefix's
	// first character as JSON spells it, and a backslash, since any
	// character may be spelt as an escape. Most message chunks are turned
	// away by it undecoded.
	first [256]bool
}

type kindReaders struct {
	kind string
	defs []*Def
}

// NewSet arranges the translators enabled says are on, with the quirks
// of the agent's profile p (nil: none).
func NewSet(p *Profile, enabled func(Translator) bool) *Set {
	s := &Set{}
	if p != nil {
		s.quirks = p.Quirks
	}
	for _, d := range registry.defs {
		if !enabled(d.Name) {
			continue
		}
		s.on = append(s.on, d)
		if d.Update != nil {
			for _, k := range d.Kinds {
				i := slices.IndexFunc(s.byKind, func(r kindReaders) bool { return r.kind == k })
				if i < 0 {
					s.byKind, i = append(s.byKind, kindReaders{kind: k}), len(s.byKind)
				}
				s.byKind[i].defs = append(s.byKind[i].defs, d)
			}
		}
		if d.Text != nil {
			s.text = append(s.text, d)
			s.first['\\'] = true
			for _, p := range d.Prefixes {
				if b, _ := json.Marshal(p); len(b) > 2 {
					s.first[b[1]] = true
				}
			}
		}
	}
	return s
}

// Empty reports whether no translator is on.
func (s *Set) Empty() bool { return s == nil || len(s.on) == 0 }

// Has reports whether translator t is on.
func (s *Set) Has(t Translator) bool {
	return s != nil && slices.ContainsFunc(s.on, func(d *Def) bool { return d.Name == t })
}

// On returns the translators that are on, in registry order.
func (s *Set) On() []*Def {
	if s == nil {
		return nil
	}
	return s.on
}

// Quirks returns the quirks of the agent's profile.
func (s *Set) Quirks() Quirk {
	if s == nil {
		return 0
	}
	return s.quirks
}

// Recognised is what the translators found in an update.
type Recognised struct {
	Def    *Def // nil: no signal
	Signal Signal
	// Note is a provider's error text said while a compaction tool call
	// was open (ErrorText), for the proxy to keep.
	Note string
}

// Recognise finds a legacy signal in one update: first in the members the
// translators read by kind, then in a message chunk's text. A text form is
// read only where the agent's profile (or the proxy's configuration) says
// the agent sends it, and never in a chunk with a messageId: every text
// form is ID-less, and the agents that tag chunks with one tag their
// model's prose so.
func (s *Set) Recognise(st State, u *Update) Recognised {
	var out Recognised
	if s.Empty() {
		return out
	}
	u.Quirks = s.quirks
	for _, r := range s.byKind {
		if r.kind != u.Kind {
			continue
		}
		for _, d := range r.defs {
			sig, vd := d.Update(st, u)
			switch vd {
			case Found:
				return Recognised{Def: d, Signal: sig}
			case Mine:
				return Recognised{}
			case Noted:
				out.Note = sig.Reason
			}
		}
	}
	if u.Kind != "agent_message_chunk" || len(s.text) == 0 {
		return out
	}
	t := u.ContentText
	if len(t) < 3 || len(t) > MaxSignalBytes || !s.first[t[1]] {
		return out
	}
	if typ, _ := skim.String(u.ContentType); typ != "text" || HasMessageID(u.Raw) {
		return out
	}
	text, _ := skim.String(t)
	for _, d := range s.text {
		if !hasPrefix(text, d.Prefixes) {
			continue
		}
		if sig, ok := d.Text(st, u, text); ok {
			out.Def, out.Signal = d, sig
			return out
		}
	}
	return out
}

// TurnError reports the translator, among those on, whose TurnError
// recognises text, the error text of a failed prompt; nil for none.
func (s *Set) TurnError(text string) *Def {
	for _, d := range s.On() {
		if d.TurnError == nil {
			continue
		}
		if _, ok := d.TurnError(text); ok {
			return d
		}
	}
	return nil
}

var messageIDMark = []byte(`"messageId"`)

// HasMessageID reports whether an update carries a messageId. It is asked
// only of the few chunks that may be a signal. Inside a JSON string a
// quote is escaped, so the quoted name matches only a member name (or a
// value spelt so, which only makes the check more careful).
func HasMessageID(update []byte) bool { return bytes.Contains(update, messageIDMark) }

// DerivedID is a stable compaction ID made of a session, a kind and a key:
// a history replay that recounts from the session's start gives a
// compaction the same ID it had live.
func DerivedID(sid, kind, key string) protocol.ID {
	sum := sha256.Sum256([]byte(sid + "\x00" + kind + "\x00" + key))
	return protocol.ID("cmp_" + hex.EncodeToString(sum[:12]))
}

// textWithPrefix decodes raw, a JSON string, when its text begins with
// prefix, spelt as is or with escapes (a Go agent's encoder writes "<" as
// "\u003c"). Only a string that begins so, or with an escape, is decoded;
// one longer than limit (0: any length) is not.
func textWithPrefix(raw []byte, prefix string, limit int) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || (limit > 0 && len(raw) > limit) {
		return "", false
	}
	if raw[1] != '\\' && !bytes.HasPrefix(raw[1:], []byte(prefix[:1])) {
		return "", false
	}
	text, ok := skim.String(raw)
	if !ok || !strings.HasPrefix(text, prefix) {
		return "", false
	}
	return text, true
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// stringOf decodes a raw JSON string; "" for anything else.
func stringOf(raw []byte) string {
	s, _ := skim.String(raw)
	return s
}

// PromptErrorText reads the user-facing text of a JSON-RPC error member:
// data.details, data.message or message, the first not empty (where the
// agents observed say why a prompt failed), for Set.TurnError.
func PromptErrorText(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var e struct {
		Message string `json:"message"`
		Data    struct {
			Details string `json:"details"`
			Message string `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &e) != nil {
		// data may be a string or absent in another shape.
		var e2 struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e2)
		return strings.TrimSpace(e2.Message)
	}
	for _, s := range []string{e.Data.Details, e.Data.Message, e.Message} {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}
