package acpsdk_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/lines"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLineOverTheBoundClosesTheConnectionTheKitsWay: the client sends,
// while a compaction is open, a 64 MiB line, more than the SDK reads
// (10 MiB). The kit takes no more of it than its bound and its read
// buffer, settles the open compaction and writes the settlement, ends the
// prompt's context (emitter.ErrConnectionClosed), and the SDK's connection
// ends. Memory stays bounded: the whole test allocates a fraction of the
// line.
func TestLineOverTheBoundClosesTheConnectionTheKitsWay(t *testing.T) {
	const lineLen = 64 << 20
	r := newRig(t)
	a := &agent{}
	cause := make(chan error, 1)
	a.prompt = hangPrompt(cause)
	r.serve(a)
	r.Initialize(1, true)
	r.StartPrompt()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// The writer stops when the kit stops reading (the pipe blocks) and
	// the test's hang-up closes the pipe.
	taken := make(chan int64, 1)
	go func() {
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		n, _ := r.pipes.toAgentW.Write([]byte(`{"jsonrpc":"2.0","method":"_x/big","params":{"s":"`))
		total := int64(n)
		for total < lineLen {
			n, err := r.pipes.toAgentW.Write(chunk)
			total += int64(n)
			if err != nil {
				break
			}
		}
		taken <- total
	}()

	ev, err := r.Client.Wire.Wait(r.Ctx, func(e kittest.Event) bool { return e.CompactionID == "cmp_1" && e.Status == "failed" })
	require.NoError(t, err, "the open compaction was not settled on the wire")
	assert.Contains(t, string(kittest.Field(ev, "error")), "connection closed")
	assert.ErrorIs(t, <-cause, emitter.ErrConnectionClosed, "the prompt's context")
	select {
	case <-r.done:
	case <-r.Ctx.Done():
		require.Fail(t, "the SDK's connection did not end")
	}

	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r.Close()
	n := <-taken
	assert.LessOrEqual(t, n, int64(acpsdk.MaxLine+lines.ReadBuffer+1<<20), "the kit read on past its bound")
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("the kit took %d bytes of the %d-byte line; the test allocated %d bytes meanwhile", n, lineLen, grew)
	assert.Less(t, grew, uint64(4*acpsdk.MaxLine), "allocated more than four times the bound while a line of six times it came")
}

// TestLineAtTheBoundIsRead: a line of exactly the bound (its newline
// included) reaches the engine and the SDK, as it reaches the SDK without
// the kit; the connection goes on.
func TestLineAtTheBoundIsRead(t *testing.T) {
	r := newRig(t)
	a := &agent{}
	r.serve(a)
	r.Initialize(1, true)
	head := []byte(`{"jsonrpc":"2.0","method":"_x/big","params":{"s":"`)
	tail := []byte(`"}}` + "\n")
	line := append(append(head, bytes.Repeat([]byte("a"), acpsdk.MaxLine-len(head)-len(tail))...), tail...)
	require.Len(t, line, acpsdk.MaxLine)
	_, err := r.pipes.toAgentW.Write(line)
	require.NoError(t, err)
	_, err = r.Client.Prompt(r.Ctx, session, nil)
	require.NoError(t, err, "a prompt after a line at the bound")
	select {
	case <-r.done:
		assert.Fail(t, "the connection ended at a line within the bound")
	default:
	}
	r.Finish(1)
}
