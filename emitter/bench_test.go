package emitter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Benchmarks of the lifecycle engine. None of them asserts anything about
// time. The notifier they send through encodes each update as one
// session/update line, as a host's Notifier does, and writes it to a sink.

const benchText = "The user is updating the ACP schema; keep the retained context short. "

// lineNotifier writes each update as one newline-terminated session/update
// notification, marshalled by encoding/json, to w.
type lineNotifier struct{ w io.Writer }

type updateParams struct {
	SessionID string `json:"sessionId"`
	Update    any    `json:"update"`
}

type notification struct {
	JSONRPC string       `json:"jsonrpc"`
	Method  string       `json:"method"`
	Params  updateParams `json:"params"`
}

func (n lineNotifier) Notify(_ context.Context, sessionID string, update any) error {
	b, err := json.Marshal(notification{"2.0", "session/update", updateParams{sessionID, update}})
	if err != nil {
		return err
	}
	_, err = n.w.Write(append(b, '\n'))
	return err
}

// pipeSink is an os.Pipe whose read end a goroutine drains: a client that
// takes whatever is written and validates nothing.
func pipeSink(b *testing.B) io.Writer {
	b.Helper()
	r, w, err := os.Pipe()
	require.NoError(b, err, "os.Pipe")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, r)
	}()
	b.Cleanup(func() {
		_ = w.Close()
		<-done
		_ = r.Close()
	})
	return w
}

func benchEmitter(n emitter.Notifier, opts ...emitter.Option) *emitter.Emitter {
	return emitter.New(n, append([]emitter.Option{emitter.WithNegotiation(capable)}, opts...)...)
}

func openCompaction(b *testing.B, em *emitter.Emitter) *emitter.Compaction {
	b.Helper()
	c, err := em.Session("sess_1").Start(context.Background(), emitter.WithID("cmp_bench"), emitter.UserDisplayable())
	require.NoError(b, err, "em.Session(\"sess_1\").Start")
	return c
}

// BenchmarkChunk: summary chunks to a pipe, through the same host encoder
// (lineNotifier): raw sends a pre-built chunk notification directly, as a
// host without acpcompact would; emitter streams the same chunk through an
// open compaction of the emitter (capability on). The difference is what
// the emitter adds per chunk.
func BenchmarkChunk(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		n := lineNotifier{pipeSink(b)}
		ctx := context.Background()
		u := &protocol.CompactionSummaryChunk{CompactionID: "cmp_bench", Content: protocol.Text(benchText)}
		b.ReportAllocs()
		for b.Loop() {
			if err := n.Notify(ctx, "sess_1", u); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "n.Notify")
			}
		}
	})
	b.Run("emitter", func(b *testing.B) {
		c := openCompaction(b, benchEmitter(lineNotifier{pipeSink(b)}))
		block := protocol.Text(benchText)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Chunk(context.Background(), block); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "c.Chunk")
			}
		}
	})
}

// BenchmarkChunkAllocs separates what the emitter allocates from what JSON
// encoding does: encode marshals a pre-built chunk notification, emitter
// streams the same chunk through the emitter and the same encoding, nop
// streams it through the emitter to a notifier that encodes nothing.
func BenchmarkChunkAllocs(b *testing.B) {
	b.Run("encode", func(b *testing.B) {
		n := lineNotifier{io.Discard}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			u := &protocol.CompactionSummaryChunk{CompactionID: "cmp_bench", Content: protocol.Text(benchText)}
			if err := n.Notify(ctx, "sess_1", u); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "n.Notify")
			}
		}
	})
	b.Run("emitter", func(b *testing.B) {
		c := openCompaction(b, benchEmitter(lineNotifier{io.Discard}))
		block := protocol.Text(benchText)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Chunk(context.Background(), block); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "c.Chunk")
			}
		}
	})
	b.Run("nop", func(b *testing.B) {
		nop := emitter.NotifierFunc(func(context.Context, string, any) error { return nil })
		c := openCompaction(b, benchEmitter(nop))
		block := protocol.Text(benchText)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Chunk(context.Background(), block); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "c.Chunk")
			}
		}
	})
}

// BenchmarkLifecycle: Start, 10 chunks, Complete, encoded to io.Discard.
func BenchmarkLifecycle(b *testing.B) {
	em := benchEmitter(lineNotifier{io.Discard})
	s := em.Session("sess_1")
	ctx := context.Background()
	block := protocol.Text(benchText)
	b.ReportAllocs()
	for b.Loop() {
		c, err := s.Start(ctx, emitter.UserDisplayable())
		if err != nil { // require only on failure: its t.Helper would be timed
			require.NoError(b, err, "s.Start")
		}
		for range 10 {
			if err := c.Chunk(ctx, block); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "c.Chunk")
			}
		}
		if err := c.Complete(ctx); err != nil { // require only on failure: its t.Helper would be timed
			require.NoError(b, err, "c.Complete")
		}
	}
}

