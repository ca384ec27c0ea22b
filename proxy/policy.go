package proxy

// The policy: the one table of what becomes of an agent line that is, or
// may be, about compaction. It is the only place in the proxy where the
// capability rule (a v1 client without the capability never receives a
// compaction update) and the between-turns rule (nothing about compaction
// reaches the client outside a turn, and nothing the proxy can hold is
// lost) are applied; every other stage asks it. It is a pure function of
// what is known of the line: how it was read, what it is, the client's
// mode (capability.DefaultPolicy's, never re-derived), the session's turn
// and what the proxy already showed of the compaction.

import (
	"log/slog"

	"github.com/acpcompact/acpcompact/capability"
)

// fate is what becomes of the agent's line itself.
type fate uint8

const (
	// fateForward: the line goes to the client as it came.
	fateForward fate = iota
	// fateRewrite: the line is replaced by what the proxy makes of it (a
	// message of its own, what the emitter renders, or nothing).
	fateRewrite
	// fateAwait: the line waits for the next one, which says whether it was
	// the agent's signal (codex's text) or prose.
	fateAwait
	// fateDrop: the line goes nowhere; the rule's note says why.
	fateDrop
)

// lineKind is what the line is, as far as compaction goes.
type lineKind uint8

const (
	// kindOther: nothing about compaction.
	kindOther lineKind = iota
	// kindCompaction: the agent's own compaction_update or
	// compaction_summary_chunk.
	kindCompaction
	// kindUnreadable: a line the proxy cannot read, not even as leniently
	// as its clients read, that may spell a compaction update: at its
	// worst, one.
	kindUnreadable
	// kindFolded: a line a Go client reads as a compaction update (its
	// member names match only when case is ignored), which the exact
	// reading does not: at its worst, one.
	kindFolded
	// kindSignal: a legacy signal an agent profile's recogniser found.
	kindSignal
	// kindStandIn: a replayed line that stands for a compaction only to a
	// client that reads compaction updates (Claude's continuation message,
	// a replayed command result, Kimi's summary).
	kindStandIn
	// kindAwaits: a text that waits for the next line, which confirms it as
	// a signal or not.
	kindAwaits
)

// readAs is how much of the line the proxy read.
type readAs uint8

const (
	readWhole readAs = iota // the whole message: it can be followed
	readBatch               // one message of a JSON-RPC batch: not rewritable
	readHead                // the head of a line longer than the limit
)

// lineFacts is what the policy knows of a line.
type lineFacts struct {
	kind       lineKind
	read       readAs
	negotiated bool
	// mode is how the client takes compaction: capability.Standard (v2,
	// or v1 with the capability), capability.Fallback (a fallback is
	// configured) or capability.Off (the agent's own legacy lines).
	mode capability.Mode
	// malformed: a compaction update whose sessionId, compactionId or
	// status is missing or not a string, or whose IDs clients may decode
	// otherwise than the proxy (skim.Exact): it can be neither followed
	// nor rewritten.
	malformed bool
	inTurn    bool
	replaying bool
	// afterCancel: the session is between turns right after a cancelled
	// one: a compaction the client never saw start is a straggler of it.
	afterCancel bool
	// shown is how far the compaction the line is about got, as the
	// client sees it (trackNone for a new one, or no compaction).
	shown trackStatus
	// rendered: the compaction is shown through the emitter, not by the
	// agent's own lines (it was held between turns).
	rendered bool
	// progress: a signal of a compaction's progress, not its start or end.
	progress bool
	// chunk and terminal describe a standard update: a summary chunk, or
	// an update with a terminal status.
	chunk, terminal bool
	// awaitsFacts: a completion whose facts the agent sends in a second,
	// duplicate completed update (Claude ACP to a JetBrains AIR client);
	// factsAwaited: the compaction's completion waits for them.
	awaitsFacts, factsAwaited bool
}

// how says how a line that cannot be rewritten was read, for a rule's
// message.
func (f lineFacts) how() string {
	if f.read == readBatch {
		return "inside a batch"
	}
	return "longer than the inspection limit"
}

// action is what the lifecycle does for a line the policy lets through.
type action uint8

