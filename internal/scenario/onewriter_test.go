package scenario_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/internal/scenario/client"
)

// reopenedID matches an ID minted by a process that reopened a session's
// log: its prefix, the opening's random mark, then the number.
func reopenedID(prefix string, n int) *regexp.Regexp {
	return regexp.MustCompile(`^` + prefix + `[0-9a-f]{8}_` + strconv.Itoa(n) + `$`)
}

// compactionIDs returns the compaction IDs of msgs in order of first
// appearance, the fallback tool call's read as its compaction's.
func compactionIDs(msgs []client.Message) []string {
	var out []string
	for _, m := range msgs {
		id := m.CompactionID
		if id == "" {
			id = strings.TrimPrefix(m.ToolCallID, "compact-")
		}
		if id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// TestReopenedSessionsNeverMintALostID: a compaction the client saw whose
// lines the log lost (here its start and final record are cut off the
// file, as a torn write or a full disk would lose them) is never minted
// again by the next process: the IDs a process mints after reopening a
// log carry a random mark of that opening, and numbers that go on from
// the log's. The process that created the session numbers its IDs plainly
// (cmp_1), so the demo and the docs keep theirs.
func TestReopenedSessionsNeverMintALostID(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, stateDir(dir))
	live := connect(t, a, capableV1)
	sid := live.session()
	_, first := live.prompt(sid, "/compact nosummary")
	_, second := live.prompt(sid, "/compact nosummary")
	live.finish()
	closeAgent(t, a)
	assert.Equal(t, []string{"cmp_1"}, compactionIDs(first), "the creating process numbers its IDs plainly")
	assert.Equal(t, []string{"cmp_2"}, compactionIDs(second))

	// The log loses cmp_2's lines, and what followed them.
	path := filepath.Join(dir, sid+".jsonl")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	i := bytes.Index(data, []byte(`"id":"cmp_2"`))
	require.Greater(t, i, 0)
	require.NoError(t, os.WriteFile(path, data[:bytes.LastIndexByte(data[:i], '\n')+1], 0o600))

	var minted []string
	for range 2 { // two later processes
		b := newAgent(t, stateDir(dir))
		r := connect(t, b, capableV1)
		require.NoError(t, r.cl.Load(r.ctx, sid, "/work"))
		_, turn := r.prompt(sid, "/compact nosummary")
		r.finish()
		closeAgent(t, b)
		ids := compactionIDs(turn)
		require.Len(t, ids, 1)
		minted = append(minted, ids[0])
	}
	assert.NotContains(t, minted, "cmp_2", "a later process minted an ID the client saw")
	assert.Regexp(t, reopenedID("cmp_", 2), minted[0])
	assert.Regexp(t, reopenedID("cmp_", 3), minted[1])
	assert.NotEqual(t, minted[0][:12], minted[1][:12], "two openings share their mark")
}

// TestLoadOfASessionAnotherAgentServes: while one agent (a process; here
// two agents on one state directory) serves a session from its file,
// another agent's session/load of it fails at once with an error saying
// so and naming the file, and writes nothing; that agent serves its other
// sessions. Once the first has closed the session, the second loads it.
func TestLoadOfASessionAnotherAgentServes(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, stateDir(dir))
	ra := connect(t, a, capableV1)
	sid := ra.session()
	ra.prompt(sid, "/compact nosummary")
	path := filepath.Join(dir, sid+".jsonl")
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	b := newAgent(t, stateDir(dir))
	defer closeAgent(t, b)
	rb := connect(t, b, capableV1)
	err = rb.cl.Load(rb.ctx, sid, "/work")
	var rpcErr *jsonrpc2.Error
	require.True(t, errors.As(err, &rpcErr), "session/load of a session another agent serves: %v", err)
	assert.Equal(t, int64(jsonrpc2.CodeInternalError), rpcErr.Code)
	assert.Contains(t, rpcErr.Message, "served by another agent process")
	assert.Contains(t, rpcErr.Message, path)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the refused load wrote to the log")
	other := rb.session()
	_, turn := rb.prompt(other, "/compact nosummary")
	assert.Equal(t, []string{"cmp_1"}, compactionIDs(turn), "the second agent's own session")

	ra.prompt(sid, "/compact nosummary") // cmp_2, the first agent's
	require.NoError(t, ra.cl.Call(ra.ctx, "session/close", map[string]any{"sessionId": sid}, nil))
	ra.finish()
	closeAgent(t, a)

	from := rb.cl.Len()
	require.NoError(t, rb.cl.Load(rb.ctx, sid, "/work"))
	assert.Equal(t, []string{"cmp_1", "cmp_2"}, compactionIDs(rb.cl.Messages()[from:]), "the replay lost a settled compaction")
	rb.finish()
}

// reopened returns the one compaction ID of a turn in a session a process
// reopened, after checking it is the nth, minted with that opening's mark.
func reopened(t *testing.T, turn []client.Message, n int) string {
	t.Helper()
	ids := compactionIDs(turn)
	require.Len(t, ids, 1, "compactions in the turn")
	require.Regexp(t, reopenedID("cmp_", n), ids[0])
	return ids[0]
}
