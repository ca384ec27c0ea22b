package audit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// A host feeds the Follower what it reads and writes and has its emitter
// ask Audit at a completion: the summary is audited against the history
// before the prompt of the turn it runs in, and the terminal update the
// host then writes is not audited a second time.
func TestFollowerAuditIsTheEmittersAuditor(t *testing.T) {
	f := audit.NewFollower()
	lines := []struct {
		side audit.Side
		raw  string
	}{
		{audit.FromClient, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"Fix the parser in internal/skim/prefix.go; see https://example.com/issue/7"}]}}`},
		{audit.FromAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"Fixed in commit 3f2a9c1d."}}}}`},
		{audit.FromAgent, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`},
		{audit.FromClient, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"/compact"}]}}`},
	}
	for _, l := range lines {
		f.Observe(l.side, "", []byte(l.raw))
	}
	summary := []protocol.ContentBlock{protocol.Text("The user asked for a parser fix in internal/skim/prefix.go.")}
	loss := f.Audit(context.Background(), emitter.Info{SessionID: "s1", ID: "cmp_1"}, summary)
	kinds := map[string]string{}
	for _, l := range loss {
		kinds[l.Kind] = l.Value
	}
	assert.Equal(t, "https://example.com/issue/7", kinds["url"], "the URL the summary lost: %v", loss)
	assert.Equal(t, "3f2a9c1d", kinds["commit"], "the commit the summary lost: %v", loss)
	assert.NotContains(t, kinds, "path", "the path the summary kept")
	reports := f.Observe(audit.FromAgent, "", []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed","summary":[{"type":"text","text":"The user asked for a parser fix in internal/skim/prefix.go."}]}}}`))
	assert.Empty(t, reports, "the written terminal update audited again")
	assert.Nil(t, f.Audit(context.Background(), emitter.Info{SessionID: "s1", ID: "cmp_1"}, summary), "a second Audit of one compaction")
}

// The Follower is fed by two goroutines while the emitter asks it (run
// with -race).
func TestFollowerIsSafeForConcurrentUse(t *testing.T) {
	f := audit.NewFollower()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for range 200 {
				if g == 0 {
					f.Observe(audit.FromClient, "", []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"see go.mod"}]}}`))
				} else {
					f.Observe(audit.FromAgent, "", []byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`))
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			f.Audit(context.Background(), emitter.Info{SessionID: "s1", ID: protocol.ID(string(rune('a' + i%26)))}, []protocol.ContentBlock{protocol.Text("x")})
		}
	})
	wg.Wait()
	require.NotPanics(t, func() { f.Close() })
}

// A prompt's response ends its turn however the agent spells the id back:
// a peer that decoded the client's 1.0 answers 1, as the engine that hosts
// the Follower pairs them (skim.IDKey). The promise of the agent's last
// message is then open at the end of the turn, and a summary that drops it
// lost it.
func TestFollowerEndsTheTurnAtTheResponseWhateverTheIDSpelling(t *testing.T) {
	f := audit.NewFollower()
	for _, l := range []struct {
		side audit.Side
		raw  string
	}{
		{audit.FromClient, `{"jsonrpc":"2.0","id":1.0,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"Tidy the tokenizer."}]}}`},
		{audit.FromAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"Tidied. I'll benchmark the tokenizer next."}}}}`},
		{audit.FromAgent, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`},
		{audit.FromClient, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"/compact"}]}}`},
	} {
		f.Observe(l.side, "", []byte(l.raw))
	}
	loss := f.Audit(context.Background(), emitter.Info{SessionID: "s1", ID: "cmp_1"}, []protocol.ContentBlock{protocol.Text("Some work was done.")})
	var promises []string
	for _, l := range loss {
		if l.Kind == string(audit.KindPromise) {
			promises = append(promises, l.Value)
		}
	}
	assert.Equal(t, []string{"I'll benchmark the tokenizer next."}, promises, "the response id 1 did not end the turn of the prompt id 1.0: %v", loss)
}
