package sessionlog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T, opts ...sessionlog.Option) *sessionlog.Store {
	t.Helper()
	s, err := sessionlog.Open(t.TempDir(), opts...)
	require.NoError(t, err, "sessionlog.Open")
	return s
}

func create(t *testing.T, s *sessionlog.Store, id string) *sessionlog.Log {
	t.Helper()
	l, err := s.Create(id, map[string]string{"cwd": "/work"})
	require.NoError(t, err, "s.Create")
	t.Cleanup(func() { l.Close() })
	return l
}

func must(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

func msg(text string) map[string]string { return map[string]string{"text": text} }

func started(id string) emitter.Record {
	return emitter.Record{ID: protocol.ID(id), Status: protocol.InProgress, Trigger: protocol.Manual, Displayable: true}
}

func final(id string, st protocol.Status, summary string) emitter.Record {
	r := started(id)
	r.Status = st
	if summary != "" {
		r.Summary = []protocol.ContentBlock{protocol.Text(summary)}
	}
	if st == protocol.Failed {
		r.Error = "summary request failed"
	}
	r.Details = &emitter.Details{Trigger: protocol.Manual, Status: st, TokensBefore: 1000, TokensAfter: 100}
	return r
}

// read returns the history of a session as short words: "m:ID:TEXT" for
// a message, "c:ID:STATUS" for a compaction ("!" when interrupted).
func read(t *testing.T, s *sessionlog.Store, id string) ([]string, []sessionlog.Entry) {
	t.Helper()
	r, err := s.Read(id)
	require.NoError(t, err, "s.Read")
	defer r.Close()
	var words []string
	var entries []sessionlog.Entry
	for e, err := range r.Entries() {
		require.NoError(t, err, "Entries")
		entries = append(entries, e)
		switch e.Kind {
		case sessionlog.KindMessage:
			var m map[string]string
			must(t, json.Unmarshal(e.Data, &m))
			words = append(words, "m:"+e.MessageID+":"+m["text"])
		case sessionlog.KindCompaction:
			w := "c:" + string(e.Record.ID) + ":" + string(e.Record.Status)
			if e.Interrupted {
				w += "!"
			}
			words = append(words, w)
		}
	}
	return words, entries
}

func wantWords(t *testing.T, got []string, want ...string) {
	t.Helper()
	assert.Equal(t, strings.Join(want, " "), strings.Join(got, " "), "history")
}

func TestRoundTrip(t *testing.T) {
	s := open(t)
	l := create(t, s, "sess_1")
	must(t, l.AppendMessage("msg_1", msg("hello")))
	must(t, l.AppendMessage("msg_2", msg("hello back")))
	must(t, l.AppendRecord(started("cmp_1")))
	c1 := final("cmp_1", protocol.Completed, "## Retained context\n")
	must(t, l.AppendRecord(c1))
	must(t, l.AppendMessage("msg_3", msg("compacted")))
	must(t, l.AppendRecord(started("cmp_2")))
	must(t, l.AppendRecord(final("cmp_2", protocol.Failed, "")))
	must(t, l.AppendRecord(final("cmp_3", protocol.Cancelled, ""))) // no start: placed at its record
	must(t, l.Close())

	words, entries := read(t, s, "sess_1")
	wantWords(t, words, "m:msg_1:hello", "m:msg_2:hello back", "c:cmp_1:completed", "m:msg_3:compacted", "c:cmp_2:failed", "c:cmp_3:cancelled")
	got := entries[2].Record
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(c1)
	assert.Equal(t, wj, gj, "record round trip")
	if assert.Equal(t, 5, entries[2].Line, "lines %d, %d", entries[0].Line, entries[2].Line) {
		assert.Equal(t, 2, entries[0].Line, "lines %d, %d", entries[0].Line, entries[2].Line)
	}

	r, err := s.Read("sess_1")
	must(t, err)
	defer r.Close()
	h := r.Header()
	if assert.Equal(t, "sess_1", h.Session, "header %+v", h) {
		if assert.False(t, h.Created.IsZero(), "header %+v", h) {
			assert.Equal(t, `{"cwd":"/work"}`, string(h.Info), "header %+v", h)
		}
	}
	// Entries may be read again, and stopped early.
	n := 0
	for range r.Entries() {
		n++
		if n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n, "stopped after %d", n)
}

// TestFinalRecordAfterLaterMessages: a compaction whose final record is
// appended after later messages (settled in a later turn) stays where it
// started.
func TestFinalRecordAfterLaterMessages(t *testing.T) {
	s := open(t)
	l := create(t, s, "s")
	must(t, l.AppendMessage("m1", msg("a")))
	must(t, l.AppendRecord(started("c1")))
	must(t, l.AppendMessage("m2", msg("b")))
	must(t, l.AppendMessage("m3", msg("c")))
	must(t, l.AppendRecord(final("c1", protocol.Completed, "s")))
	must(t, l.AppendRecord(final("c1", protocol.Failed, ""))) // a second final record does not count
	words, _ := read(t, s, "s")
	wantWords(t, words, "m:m1:a", "c:c1:completed", "m:m2:b", "m:m3:c")
}

// TestInterruptedCompactionReadsBackFailed: a start without a final record
// (the process died) reads back as failed, at its place, never in_progress.
func TestInterruptedCompactionReadsBackFailed(t *testing.T) {
	s := open(t)
	l := create(t, s, "s")
	must(t, l.AppendMessage("m1", msg("/compact slow")))
	must(t, l.AppendRecord(started("c1")))
	must(t, l.Close())
	words, entries := read(t, s, "s")
	wantWords(t, words, "m:m1:/compact slow", "c:c1:failed!")
	rec := entries[1].Record
	if assert.Equal(t, sessionlog.ErrInterrupted.Error(), rec.Error, "interrupted record %+v", rec) {
		if assert.Nil(t, rec.Summary, "interrupted record %+v", rec) {
			if assert.Equal(t, protocol.Manual, rec.Trigger, "interrupted record %+v", rec) {
				assert.True(t, entries[1].Interrupted, "interrupted record %+v", rec)
			}
		}
	}
}

func TestTornFinalLine(t *testing.T) {
	s := open(t)
	l := create(t, s, "s")
	must(t, l.AppendMessage("m1", msg("a")))
	must(t, l.AppendMessage("m2", msg("b")))
	must(t, l.Close())
	path, _ := s.Path("s")
	whole, err := os.ReadFile(path)
	must(t, err)
	// The process died half-way through the third line.
	torn := `{"crc":"01234567","kind":"message","id":"m3","da`
	must(t, os.WriteFile(path, append(bytes.Clone(whole), torn...), 0o600))

	r, err := s.Read("s")
	must(t, err)
	assert.Equal(t, int64(len(torn)), r.TornBytes(), "torn bytes")
	r.Close()
	words, _ := read(t, s, "s")
	wantWords(t, words, "m:m1:a", "m:m2:b")

	// The next append cuts it off first.
	l, err = s.Append("s")
	must(t, err)
	must(t, l.AppendMessage("m3", msg("c")))
	must(t, l.Close())
	words, _ = read(t, s, "s")
	wantWords(t, words, "m:m1:a", "m:m2:b", "m:m3:c")
	after, err := os.ReadFile(path)
	must(t, err)
	if assert.True(t, bytes.HasPrefix(after, whole), "the torn line was not cut off:\n%s", after) {
		assert.False(t, bytes.Contains(after, []byte(`"da{`)), "the torn line was not cut off:\n%s", after)
	}
}

// TestCorruption: a damaged line, anywhere but a torn end, is ErrCorrupt
// naming the file and the line; so is a line whose checksum is right but
// whose record is not.
func TestCorruption(t *testing.T) {
	for _, tc := range []struct {
		name string
		line int
		edit func(lines [][]byte)
	}{
		{"a flipped byte in the middle", 3, func(ls [][]byte) { ls[2][len(ls[2])-5] ^= 0x20 }},
		{"a flipped byte in the last line", 5, func(ls [][]byte) { ls[4][30] ^= 0x01 }},
		{"a line without a checksum", 2, func(ls [][]byte) { ls[1] = []byte(`{"kind":"message","id":"m1"}`) }},
		{"an empty line", 4, func(ls [][]byte) { ls[3] = nil }},
		{"the header's checksum", 1, func(ls [][]byte) { ls[0] = bytes.Replace(ls[0], []byte(`"cwd"`), []byte(`"pwd"`), 1) }},
		{"zeroes in the middle", 3, func(ls [][]byte) { ls[2] = make([]byte, len(ls[2])) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			l := create(t, s, "s")
			must(t, l.AppendMessage("m1", msg("a")))
			must(t, l.AppendMessage("m2", msg("b")))
			must(t, l.AppendRecord(started("c1")))
			must(t, l.AppendRecord(final("c1", protocol.Completed, "x")))
			must(t, l.Close())
			path, _ := s.Path("s")
			data, err := os.ReadFile(path)
			must(t, err)
			lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
			tc.edit(lines)
			must(t, os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600))

			_, err = s.Read("s")
			var fe *sessionlog.Error
			require.ErrorIs(t, err, sessionlog.ErrCorrupt, "Read")
			require.ErrorAs(t, err, &fe, "Read")
			require.Equal(t, tc.line, fe.Line, "Read")
			require.Equal(t, path, fe.Path, "Read")
			want := fmt.Sprintf("%s:%d: ", path, tc.line)
			assert.True(t, strings.HasPrefix(err.Error(), want), "error %q does not begin with %q", err, want)
			if assert.NotErrorIs(t, err, sessionlog.ErrForeign, "%v is more than corrupt", err) {
				assert.NotErrorIs(t, err, sessionlog.ErrVersion, "%v is more than corrupt", err)
			}
		})
	}
}

