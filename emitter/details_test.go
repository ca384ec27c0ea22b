package emitter_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

func record(t *testing.T, u map[string]any) map[string]any {
	t.Helper()
	meta, ok := u["_meta"].(map[string]any)
	if !ok {
		t.Fatalf("terminal update has no _meta: %v", u)
	}
	r, ok := meta[emitter.DefaultRecordKey].(map[string]any)
	if !ok {
		t.Fatalf("_meta has no %s: %v", emitter.DefaultRecordKey, meta)
	}
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
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := c.Complete(ctx, emitter.WithDetails(details)); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			ups := rec.Updates()
			if len(ups) != 3 {
				t.Fatalf("updates: got %d %v, want 3", len(ups), ups)
			}
			term := ups[1]
			r := record(t, term)
			if r["trigger"] != "auto" {
				t.Errorf("record trigger: got %v, want auto", r["trigger"])
			}
			if r["status"] != "completed" {
				t.Errorf("record status: got %v, want completed", r["status"])
			}
			// JSON numbers decode to float64; compared as integers.
			if got, ok := r["tokensBefore"].(float64); !ok || int(got) != 180000 {
				t.Errorf("record tokensBefore: got %v, want 180000", r["tokensBefore"])
			}
			if got, ok := r["tokensAfter"].(float64); !ok || int(got) != 22000 {
				t.Errorf("record tokensAfter: got %v, want 22000", r["tokensAfter"])
			}
			if got := r["summarizer"].(map[string]any)["model"]; got != "small-model" {
				t.Errorf("record summarizer model: got %v, want small-model", got)
			}
			if got := r["source"].(map[string]any)["firstMessageId"]; got != "m1" {
				t.Errorf("record source firstMessageId: got %v, want m1", got)
			}
			if _, ok := r["startedAt"]; !ok {
				t.Errorf("record has no startedAt: %v", r)
			}
			if _, ok := r["durationMs"]; !ok {
				t.Errorf("record has no durationMs: %v", r)
			}
			_, kept := term["_meta"].(map[string]any)["vendor/x"]
			if kept != (version == 1) {
				t.Errorf("start _meta key on the terminal update: got %v, want %v", kept, version == 1)
			}
			wantUsage := map[string]any{"sessionUpdate": "usage_update", "used": float64(22000), "size": float64(200000), "·session": "s"}
			if !reflect.DeepEqual(ups[2], wantUsage) {
				t.Errorf("usage update: got %v, want %v", ups[2], wantUsage)
			}
			validateAll(t, rec, version)

			// The record is kept for replay, and replay carries it too.
			stored := c.Record()
			if stored.Details == nil {
				t.Fatal("the kept record has no Details")
			}
			rec.Reset()
			if err := em.Session("s2").Replay(ctx, stored); err != nil {
				t.Fatalf("Replay: %v", err)
			}
			ups = rec.Updates()
			if len(ups) != 1 {
				t.Fatalf("updates on replay: got %d %v, want 1 (no usage_update on replay)", len(ups), ups)
			}
			if got := record(t, ups[0])["trigger"]; got != "auto" {
				t.Errorf("replayed record trigger: got %v, want auto", got)
			}
			if got := ups[0]["_meta"].(map[string]any)["vendor/x"]; got != "keep" {
				t.Errorf("replayed _meta vendor/x: got %v, want keep", got)
			}
			validateAll(t, rec, version)
		})
	}
}

func TestRecordsAreOptIn(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capable))
	c, _ := em.Session("s").Start(ctx)
	if err := c.Complete(ctx, emitter.WithDetails(emitter.Details{TokensAfter: 1, ContextWindow: 2})); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	for _, u := range rec.Updates() {
		if _, ok := u["_meta"]; ok {
			t.Errorf("update has _meta without WithRecords: %v", u)
		}
		if u["sessionUpdate"] == "usage_update" {
			t.Errorf("usage_update without WithUsageUpdates: %v", u)
		}
	}
}

func TestRecordOnFailureAndWithoutRuntimeDetails(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithRecords("example.com/compaction"), emitter.WithUsageUpdates())
	c, _ := em.Session("s").Start(ctx, emitter.WithTrigger(protocol.Idle))
	if err := c.Fail(ctx, errors.New("provider overloaded")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	ups := rec.Updates()
	if len(ups) != 2 {
		t.Fatalf("updates: got %d %v, want 2 (no usage_update after a failure)", len(ups), ups)
	}
	r := ups[1]["_meta"].(map[string]any)["example.com/compaction"].(map[string]any)
	if r["trigger"] != "idle" {
		t.Errorf("record trigger: got %v, want idle", r["trigger"])
	}
	if r["status"] != "failed" {
		t.Errorf("record status: got %v, want failed", r["status"])
	}
	validateAll(t, rec, 1)
}
