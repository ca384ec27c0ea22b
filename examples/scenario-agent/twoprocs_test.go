package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoProcessesOnOneStateDirectory: two scenario-agent processes on one
// state directory (two editor windows with the default one). While the
// first serves a session, the second's session/load of it fails at once,
// with an error that says another process serves it and names the file;
// the second serves its own sessions meanwhile. Every compaction the
// clients saw settle is in the replay a third process gives: none is lost
// to two processes minting the same ID into one file.
func TestTwoProcessesOnOneStateDirectory(t *testing.T) {
	dir := t.TempDir()
	first := startAgent(t, dir, 1, true)
	sid := first.newSession()
	first.prompt(sid, "/compact nosummary")
	settledLive := 1

	second := startAgent(t, dir, 1, true)
	err := second.cl.Load(second.ctx, sid, "/work")
	var rpcErr *jsonrpc2.Error
	if assert.True(t, errors.As(err, &rpcErr), "the second process loaded a session the first serves: %v", err) {
		assert.Equal(t, int64(jsonrpc2.CodeInternalError), rpcErr.Code)
		assert.Contains(t, rpcErr.Message, "served by another agent process")
		assert.Contains(t, rpcErr.Message, filepath.Join(dir, sid+".jsonl"))
	} else {
		// What two processes did before the lock: both serve it.
		second.prompt(sid, "/compact nosummary")
		settledLive++
	}
	own := second.newSession()
	o := second.prompt(own, "/compact nosummary")
	assert.Equal(t, "end_turn", o.StopReason, "the second process does not serve its own session: %+v", o)

	first.prompt(sid, "/compact nosummary")
	settledLive++
	first.stop()
	second.stop()
	assert.Contains(t, second.stderr.String(), "another agent process serves it", "the second process did not log the refused load")

	third := startAgent(t, dir, 1, true)
	replayed := statuses(view(t, third.load(sid), sid))
	assert.Len(t, replayed, settledLive, "settled compactions the clients saw, against the replay %v", replayed)
	for _, r := range replayed {
		assert.True(t, strings.HasSuffix(r, " completed"), "replayed %q", r)
	}
	require.Equal(t, []string{"cmp_1 completed"}, statuses(view(t, third.load(own), own)), "the second process's own session")
	checkConformance(t, "the third process", third.stop())
}