func TestForeignFiles(t *testing.T) {
	other := open(t)
	l := create(t, other, "sess_other")
	must(t, l.Close())
	otherPath, _ := other.Path("sess_other")
	otherLog, err := os.ReadFile(otherPath)
	must(t, err)

	for _, tc := range []struct {
		name    string
		content []byte
		line    int
	}{
		{"JSON lines of something else", []byte(`{"role":"user","content":"hello"}` + "\n"), 1},
		{"a binary file", []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0}, 1},
		{"an empty file", nil, 0},
		{"a text file without newlines", []byte("hello"), 1},
		{"the log of another session", otherLog, 1},
		{"another format with a crc member", []byte(`{"crc":"00000000","format":"other","version":1}` + "\n"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			path, _ := s.Path("s")
			must(t, os.WriteFile(path, tc.content, 0o600))
			_, err := s.Read("s")
			var fe *sessionlog.Error
			require.ErrorIs(t, err, sessionlog.ErrForeign, "Read")
			require.ErrorAs(t, err, &fe, "Read")
			require.Equal(t, path, fe.Path, "Read")
			require.Equal(t, tc.line, fe.Line, "Read")
			assert.NotErrorIs(t, err, sessionlog.ErrCorrupt, "%v is both foreign and corrupt", err)
			_, err = s.Append("s")
			assert.ErrorIs(t, err, sessionlog.ErrForeign, "Append")
		})
	}
}