const (
	doNothing action = iota
	// doFollow: the agent's own compaction update goes to the client as it
	// came, and the proxy follows its ID.
	doFollow
	// doRender: the agent's own compaction update goes through the
	// emitter, which renders it in the client's form (the fallback), or
	// holds it until the session's next turn.
	doRender
	// doReplay: the agent's own update in a history replay: a settled
	// compaction shows, a running one does not.
	doReplay
	// doSignal: the legacy signal's lifecycle step (the line's fate may
	// still change where the emitter refuses the compaction).
	doSignal
	// doAwait: the line waits for its confirmation.
	doAwait
	// doAwaitFacts: a completion waits for the facts that follow it, then
	// is rendered with them in its record (or without, once the wait
	// ends); doFacts: the update that brings them.
	doAwaitFacts
	doFacts
)

// rule is one row of the table: a condition, and what follows from it.
type rule struct {
	name string // names the rule in docs/architecture.md
	when func(f lineFacts) bool
	fate fate
	do   action
	// level and msg are the log line the rule asks for ("": none); a %s
	// in msg is lineFacts.how.
	level slog.Level
	msg   string
}

// standard reports a client known to read compaction updates.
func (f lineFacts) standard() bool { return f.negotiated && f.mode == capability.Standard }

// rules is the policy, first match wins. A line of kindOther matches
// none and is forwarded.
var rules = []rule{
	// The capability rule for what the proxy cannot read: a line that may
	// be a compaction update never reaches a client that may lack the
	// capability (or whose capability is not known yet), since a more
	// lenient reader could read it so.
	{name: "unreadable, no capability",
		when: func(f lineFacts) bool { return f.kind == kindUnreadable && !f.standard() },
		fate: fateDrop, level: slog.LevelWarn,
		msg: "dropped an unreadable line that may carry a compaction update: the client may lack the capability"},
	{name: "folded, no capability",
		when: func(f lineFacts) bool { return f.kind == kindFolded && !f.standard() },
		fate: fateDrop, level: slog.LevelWarn,
		msg: "dropped a line that Go clients read as a compaction update: its member names match only when case is ignored"},
	// Before initialize, the client's capability is not known: the worst
	// case is taken.
	{name: "unknown capability",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && !f.negotiated },
		fate: fateDrop, level: slog.LevelWarn,
		msg: "dropped a compaction update sent before the initialize exchange completed: the client's capability is not known yet"},
	// What cannot be followed is not forwarded either: a client that
	// reads it more leniently than the proxy would see a compaction nobody
	// settles.
	{name: "malformed compaction update",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.malformed && f.read == readWhole },
		fate: fateDrop, level: slog.LevelWarn,
		msg: "dropped a malformed compaction update: its sessionId, compactionId or status is missing, not a string, or not one every client decodes alike"},
	// The capability rule for what cannot be rewritten (a batch element,
	// the head of a long line).
	{name: "unrewritable, no capability",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.read != readWhole && !f.standard() },
		fate: fateDrop, level: slog.LevelWarn,
		msg: "dropped a compaction update %s: the client may lack the capability, and it cannot be rewritten unread"},
	// The between-turns rule for what cannot be held.
	{name: "unfollowable between turns",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.read != readWhole && !f.inTurn },
		fate: fateDrop, level: slog.LevelWarn,
		msg: "dropped a compaction update %s sent between turns: it can be neither followed nor held"},
	{name: "settled by the proxy, unread",
		when: func(f lineFacts) bool {
			return f.kind == kindCompaction && f.read == readHead && f.shown == trackByProxy
		},
		fate: fateDrop, level: slog.LevelInfo,
		msg: "dropped the agent's update of a compaction the proxy already settled"},
	{name: "unfollowable in a turn",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.read != readWhole },
		fate: fateForward, level: slog.LevelInfo,
		msg: "compaction update %s forwarded unread; its compaction is not followed"},
	// A replay shows settled compactions: a summary chunk waits for its
	// terminal update, which gets it as its summary; a running one is
	// left out, as a client without the capability gets it. A client
	// without the capability gets the replay in its fallback form.
	{name: "replayed summary chunk",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.replaying && f.standard() && f.chunk },
		fate: fateDrop, do: doReplay},
	{name: "replayed running compaction",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.replaying && f.standard() && !f.terminal },
		fate: fateDrop, do: doReplay, level: slog.LevelDebug,
		msg: "left out a replayed compaction that is not settled"},
	// A replay settles what it replays: a compaction the emitter holds
	// between turns whose ID the replay settles is settled by it, and
	// its held start is never delivered after the replay.
	{name: "replayed settled compaction held open",
		when: func(f lineFacts) bool {
			return f.kind == kindCompaction && f.replaying && f.standard() && f.shown == trackOpen && f.rendered
		},
		fate: fateRewrite, do: doRender},
	{name: "replayed settled compaction",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.replaying && f.standard() },
		fate: fateForward, do: doReplay},
	{name: "replayed, no capability",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.replaying },
		fate: fateRewrite, do: doRender},
	// Exactly one terminal update per ID (outside a replay, which shows
	// each compaction once, terminal-first).
	{name: "settled by the proxy",
		when: func(f lineFacts) bool {
			return (f.kind == kindCompaction || f.kind == kindSignal && !f.replaying) && f.shown == trackByProxy
		},
		fate: fateDrop, level: slog.LevelInfo,
		msg: "dropped the agent's update of a compaction the proxy already settled"},
	{name: "settled by the agent",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && f.shown == trackByAgent },
		fate: fateDrop, level: slog.LevelDebug,
		msg: "dropped the agent's update of a compaction it already settled"},
	{name: "settled by the agent, legacy form",
		when: func(f lineFacts) bool {
			return f.kind == kindSignal && !f.replaying && f.shown == trackByAgent && f.mode != capability.Off
		},
		fate: fateDrop},
	// The between-turns rule for a compaction nobody saw start, right
	// after a cancelled turn: a straggler of that turn, dropped rather
	// than held for the next.
	{name: "straggler of a cancelled turn",
		when: func(f lineFacts) bool {
			return (f.kind == kindCompaction || f.kind == kindSignal && !f.progress) && !f.replaying && f.shown == trackNone && f.afterCancel
		},
		fate: fateDrop, level: slog.LevelInfo,
		msg: "dropped a compaction signal that arrived after the cancelled turn ended, for a compaction the client never saw start"},
	// The agent's facts of a completion follow it in a duplicate update:
	// the completion waits for them (briefly), so that its one terminal
	// update carries them in its record; the duplicate is not a second
	// terminal update.
	{name: "completion awaiting its facts",
		when: func(f lineFacts) bool {
			return f.kind == kindCompaction && !f.replaying && f.shown == trackOpen && f.awaitsFacts
		},
		fate: fateDrop, do: doAwaitFacts},
	{name: "the facts a completion awaits",
		when: func(f lineFacts) bool {
			return f.kind == kindCompaction && !f.replaying && f.factsAwaited
		},
		fate: fateDrop, do: doFacts},
	// The capability rule: rewritten into the fallback.
	{name: "standard update, no capability",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && !f.standard() },
		fate: fateRewrite, do: doRender},
	// The between-turns rule: held by the emitter until the session's next
	// turn, and so are the later updates of a compaction it holds or held.
	{name: "standard update between turns",
		when: func(f lineFacts) bool { return f.kind == kindCompaction && (!f.inTurn || f.rendered) },
		fate: fateRewrite, do: doRender},
	{name: "standard update",
		when: func(f lineFacts) bool { return f.kind == kindCompaction },
		fate: fateForward, do: doFollow},
	// The capability rule for stand-ins: only a client that reads
	// compaction updates gets the compaction in their place, and only in
	// a replay.
	{name: "stand-in, no capability",
		when: func(f lineFacts) bool { return f.kind == kindStandIn && (!f.standard() || !f.replaying) },
		fate: fateForward},
	{name: "stand-in",
		when: func(f lineFacts) bool { return f.kind == kindStandIn },
		fate: fateRewrite, do: doSignal},
	// Legacy forms: a client that reads compaction updates, or that has a
	// fallback, gets its form in place of the agent's line; any other
	// gets the agent's own lines, and only the terminal form the agent
	// never sent.
	{name: "awaiting text, legacy lines",
		when: func(f lineFacts) bool { return f.kind == kindAwaits && f.mode == capability.Off },
		fate: fateForward},
	{name: "awaiting text",
		when: func(f lineFacts) bool { return f.kind == kindAwaits },
		fate: fateAwait, do: doAwait},
	{name: "legacy signal, legacy lines",
		when: func(f lineFacts) bool { return f.kind == kindSignal && f.mode == capability.Off },
		fate: fateForward, do: doSignal},
	{name: "legacy signal",
		when: func(f lineFacts) bool { return f.kind == kindSignal },
		fate: fateRewrite, do: doSignal},
}

// judge is the policy: the first rule that matches f, or nil for a line
// that is forwarded with nothing to do.
func judge(f *lineFacts) *rule {
	if f.kind == kindOther {
		return nil
	}
	for i := range rules {
		if rules[i].when(*f) {
			return &rules[i]
		}
	}
	return nil
}
