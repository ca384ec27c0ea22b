package fallback_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
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

	c1, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Manual), emitter.UserDisplayable())
	require.NoError(t, err)
	require.NoError(t, c1.Chunk(ctx, protocol.Text("## Retained context\n\n")))
	require.NoError(t, c1.Chunk(ctx, protocol.Text("The user is updating the ACP schema.")))
	require.NoError(t, c1.Complete(ctx, emitter.WithSettleMeta(protocol.Meta{
		"example.com/usage": mustJSON(t, map[string]int{"tokensBefore": 180000, "tokensAfter": 42000}),
	})))

	c2, err := s.Start(ctx, emitter.WithID("cmp_2"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	require.NoError(t, err)
	require.NoError(t, c2.Chunk(ctx, protocol.Text("partial")))
	require.NoError(t, c2.Fail(ctx, errors.New("provider overloaded")))

	c3, err := s.Start(ctx, emitter.WithID("cmp_3"), emitter.WithTrigger(protocol.Idle))
	require.NoError(t, err)
	require.NoError(t, c3.Cancel(ctx))

	require.NoError(t, s.Fail(ctx, "cmp_4", errors.New("panic: boom\ngoroutine 1 [running]:")))

	c5, err := s.Start(ctx, emitter.WithID("cmp_5"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable(),
		emitter.WithStartMeta(protocol.Meta{"example.com/trace": mustJSON(t, "span-5")}))
	require.NoError(t, err)
	require.NoError(t, c5.Complete(ctx, emitter.Summary(protocol.Text("Final summary."))))

	c6, err := s.Start(ctx, emitter.WithID("cmp_6"), emitter.WithTrigger(protocol.Auto))
	require.NoError(t, err)
	c7, err := s.Start(ctx, emitter.WithID("cmp_7"), emitter.WithTrigger(protocol.Auto))
	require.NoError(t, err)
	require.NoError(t, c7.Complete(ctx))
	n, err := s.SettleAll(ctx, emitter.ErrCancelled)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, protocol.ID("cmp_6"), c6.ID())

	child := em.ChildSession("sess_1", "sub_1")
	cc, err := child.Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto))
	require.NoError(t, err)
	require.NoError(t, cc.Complete(ctx))

	load := em.Session("sess_2")
	for _, rec := range []emitter.Record{
		{ID: "cmp_r1", Status: protocol.Completed, Trigger: protocol.Auto, Displayable: true, Summary: []protocol.ContentBlock{protocol.Text("Replayed summary.")}},
		{ID: "cmp_r2", Status: protocol.Failed, Trigger: protocol.Manual, Error: "context window still exceeded"},
		{ID: "cmp_r3", Status: protocol.Cancelled, Trigger: protocol.Manual},
		{ID: "cmp_r4", Status: protocol.InProgress, Trigger: protocol.Auto},
	} {
		require.NoError(t, load.Replay(ctx, rec))
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
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "golden file missing; regenerate with: go test ./fallback/ -run TestGoldenWire -update")
			require.Equal(t, string(want), got.String(), "wire differs from %s; if the change is intended, rerun with -update and review the diff", path)
		})
	}
}