func TestNewerVersion(t *testing.T) {
	s := open(t)
	path, _ := s.Path("s")
	must(t, os.WriteFile(path, sessionlog.RawLine(`"format":"acpcompact-sessionlog","version":2,"session":"s"`), 0o600))
	_, err := s.Read("s")
	require.ErrorIs(t, err, sessionlog.ErrVersion, "Read")
	require.ErrorContains(t, err, path+":1: ", "Read")
}

func TestUnknownKindsAreSkipped(t *testing.T) {
	s := open(t)
	l := create(t, s, "s")
	must(t, l.AppendMessage("m1", msg("a")))
	must(t, l.Close())
	path, _ := s.Path("s")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write(sessionlog.RawLine(`"kind":"title","text":"a later writer's"`))
	must(t, err)
	must(t, f.Close())
	l, err = s.Append("s")
	must(t, err)
	must(t, l.AppendMessage("m2", msg("b")))
	must(t, l.Close())
	words, _ := read(t, s, "s")
	wantWords(t, words, "m:m1:a", "m:m2:b")
}

func TestMissingAndInvalidSessions(t *testing.T) {
	s := open(t)
	_, err := s.Read("sess_nope")
	if assert.ErrorIs(t, err, sessionlog.ErrNotFound, "Read of a missing log") {
		assert.ErrorIs(t, err, fs.ErrNotExist, "Read of a missing log")
	}
	_, err = s.Append("sess_nope")
	assert.ErrorIs(t, err, sessionlog.ErrNotFound, "Append to a missing log")
	for _, id := range []string{"", ".hidden", "../escape", "a/b", `a\b`, "sess 1", "séance", strings.Repeat("x", 201)} {
		_, err := s.Create(id, nil)
		assert.ErrorIs(t, err, sessionlog.ErrSessionID, "Create(%q)", id)
		_, err = s.Read(id)
		assert.ErrorIs(t, err, sessionlog.ErrSessionID, "Read(%q)", id)
	}
	entries, err := os.ReadDir(s.Dir())
	must(t, err)
	assert.Empty(t, entries, "the store's directory holds %d files", len(entries))
	l := create(t, s, "sess_1")
	_, err = s.Create("sess_1", nil)
	assert.ErrorIs(t, err, sessionlog.ErrExist, "a second Create")
	must(t, l.Close())
	assert.ErrorIs(t, l.AppendMessage("m", msg("x")), sessionlog.ErrClosed, "append after Close")
	entries, err = os.ReadDir(s.Dir())
	must(t, err)
	if assert.Len(t, entries, 1, "the store's directory holds (no temporary file)") {
		assert.Equal(t, "sess_1.jsonl", entries[0].Name(), "the store's directory holds (no temporary file)")
	}
	info, err := entries[0].Info()
	if assert.NoError(t, err, "log file info") {
		assert.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), "log mode")

	}
	must(t, s.Remove("sess_1"))
	assert.ErrorIs(t, s.Remove("sess_1"), sessionlog.ErrNotFound, "a second Remove")
}

