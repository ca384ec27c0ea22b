package proxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/capability"
)

// The policy is one table: each row is reached by the facts it names,
// and the capability and between-turns rules are rows of it.
func TestPolicyTable(t *testing.T) {
	std := func(f lineFacts) lineFacts { f.negotiated, f.mode = true, capability.Standard; return f }
	plain := func(f lineFacts) lineFacts { f.negotiated, f.mode = true, capability.Off; return f }
	fb := func(f lineFacts) lineFacts { f.negotiated, f.mode = true, capability.Fallback; return f }
	hit := map[string]bool{}
	for _, c := range []struct {
		facts lineFacts
		rule  string // "" : no rule, forwarded
		fate  fate
		do    action
	}{
		{lineFacts{kind: kindOther}, "", fateForward, doNothing},
		// The capability rule, for every way a line can be read.
		{lineFacts{kind: kindUnreadable}, "unreadable, no capability", fateDrop, doNothing},
		{plain(lineFacts{kind: kindUnreadable}), "unreadable, no capability", fateDrop, doNothing},
		{std(lineFacts{kind: kindUnreadable}), "", fateForward, doNothing},
		{fb(lineFacts{kind: kindFolded}), "folded, no capability", fateDrop, doNothing},
		{std(lineFacts{kind: kindFolded}), "", fateForward, doNothing},
		{lineFacts{kind: kindCompaction}, "unknown capability", fateDrop, doNothing},
		{plain(lineFacts{kind: kindCompaction, read: readBatch, inTurn: true}), "unrewritable, no capability", fateDrop, doNothing},
		{plain(lineFacts{kind: kindCompaction, read: readHead, inTurn: true}), "unrewritable, no capability", fateDrop, doNothing},
		{plain(lineFacts{kind: kindCompaction, inTurn: true}), "standard update, no capability", fateRewrite, doRender},
		{fb(lineFacts{kind: kindCompaction, inTurn: true}), "standard update, no capability", fateRewrite, doRender},
		{plain(lineFacts{kind: kindCompaction, replaying: true, terminal: true}), "replayed, no capability", fateRewrite, doRender},
		{plain(lineFacts{kind: kindStandIn, replaying: true}), "stand-in, no capability", fateForward, doNothing},
		{std(lineFacts{kind: kindStandIn}), "stand-in, no capability", fateForward, doNothing},
		{std(lineFacts{kind: kindStandIn, replaying: true}), "stand-in", fateRewrite, doSignal},
		// The between-turns rule: what can be held is held, what cannot is
		// dropped, a straggler of a cancelled turn is dropped.
		{std(lineFacts{kind: kindCompaction, read: readBatch}), "unfollowable between turns", fateDrop, doNothing},
		{std(lineFacts{kind: kindCompaction, read: readHead}), "unfollowable between turns", fateDrop, doNothing},
		{std(lineFacts{kind: kindCompaction}), "standard update between turns", fateRewrite, doRender},
		{std(lineFacts{kind: kindCompaction, inTurn: true, rendered: true, shown: trackOpen}), "standard update between turns", fateRewrite, doRender},
		{std(lineFacts{kind: kindCompaction, afterCancel: true}), "straggler of a cancelled turn", fateDrop, doNothing},
		{plain(lineFacts{kind: kindCompaction, afterCancel: true}), "straggler of a cancelled turn", fateDrop, doNothing},
		{std(lineFacts{kind: kindSignal, afterCancel: true}), "straggler of a cancelled turn", fateDrop, doNothing},
		{std(lineFacts{kind: kindSignal, afterCancel: true, progress: true}), "legacy signal", fateRewrite, doSignal},
		// In a turn.
		{std(lineFacts{kind: kindCompaction, read: readBatch, inTurn: true}), "unfollowable in a turn", fateForward, doNothing},
		{std(lineFacts{kind: kindCompaction, read: readHead, inTurn: true, shown: trackByProxy}), "settled by the proxy, unread", fateDrop, doNothing},
		{std(lineFacts{kind: kindCompaction, inTurn: true, malformed: true}), "malformed compaction update", fateDrop, doNothing},
		{std(lineFacts{kind: kindCompaction, inTurn: true}), "standard update", fateForward, doFollow},
		{std(lineFacts{kind: kindCompaction, inTurn: true, shown: trackByProxy}), "settled by the proxy", fateDrop, doNothing},
		{std(lineFacts{kind: kindCompaction, inTurn: true, shown: trackByAgent}), "settled by the agent", fateDrop, doNothing},
		// A replay shows settled compactions.
		{std(lineFacts{kind: kindCompaction, replaying: true, chunk: true}), "replayed summary chunk", fateDrop, doReplay},
		{std(lineFacts{kind: kindCompaction, replaying: true}), "replayed running compaction", fateDrop, doReplay},
		{std(lineFacts{kind: kindCompaction, replaying: true, terminal: true}), "replayed settled compaction", fateForward, doReplay},
		{std(lineFacts{kind: kindCompaction, replaying: true, terminal: true, shown: trackOpen, rendered: true}), "replayed settled compaction held open", fateRewrite, doRender},
		// A completion whose facts follow it waits for them; the duplicate
		// that brings them is no second terminal update.
		{std(lineFacts{kind: kindCompaction, inTurn: true, terminal: true, shown: trackOpen, awaitsFacts: true}), "completion awaiting its facts", fateDrop, doAwaitFacts},
		{std(lineFacts{kind: kindCompaction, inTurn: true, terminal: true, shown: trackOpen, rendered: true, factsAwaited: true}), "the facts a completion awaits", fateDrop, doFacts},
		{std(lineFacts{kind: kindCompaction, inTurn: true, terminal: true, shown: trackNone, awaitsFacts: true}), "standard update", fateForward, doFollow},
		{plain(lineFacts{kind: kindCompaction, inTurn: true, terminal: true, shown: trackOpen, rendered: true, awaitsFacts: true}), "completion awaiting its facts", fateDrop, doAwaitFacts},
		{std(lineFacts{kind: kindCompaction, replaying: true, terminal: true, shown: trackOpen}), "replayed settled compaction", fateForward, doReplay},
		// Legacy forms.
		{plain(lineFacts{kind: kindAwaits}), "awaiting text, legacy lines", fateForward, doNothing},
		{std(lineFacts{kind: kindAwaits}), "awaiting text", fateAwait, doAwait},
		{plain(lineFacts{kind: kindSignal, inTurn: true}), "legacy signal, legacy lines", fateForward, doSignal},
		{fb(lineFacts{kind: kindSignal, inTurn: true}), "legacy signal", fateRewrite, doSignal},
		{std(lineFacts{kind: kindSignal, inTurn: true, shown: trackByProxy}), "settled by the proxy", fateDrop, doNothing},
		{std(lineFacts{kind: kindSignal, inTurn: true, shown: trackByAgent}), "settled by the agent, legacy form", fateDrop, doNothing},
		{plain(lineFacts{kind: kindSignal, inTurn: true, shown: trackByAgent}), "legacy signal, legacy lines", fateForward, doSignal},
		{std(lineFacts{kind: kindSignal, replaying: true, shown: trackByProxy}), "legacy signal", fateRewrite, doSignal},
	} {
		hit[c.rule] = true
		f := c.facts
		r := judge(&f)
		if c.rule == "" {
			assert.Nil(t, r, "facts %+v: no rule applies", c.facts)
			continue
		}
		require.NotNil(t, r, "facts %+v: want rule %q", c.facts, c.rule)
		assert.Equal(t, c.rule, r.name, "facts %+v", c.facts)
		assert.Equal(t, c.fate, r.fate, "facts %+v: the fate of rule %q", c.facts, c.rule)
		assert.Equal(t, c.do, r.do, "facts %+v: the action of rule %q", c.facts, c.rule)
	}
	for _, r := range rules {
		assert.True(t, hit[r.name], "no case reaches rule %q", r.name)
	}
}

// A rule with its name twice would be two homes of one rule.
func TestPolicyRulesAreNamedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range rules {
		assert.False(t, seen[r.name], "rule %q appears twice", r.name)
		seen[r.name] = true
		assert.NotNil(t, r.when, "rule %q has no condition", r.name)
	}
}
