package conformance_test

import (
	"encoding/json"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
)

func TestReducerLenCountsRowsAsTimelineDoes(t *testing.T) {
	r := conformance.NewReducer(1)
	assert.Zero(t, r.Len("s1"), "a session never seen has no rows")
	for _, u := range []string{
		msg("agent_message_chunk", "a"),
		msg("agent_message_chunk", "b"), // coalesces: no new row
		cu("cmp_1", "in_progress"),
		chunk("cmp_1", "s"),                                  // in place
		cu("cmp_1", "completed"),                             // in place
		msg("agent_message_chunk", "c"),                      // a new message after the compaction
		`{"sessionUpdate":"usage_update","used":1,"size":2}`, // state, no row
	} {
		_ = r.Apply("s1", json.RawMessage(u))
		assert.Len(t, r.Timeline("s1"), r.Len("s1"), "after %s", u)
	}
	assert.Equal(t, 3, r.Len("s1"), "rows: message, compaction, message")
	assert.Zero(t, r.Len("s2"), "another session")
}