func RawLineLimit(t *testing.T) {
	s := open(t, sessionlog.WithMaxLine(1024))
	l := create(t, s, "s")
	assert.Error(t, l.AppendMessage("m1", msg(strings.Repeat("x", 2000))), "a line over the limit was appended")
	must(t, l.AppendMessage("m2", msg("fits")))
	must(t, l.Close())
	words, _ := read(t, s, "s")
	wantWords(t, words, "m:m2:fits")

	// A store with a larger limit wrote what this one cannot read.
	big := open(t)
	l = create(t, big, "s")
	must(t, l.AppendMessage("m1", msg(strings.Repeat("x", 2000))))
	must(t, l.Close())
	small, err := sessionlog.Open(big.Dir(), sessionlog.WithMaxLine(1024))
	must(t, err)
	_, err = small.Read("s")
	if assert.ErrorIs(t, err, sessionlog.ErrCorrupt, "reading a line over the limit") {
		assert.ErrorContains(t, err, ".jsonl:2: ", "reading a line over the limit")
	}
}

// TestConcurrentAppends: appends from many goroutines each land as one
// whole line.
func TestConcurrentAppends(t *testing.T) {
	for _, p := range []sessionlog.SyncPolicy{sessionlog.SyncNone, sessionlog.SyncEach} {
		t.Run(p.String(), func(t *testing.T) {
			s := open(t, sessionlog.WithSync(p))
			l := create(t, s, "s")
			const writers, each = 8, 25
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("m%d_%d", w, i)
						assert.NoError(t, l.AppendMessage(id, msg(strings.Repeat("y", 100*w))), "fmt.Sprintf")
						if i%5 == 0 {
							assert.NoError(t, l.AppendRecord(final("c"+id, protocol.Completed, id)), "l.AppendRecord")
						}
					}
				})
			}
			wg.Wait()
			must(t, l.Close())
			words, _ := read(t, s, "s")
			assert.Len(t, words, writers*each+writers*each/5, "%d entries", len(words))
		})
	}
}

// TestRecordsGoAfterTheirMessage: a final record appended turns later
// (a compaction that settled after later messages, without a start entry)
// goes right after the message its After names.
func TestRecordsGoAfterTheirMessage(t *testing.T) {
	s := open(t)
	l := create(t, s, "s")
	must(t, l.AppendMessage("m1", msg("a")))
	must(t, l.AppendMessage("m2", msg("b")))
	must(t, l.AppendMessage("m3", msg("c")))
	rec := final("c1", protocol.Completed, "x")
	rec.After = "m1"
	must(t, l.AppendRecord(rec))
	words, entries := read(t, s, "s")
	wantWords(t, words, "m:m1:a", "c:c1:completed", "m:m2:b", "m:m3:c")
	assert.Equal(t, "m1", entries[1].Record.After, "After %q", entries[1].Record.After)
}

// TestRecordOfANewerVersion: a record of a version emitter does not read
// is ErrVersion (and emitter.ErrRecordVersion), naming the file and line,
// before anything is yielded.
func TestRecordOfANewerVersion(t *testing.T) {
	s := open(t)
	l := create(t, s, "s")
	must(t, l.AppendMessage("m1", msg("a")))
	must(t, l.Close())
	path, _ := s.Path("s")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write(sessionlog.RawLine(`"kind":"record","id":"c1","record":{"v":3,"compactionId":"c1","status":"completed"}`))
	must(t, err)
	must(t, f.Close())
	_, err = s.Read("s")
	if assert.ErrorIs(t, err, sessionlog.ErrVersion, "Read") {
		if assert.ErrorIs(t, err, emitter.ErrRecordVersion, "Read") {
			assert.True(t, strings.HasPrefix(err.Error(), path+":3: "), "Read: %v, want ErrVersion at %s:3", err, path)
		}
	}
}
