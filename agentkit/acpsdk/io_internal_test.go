package acpsdk

import (
	"bufio"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wired is a Conn's reader and writer over in and out, as
// NewConnection wires them for the SDK.
func wired(in io.Reader, out io.Writer) (*Conn, io.Writer, io.Reader) {
	return New(WithLogger(slog.New(slog.DiscardHandler))).wire(out, in)
}

func notification(method string) string { return `{"jsonrpc":"2.0","method":"` + method + `"}` }

// A line one byte over the bound, its newline included, ends the input
// with an error wrapping bufio.ErrTooLong (the SDK's own), after the
// lines before it, and closes the connection for the kit.
func TestReaderRefusesALineOneByteOverTheBound(t *testing.T) {
	first := notification("_x/first") + "\n"
	over := `{"s":"` + strings.Repeat("a", maxLine-len(`{"s":""}`)) + `"}` + "\n"
	require.Len(t, over, maxLine+1)
	c, _, r := wired(strings.NewReader(first+over+notification("_x/after")+"\n"), io.Discard)

	got, err := io.ReadAll(r)
	require.ErrorIs(t, err, bufio.ErrTooLong)
	assert.Equal(t, first, string(got), "what the SDK read")
	assert.True(t, c.t.Closed(), "the kit did not close the connection")
	_, err = r.Read(make([]byte, 1))
	assert.ErrorIs(t, err, bufio.ErrTooLong, "a later Read")
}

// The writer shows the engine whole lines: one split over several Writes
// is joined, several in one Write go one by one; an unfinished line that
// outgrows the bound is dropped up to its newline, those Writes fail, and
// the lines after it go out.
func TestWriterJoinsSplitLinesAndBoundsAnUnfinishedOne(t *testing.T) {
	var out wiretest.Buffer
	c, w, _ := wired(strings.NewReader(""), &out)
	write := func(s string) error {
		_, err := w.Write([]byte(s))
		return err
	}
	a, b := notification("_x/a"), notification("_x/b")
	require.NoError(t, write(a[:5]))
	require.NoError(t, write(a[5:]+"\n"+b+"\n"))

	big := strings.Repeat("x", maxLine/2)
	require.NoError(t, write(`{"s":"`+big))
	assert.ErrorIs(t, write(big), bufio.ErrTooLong, "the Write that outgrew the bound")
	assert.ErrorIs(t, write(big), bufio.ErrTooLong, "a Write of the dropped line's rest")
	assert.ErrorIs(t, write(`"}`+"\n"+notification("_x/c")+"\n"), bufio.ErrTooLong, "the Write that ends the dropped line")
	require.NoError(t, write(notification("_x/d")+"\n"))
	require.NoError(t, c.t.Flush())

	assert.Equal(t, a+"\n"+b+"\n"+notification("_x/c")+"\n"+notification("_x/d")+"\n", out.String())
}