// BenchmarkSettleAll: settle 10,000 open compactions across 1,000 sessions
// (one Emitter.SettleAll, as a closing connection does), encoded to
// io.Discard. Opening them is not timed.
func BenchmarkSettleAll(b *testing.B) {
	const sessions, perSession = 1000, 10
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("sess_%04d", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		em := benchEmitter(lineNotifier{io.Discard})
		for _, id := range ids {
			s := em.Session(id)
			for range perSession {
				_, err := s.Start(ctx)
				require.NoError(b, err, "Start")
			}
		}
		b.StartTimer()
		n, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
		require.NoError(b, err, "SettleAll")
		require.Equal(b, sessions*perSession, n, "SettleAll settled")
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// openMany opens one compaction in each of n sessions of a fresh emitter
// (with opts), streaming chunks chunks of text into each, and returns the
// emitter and the live heap it holds.
func openMany(n, chunks int, text string, opts ...emitter.Option) (*emitter.Emitter, uint64) {
	nop := emitter.NotifierFunc(func(context.Context, string, any) error { return nil })
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("sess_%06d", i)
	}
	ctx := context.Background()
	before := heapInUse()
	em := benchEmitter(nop, opts...)
	for _, id := range ids {
		c, err := em.Session(id).Start(ctx, emitter.UserDisplayable())
		if err != nil {
			panic(err)
		}
		for range chunks {
			// A text of its own per chunk, as a runtime's deltas are: a
			// block kept is then its text kept.
			if err := c.Chunk(ctx, protocol.Text(strings.Clone(text))); err != nil {
				panic(err)
			}
		}
	}
	after := heapInUse()
	runtime.KeepAlive(ids)
	if after < before {
		return em, 0
	}
	return em, after - before
}

// BenchmarkOpenCompactionMemory opens one compaction in each of 100,000
// sessions and reports the live heap per open compaction (runtime.MemStats
// after GC; the session ID strings are the caller's and not counted).
// "streamed" first streams 4 chunks of 2 KiB into each: by default streamed
// chunks are not retained, so the two report the same. The "onfinalrecord"
// variants set OnFinalRecord, which keeps the streamed blocks of an open
// compaction for its final record: the streamed one grows by what was
// streamed, until the compaction settles.
func BenchmarkOpenCompactionMemory(b *testing.B) {
	const n = 100_000
	sink := emitter.OnFinalRecord(func(context.Context, string, emitter.Record) {})
	for _, v := range []struct {
		name   string
		chunks int
		text   string
		opts   []emitter.Option
	}{
		{"idle", 0, "", nil},
		{"streamed", 4, strings.Repeat("x", 2048), nil},
		{"idle-onfinalrecord", 0, "", []emitter.Option{sink}},
		{"streamed-onfinalrecord", 4, strings.Repeat("x", 2048), []emitter.Option{sink}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				em, used := openMany(n, v.chunks, v.text, v.opts...)
				per = float64(used) / n
				runtime.KeepAlive(em)
			}
			b.ReportMetric(per, "B/open-compaction")
		})
	}
}

// TestOpenCompactionMemoryIsBoundedAndIndependentOfSummaryLength guards the
// memory budget (at most 512 bytes per open compaction, one per session)
// and that, without OnFinalRecord, streamed summary text is not retained.
func TestOpenCompactionMemoryIsBoundedAndIndependentOfSummaryLength(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MB")
	}
	const n = 20_000
	em, idle := openMany(n, 0, "")
	runtime.KeepAlive(em)
	em, streamed := openMany(n, 4, strings.Repeat("x", 2048))
	runtime.KeepAlive(em)
	perIdle, perStreamed := float64(idle)/n, float64(streamed)/n
	t.Logf("bytes per open compaction: %.0f idle, %.0f after streaming 8 KiB", perIdle, perStreamed)
	if assert.LessOrEqual(t, perIdle, float64(512), "over budget: %.0f idle, %.0f streamed bytes per open compaction (max 512)", perIdle, perStreamed) {
		assert.LessOrEqual(t, perStreamed, float64(512), "over budget: %.0f idle, %.0f streamed bytes per open compaction (max 512)", perIdle, perStreamed)
	}
	assert.LessOrEqual(t, perStreamed, perIdle+64, "streaming 8 KiB per compaction grew it from %.0f to %.0f bytes: chunks are retained", perIdle, perStreamed)
}

// TestOnFinalRecordKeepsStreamedBlocksOnlyWhileOpen: with OnFinalRecord
// the streamed blocks of an open compaction are kept (its final record
// needs them) and released when it settles and its record is handed over,
// so the emitter's memory follows what is live.
func TestOnFinalRecordKeepsStreamedBlocksOnlyWhileOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MB")
	}
	const n = 5_000
	text := strings.Repeat("x", 2048)
	handed := 0
	sink := emitter.OnFinalRecord(func(_ context.Context, _ string, rec emitter.Record) {
		if len(rec.Summary) == 4 {
			handed++
		}
	})
	em, idle := openMany(n, 0, "", sink)
	runtime.KeepAlive(em)
	before := heapInUse()
	em, streamed := openMany(n, 4, text, sink)
	perIdle, perStreamed := float64(idle)/n, float64(streamed)/n
	assert.GreaterOrEqual(t, perStreamed, perIdle+4*2048, "streaming 8 KiB into each open compaction grew it from %.0f to %.0f bytes only: the blocks are not kept", perIdle, perStreamed)
	// Completing keeps what was streamed: every record carries it, and the
	// emitter lets it go.
	for i := range n {
		s := em.Session(fmt.Sprintf("sess_%06d", i))
		_, err := s.SettleAll(context.Background(), emitter.ErrTurnEnded)
		require.NoError(t, err, "SettleAll")
	}
	after := heapInUse()
	runtime.KeepAlive(em)
	t.Logf("bytes per compaction: %.0f idle, %.0f open after streaming 8 KiB, %.0f once settled", perIdle, perStreamed, (float64(after)-float64(before))/n)
	grown := float64(after) - float64(before)
	assert.LessOrEqual(t, grown, float64(n)*(perIdle+64), "settled compactions still hold %.0f bytes each: the streamed blocks were not released", grown/n)
	assert.Equal(t, 0, handed, "%d failed compactions recorded a summary", handed)
}
