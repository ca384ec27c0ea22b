package fallback_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.jsonl from the current output")

// goldenRenderers names every renderer configuration that has a golden
// wire file.
func goldenRenderers() []struct {
	name string
	r    emitter.Renderer
} {
	return []struct {
		name string
		r    emitter.Renderer
	}{
		{"text", fallback.Text()},
		{"text-summary", fallback.Text(fallback.WithSummary())},
		{"marker", fallback.Marker()},
		{"marker-custom-key", fallback.Marker(fallback.WithKey("example.com/compaction"))},
		{"opencode-marker", fallback.OpencodeMarker()},
		{"toolcall", fallback.ToolCall()},
		{"toolcall-content", fallback.ToolCall(fallback.WithSummaryContent())},
		{"none", fallback.None{}},
		{"compose-marker-text", fallback.Compose(fallback.Marker(), fallback.Text())},
	}
}

// goldenScenario drives one emitter through every lifecycle a fallback must
// render: streaming then completion, failure after partial output, cancel,
// a failure reported before any start, a final summary, two compactions open
// at once ended by a user cancel, a child session's compaction on its
// parent's stream, and a session/load replay of each terminal status next to
// a running compaction that must be skipped.
func goldenScenario(t *testing.T, em *emitter.Emitter) {
	t.Helper()
	ctx := context.Background()
	s := em.Session("sess_1")

	// step stops the scenario at its first failing call: every later step
	// builds on the state the earlier ones left.
	step := func(what string, err error) {
		t.Helper()
		require.NoError(t, err, "%s", what)
	}

	c1, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Manual), emitter.UserDisplayable())
	step("start cmp_1", err)
	step("chunk 1 of cmp_1", c1.Chunk(ctx, protocol.Text("## Retained context\n\n")))
	step("chunk 2 of cmp_1", c1.Chunk(ctx, protocol.Text("The user is updating the ACP schema.")))
	step("complete cmp_1", c1.Complete(ctx, emitter.WithSettleMeta(protocol.Meta{
		"example.com/usage": mustJSON(t, map[string]int{"tokensBefore": 180000, "tokensAfter": 42000}),
	})))

	c2, err := s.Start(ctx, emitter.WithID("cmp_2"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	step("start cmp_2", err)
	step("chunk of cmp_2", c2.Chunk(ctx, protocol.Text("partial")))
	step("fail cmp_2", c2.Fail(ctx, errors.New("provider overloaded")))

	c3, err := s.Start(ctx, emitter.WithID("cmp_3"), emitter.WithTrigger(protocol.Idle))
	step("start cmp_3", err)
	step("cancel cmp_3", c3.Cancel(ctx))

	c4, err := s.Start(ctx, emitter.WithID("cmp_4"))
	step("start cmp_4", err)
	step("fail cmp_4", c4.Fail(ctx, errors.New("panic: boom\ngoroutine 1 [running]:")))

	c5, err := s.Start(ctx, emitter.WithID("cmp_5"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable(),
		emitter.WithStartMeta(protocol.Meta{"example.com/trace": mustJSON(t, "span-5")}))
	step("start cmp_5", err)
	step("complete cmp_5", c5.Complete(ctx, emitter.Summary(protocol.Text("Final summary."))))

	c6, err := s.Start(ctx, emitter.WithID("cmp_6"), emitter.WithTrigger(protocol.Auto))
	step("start cmp_6", err)
	c7, err := s.Start(ctx, emitter.WithID("cmp_7"), emitter.WithTrigger(protocol.Auto))
	step("start cmp_7", err)
	step("complete cmp_7", c7.Complete(ctx))
	n, err := s.SettleAll(ctx, emitter.ErrCancelled)
	step("settle all", err)
	require.Equal(t, 1, n, "SettleAll settled %d compactions(cmp_6)", n)
	require.Equal(t, protocol.ID("cmp_6"), c6.ID(), "c6.ID()")

	load := em.Session("sess_2")
	for _, rec := range []emitter.Record{
		{ID: "cmp_r1", Status: protocol.Completed, Trigger: protocol.Auto, Displayable: true, Summary: []protocol.ContentBlock{protocol.Text("Replayed summary.")}},
		{ID: "cmp_r2", Status: protocol.Failed, Trigger: protocol.Manual, Error: "context window still exceeded"},
		{ID: "cmp_r3", Status: protocol.Cancelled, Trigger: protocol.Manual},
		{ID: "cmp_r4", Status: protocol.InProgress, Trigger: protocol.Auto},
	} {
		step("replay "+string(rec.ID), load.Replay(ctx, rec))
	}
}

func TestGoldenWire(t *testing.T) {
	for _, tc := range goldenRenderers() {
		t.Run(tc.name, func(t *testing.T) {
			em, rec := newFallbackEmitter(t, tc.r)
			goldenScenario(t, em)
			lines := rec.Lines()
			requireValidV1(t, lines)
			requireNoStandardUpdates(t, rec.Updates())

			var got bytes.Buffer
			for _, l := range lines {
				got.Write(l)
				got.WriteByte('\n')
			}
			path := filepath.Join("testdata", "golden", tc.name+".jsonl")
			if *update {
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644), "update golden file")
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "golden file missing; regenerate with: go test ./fallback/ -run TestGoldenWire -update")
			require.Equal(t, string(want), got.String(), "wire differs from %s; if the change is intended, rerun with -update and review the diff\n%s", path, firstDifference(got.String(), string(want)))
		})
	}
}

// firstDifference describes where got and want part, line by line, so that
// a golden failure points at the one line that changed.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\ngot  %s\nwant %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(g), len(w))
}
