package audit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/audit"
)

func kinds(loss []audit.Loss) []string {
	var out []string
	for _, l := range loss {
		out = append(out, string(l.Kind)+": "+l.Value)
	}
	return out
}

func open(history []audit.Item, summary string) []string {
	a := audit.NewAuditor(audit.WithKinds(audit.KindRequest, audit.KindPromise, audit.KindCorrection))
	for _, it := range history {
		a.Add(it)
	}
	return kinds(a.CheckText(summary))
}

func TestAnUnansweredRequestIsOpen(t *testing.T) {
	h := []audit.Item{
		{Role: audit.User, Text: "Rename the parser package to lexer."},
		{Role: audit.Tool, Text: "Read file"},
	}
	assert.Equal(t, []string{"open-request: Rename the parser package to lexer."}, open(h, "We talked about tests."))
	assert.Empty(t, open(h, "The user wants the parser renamed."), "an anchor in the summary keeps it")
}

func TestAnyAgentTextAnswersTheRequestsBeforeIt(t *testing.T) {
	h := []audit.Item{
		{Role: audit.User, Text: "Rename the parser package to lexer."},
		{Role: audit.Agent, Text: "Looking."},
	}
	assert.Empty(t, open(h, ""))
}

func TestSlashCommandsAndContinuationsAreNoRequests(t *testing.T) {
	h := []audit.Item{
		{Role: audit.User, Text: "/compact focus on the parser"},
		{Role: audit.User, Text: "This session is being continued from a previous conversation that ran out of context. Summary: parser"},
	}
	assert.Empty(t, open(h, ""))
}

func TestARequestWithoutAnchorsIsNeverReported(t *testing.T) {
	assert.Empty(t, open([]audit.Item{{Role: audit.User, Text: "Thanks, do it."}}, ""))
}

func TestADeferredPromiseIsOpenUntilReportedDone(t *testing.T) {
	h := []audit.Item{{Role: audit.Agent, Text: "The tests pass. I'll update the changelog later."}}
	assert.Equal(t, []string{"open-promise: I'll update the changelog later."}, open(h, "Tests pass."))
	assert.Empty(t, open(h, "Still to do: the changelog."))

	done := append(h, audit.Item{Role: audit.Agent, Text: "Updated the changelog."})
	assert.Empty(t, open(done, "Tests pass."), "a later agent message sharing an anchor reports it done")
}

func TestAFutureSentenceEndingATurnIsAPromise(t *testing.T) {
	h := []audit.Item{{Role: audit.Agent, Text: "I'll benchmark the tokenizer next.", EndsTurn: true}}
	assert.Equal(t, []string{"open-promise: I'll benchmark the tokenizer next."}, open(h, ""))

	narration := []audit.Item{
		{Role: audit.Agent, Text: "I'll benchmark the tokenizer."},
		{Role: audit.Tool, Text: "go test -bench ."},
		{Role: audit.Agent, Text: "Results are in.", EndsTurn: true},
	}
	assert.Empty(t, open(narration, ""), "a tool call after it: narration, not a promise")
}

func TestOffersAndNonPromisesAreNotPromises(t *testing.T) {
	for _, s := range []string{
		"If you want, I'll refactor the tokenizer later.",
		"I'll wait for your confirmation before touching the tokenizer.",
		"You'll need to restart the server later.",
		"Let me know if the tokenizer needs more work.",
	} {
		assert.Empty(t, open([]audit.Item{{Role: audit.Agent, Text: s, EndsTurn: true}}, ""), s)
	}
}

func TestOnlyTheLatestCorrectionCounts(t *testing.T) {
	h := []audit.Item{
		{Role: audit.User, Text: "Actually, the port is 8080, not 80."},
		{Role: audit.Agent, Text: "Noted."},
		{Role: audit.User, Text: "Correction: the port is 9090."},
		{Role: audit.Agent, Text: "Noted again."},
	}
	assert.Equal(t, []string{"correction: Correction: the port is 9090."}, open(h, "port 8080"))
	assert.Empty(t, open(h, "port 9090"))
}

func TestCorrectionNeedsAContrastOrAValue(t *testing.T) {
	h := []audit.Item{
		{Role: audit.User, Text: "Actually, let us look at the tokenizer."},
		{Role: audit.Agent, Text: "Actually, I think so."},
		{Role: audit.Agent, Text: "OK."},
	}
	assert.Empty(t, open(h, ""))
}

func TestAnAgentCorrectsItselfExplicitly(t *testing.T) {
	h := []audit.Item{{Role: audit.Agent, Text: "I was wrong: the limit lives in internal/skim/skim.go."}}
	got := open(h, "")
	require.Len(t, got, 1)
	assert.Equal(t, "correction: I was wrong: the limit lives in internal/skim/skim.go.", got[0])
}

func TestCheckUntilLeavesOutWhatCameAfterTheMark(t *testing.T) {
	a := audit.NewAuditor()
	a.Add(audit.Item{Role: audit.Agent, Text: "edit main.go"})
	m := a.Mark()
	a.Add(audit.Item{Role: audit.User, Text: "Now fix util.go please."})
	loss := a.CheckUntil(m, nil)
	assert.Equal(t, []string{"path: main.go"}, kinds(loss))
}

func TestResetEmptiesTheAuditor(t *testing.T) {
	a := audit.NewAuditor()
	a.Add(audit.Item{Role: audit.User, Text: "Fix main.go, actually not util.go."})
	a.Reset()
	assert.Empty(t, a.CheckText(""))
	assert.Zero(t, a.Len())
}
