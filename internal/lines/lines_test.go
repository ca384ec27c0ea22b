package lines

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunkReader returns at most a few random bytes per read, as a pipe does.
type chunkReader struct {
	b []byte
	r *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.r.IntN(200<<10))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func filled(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + (seed+byte(i))%26
	}
	return b
}

// Lines of every size, read in pieces, come out whole and unchanged,
// through the read buffer, acc and the blocks; a line over the limit
// comes as a head and its rest; the count and the offset follow.
func TestReaderReadsLinesOfEverySize(t *testing.T) {
	sizes := []int{10, ReadBuffer - 1, ReadBuffer + 1, 300 << 10, keepAccMax - 1, keepAccMax, keepAccMax + 1,
		bigBlock*3 + 7, 5 << 20, 10}
	var in bytes.Buffer
	var want [][]byte
	for i, n := range sizes {
		l := append(filled(n, byte(i)), '\n')
		want = append(want, l)
		in.Write(l)
	}
	in.WriteString("last, without terminator")
	lr := NewReader(&chunkReader{b: in.Bytes(), r: rand.New(rand.NewPCG(1, 2))}, 64<<20)
	var kept [][]byte // lines Detach handed over must never change
	var keptWant [][]byte
	var off int64
	for i, w := range want {
		line, long, err := lr.Next()
		require.NoError(t, err, "line %d", i)
		require.False(t, long, "line %d", i)
		require.True(t, bytes.Equal(line, w), "line %d (%d bytes): got %d bytes, not the line", i, len(w), len(line))
		off += int64(len(w))
		require.Equal(t, i+1, lr.Lines(), "lines counted")
		require.Equal(t, off, lr.Offset(), "offset after line %d", i)
		if lr.Detach(line[1:]) {
			kept, keptWant = append(kept, line), append(keptWant, bytes.Clone(line))
		} else {
			assert.LessOrEqual(t, len(w), ReadBuffer, "line %d outgrew the read buffer but was not handed over", i)
		}
	}
	line, _, err := lr.Next()
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "last, without terminator", string(line))
	assert.Equal(t, len(want)+1, lr.Lines(), "a final line without terminator counts")
	for i := range kept {
		assert.True(t, bytes.Equal(kept[i], keptWant[i]), "a line handed over by Detach was overwritten")
	}
	assert.GreaterOrEqual(t, len(kept), 5, "lines handed over")
	_, _, err = lr.Next()
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, len(want)+1, lr.Lines(), "nothing after the end counts as a line")

	// Over the limit: a head, then the rest.
	big := append(filled(3<<20, 0), '\n')
	lr = NewReader(&chunkReader{b: append(bytes.Clone(big), "next\n"...), r: rand.New(rand.NewPCG(3, 4))}, 1<<20)
	head, long, err := lr.Next()
	require.NoError(t, err)
	require.True(t, long, "a line over the limit comes as a head")
	require.Greater(t, len(head), 1<<20)
	require.True(t, bytes.Equal(head, big[:len(head)]), "the head is the line's beginning")
	rest := bytes.Clone(head)
	require.NoError(t, lr.CopyRest(func(b []byte) error { rest = append(rest, b...); return nil }))
	require.True(t, bytes.Equal(rest, big), "head and rest are the line")
	assert.Equal(t, int64(len(big)), lr.Offset(), "the offset counts the rest")
	line, _, _ = lr.Next()
	assert.Equal(t, "next\n", string(line), "after the long line")
}

// A line still in the read buffer is not handed over: the next read
// overwrites it.
func TestReaderKeepsTheReadBuffer(t *testing.T) {
	lr := NewReader(strings.NewReader("short\nnext\n"), 1<<20)
	line, _, _ := lr.Next()
	assert.False(t, lr.Detach(line), "a line in the read buffer was handed over")
}

// Ready says whether Next can return without reading.
func TestReaderReady(t *testing.T) {
	lr := NewReader(strings.NewReader("one\ntwo\nthr"), 1<<20)
	assert.False(t, lr.Ready(), "nothing is buffered before the first read")
	_, _, err := lr.Next()
	require.NoError(t, err)
	assert.True(t, lr.Ready(), "the second line is buffered")
	_, _, err = lr.Next()
	require.NoError(t, err)
	assert.False(t, lr.Ready(), "a line without its terminator is not ready")
}

// Message trims as JavaScript's String.prototype.trim after TextDecoder:
// a BOM, form feeds, no-break and Zs spaces, CR; not U+0085, and not
// invalid UTF-8.
func TestMessageTrimsAsTheTypeScriptSDK(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{}\n", "{}"},
		{"\ufeff{}\r\n", "{}"},
		{" \t\f\v\u00a0\u2003{}\u3000\u2028\u2029\n", "{}"},
		{"\u0085{}", "\u0085{}"},
		{"\xff{}\xfe", "\xff{}\xfe"},
		{"\n", ""},
		{"  \r\n", ""},
		{"", ""},
	} {
		assert.Equal(t, tc.want, string(Message([]byte(tc.in))), "Message(%q)", tc.in)
	}
	assert.Equal(t, "{\"a\": ", string(TrimLeft([]byte("\ufeff {\"a\": "))), "TrimLeft keeps the end")
}
