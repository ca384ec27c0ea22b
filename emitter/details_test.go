package emitter_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func record(t *testing.T, u map[string]any) map[string]any {
	t.Helper()
	meta, ok := u["_meta"].(map[string]any)
	require.True(t, ok, "terminal update has no _meta: %v", u)
	r, ok := meta[emitter.DefaultRecordKey].(map[string]any)
	require.True(t, ok, "_meta has no %s: %v", emitter.DefaultRecordKey, meta)
	return r
}

func TestRecordTravelsUnderNamespacedMetaWithPatchSemantics(t *testing.T) {
	ctx := context.Background()
	details := emitter.Details{
		TokensBefore: 180_000, TokensAfter: 22_000, ContextWindow: 200_000,
		Source:     &emitter.MessageRange{FirstMessageID: "m1", LastMessageID: "m40", Count: 40},
		KeptTail:   &emitter.MessageRange{FirstMessageID: "m41", LastMessageID: "m44", Count: 4},
		Summarizer: &emitter.Summarizer{Model: "small-model", PromptID: "compact-v3"},
		KnownLoss:  []string{"tool output of run 12 dropped"},
	}
	for _, version := range []int{1, 2} {
		t.Run(map[int]string{1: "v1 replaces, so start keys are repeated", 2: "v2 merges, so only new keys are sent"}[version], func(t *testing.T) {
			rec := &wiretest.Recorder{}
			em := emitter.New(rec, emitter.WithNegotiation(capability.Negotiation{Version: version, Compaction: true}),
				emitter.WithRecords(""), emitter.WithUsageUpdates())
			c, err := em.Session("s").Start(ctx, emitter.WithID("c"), emitter.WithTrigger(protocol.Auto),
				emitter.WithStartMeta(protocol.Meta{"vendor/x": json.RawMessage(`"keep"`)}))
			require.NoError(t, err, "Start")
			require.NoError(t, c.Complete(ctx, emitter.WithDetails(details)), "Complete")
			ups := rec.Updates()
			require.Len(t, ups, 3, "updates")
			term := ups[1]
			r := record(t, term)
			assert.Equal(t, "auto", r["trigger"], "record trigger")
			assert.Equal(t, "completed", r["status"], "record status")
			// JSON numbers decode to float64; compared as integers.
			got, ok := r["tokensBefore"].(float64)
			if assert.True(t, ok, "record tokensBefore: got %v, want 180000", r["tokensBefore"]) {
				assert.Equal(t, 180000, int(got), "record tokensBefore")
			}
			got, ok = r["tokensAfter"].(float64)
			if assert.True(t, ok, "record tokensAfter: got %v, want 22000", r["tokensAfter"]) {
				assert.Equal(t, 22000, int(got), "record tokensAfter")
			}
			assert.Equal(t, "small-model", r["summarizer"].(map[string]any)["model"], "record summarizer model")
			assert.Equal(t, "m1", r["source"].(map[string]any)["firstMessageId"], "record source firstMessageId")
			assert.Contains(t, r, "startedAt", "record has no startedAt")
			assert.Contains(t, r, "durationMs", "record has no durationMs")
			_, kept := term["_meta"].(map[string]any)["vendor/x"]
			assert.Equal(t, version == 1, kept, "start _meta key on the terminal update")
			wantUsage := map[string]any{"sessionUpdate": "usage_update", "used": float64(22000), "size": float64(200000), "·session": "s"}
			assert.Equal(t, wantUsage, ups[2], "usage update")
			validateAll(t, rec, version)

			// The record is kept for replay, and replay carries it too.
			stored := c.Record()
			require.NotNil(t, stored.Details, "the kept record has no Details")
			rec.Reset()
			require.NoError(t, em.Session("s2").Replay(ctx, stored), "Replay")
			ups = rec.Updates()
			require.Len(t, ups, 1, "updates on replay (no usage_update on replay)")
			assert.Equal(t, "auto", record(t, ups[0])["trigger"], "replayed record trigger")
			assert.Equal(t, "keep", ups[0]["_meta"].(map[string]any)["vendor/x"], "replayed _meta vendor/x")
			validateAll(t, rec, version)
		})
	}
}

func TestRecordsAreOptIn(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capable))
	c, _ := em.Session("s").Start(ctx)
	require.NoError(t, c.Complete(ctx, emitter.WithDetails(emitter.Details{TokensAfter: 1, ContextWindow: 2})), "Complete")
	for _, u := range rec.Updates() {
		assert.NotContains(t, u, "_meta", "update has _meta without WithRecords")
		assert.NotEqual(t, "usage_update", u["sessionUpdate"], "usage_update without WithUsageUpdates: %v", u)
	}
}

func TestRecordOnFailureAndWithoutRuntimeDetails(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithRecords("example.com/compaction"), emitter.WithUsageUpdates())
	c, _ := em.Session("s").Start(ctx, emitter.WithTrigger(protocol.Idle))
	require.NoError(t, c.Fail(ctx, errors.New("provider overloaded")), "Fail")
	ups := rec.Updates()
	require.Len(t, ups, 2, "updates (no usage_update after a failure)")
	r := ups[1]["_meta"].(map[string]any)["example.com/compaction"].(map[string]any)
	assert.Equal(t, "idle", r["trigger"], "record trigger")
	assert.Equal(t, "failed", r["status"], "record status")
	validateAll(t, rec, 1)
}
