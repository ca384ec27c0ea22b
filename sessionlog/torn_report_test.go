package sessionlog_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/sessionlog"
)

// recorder is a slog.Handler that keeps every record's level, message
// and attributes.
type recorder struct {
	mu   sync.Mutex
	recs []logged
}

type logged struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	l := logged{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	h.recs = append(h.recs, l)
	h.mu.Unlock()
	return nil
}

func (h *recorder) take() []logged {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.recs
	h.recs = nil
	return out
}

// TestTornTailIsReported: a torn final line is reported where it is read
// past (Read: a WARN naming the file and the byte count, and TornBytes)
// and where it is cut off (Append: a WARN naming the file, the byte count
// and the aside copy); every later Reader names the aside copy
// (TornAside). A log that ends with its newline reports nothing.
func TestTornTailIsReported(t *testing.T) {
	const torn = `{"crc":"01234567","kind":"message","id":"m3","da`
	_, path, _ := tornLog(t, torn)
	rec := &recorder{}
	s, err := sessionlog.Open(dirOf(path), sessionlog.WithLogger(slog.New(rec)))
	require.NoError(t, err)

	r, err := s.Read("s")
	require.NoError(t, err)
	assert.EqualValues(t, len(torn), r.TornBytes())
	assert.Empty(t, r.TornAside(), "nothing was cut yet")
	require.NoError(t, r.Close())
	logs := rec.take()
	require.Len(t, logs, 1)
	assert.Equal(t, slog.LevelWarn, logs[0].level)
	assert.Equal(t, path, logs[0].attrs["file"])
	assert.EqualValues(t, len(torn), logs[0].attrs["bytes"])

	l, err := s.Append("s")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	logs = rec.take()
	require.Len(t, logs, 1)
	assert.Equal(t, slog.LevelWarn, logs[0].level)
	assert.Equal(t, path, logs[0].attrs["file"])
	assert.EqualValues(t, len(torn), logs[0].attrs["bytes"])
	assert.Equal(t, path+".torn", logs[0].attrs["aside"])

	r, err = s.Read("s")
	require.NoError(t, err)
	assert.Zero(t, r.TornBytes())
	assert.Equal(t, path+".torn", r.TornAside())
	require.NoError(t, r.Close())
	assert.Empty(t, rec.take(), "reading a log that ends with its newline logged something")

	require.NoError(t, s.Remove("s"))
	assert.NoFileExists(t, path+".torn", "Remove leaves the aside copy behind")
}
