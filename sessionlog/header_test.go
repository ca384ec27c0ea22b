package sessionlog_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/sessionlog"
)

// headerMembers are the members of the header Create writes for session
// "s".
const headerMembers = `"format":"acpcompact-sessionlog","version":1,"session":"s","created":"2026-12-01T23:36:11.637Z","info":{"cwd":"/work"}`

// line is a checksummed line holding members, without its newline.
func line(members string) []byte { return bytes.TrimSuffix(sessionlog.RawLine(members), []byte("\n")) }

// damage returns ln with its first old replaced by new (of the same
// length), its checksum left as it was: one damaged stretch of the line.
func damage(t *testing.T, ln []byte, old, new string) []byte {
	t.Helper()
	require.Len(t, new, len(old), "damage keeps the length")
	i := bytes.Index(ln, []byte(old))
	require.GreaterOrEqual(t, i, 0, "%q is not in %s", old, ln)
	out := bytes.Clone(ln)
	copy(out[i:], new)
	return out
}

// judge writes first (a first line, then a newline unless torn) and an
// entry as the log of session "s", and returns what Read and Append make
// of it.
func judge(t *testing.T, first []byte, torn bool) (readErr, appendErr error) {
	t.Helper()
	s := open(t)
	path, err := s.Path("s")
	require.NoError(t, err)
	content := bytes.Clone(first)
	if !torn {
		content = append(content, '\n')
		content = append(content, sessionlog.RawLine(`"kind":"message","id":"m1","data":{"text":"a"}`)...)
	}
	require.NoError(t, os.WriteFile(path, content, 0o600))
	r, readErr := s.Read("s")
	if readErr == nil {
		r.Close()
	}
	l, appendErr := s.Append("s")
	if appendErr == nil {
		l.Close()
	}
	return readErr, appendErr
}

// TestHeaderJudgementOrder: a log's first line is judged version first
// (it checks out, says it is this format, and names another version:
// ErrVersion, whatever the shape of its other fields), then corruption
// (the line says it is this format's log, or carries the checksum prefix
// and this session's ID, and is damaged: ErrCorrupt), then foreign
// (nothing says it is this format's log, or it is whole and names another
// session: ErrForeign). Read and Append judge alike.
func TestHeaderJudgementOrder(t *testing.T) {
	v1 := line(headerMembers)
	kinds := []error{sessionlog.ErrForeign, sessionlog.ErrVersion, sessionlog.ErrCorrupt}
	for _, tc := range []struct {
		name  string
		first []byte // the first line, without its newline
		torn  bool   // no newline, nothing after it
		want  error  // nil: a header this package reads
	}{
		{"this version's header", v1, false, nil},

		// Version first.
		{"a future version whose fields have shapes this version does not know (issue 12)",
			line(`"format":"acpcompact-sessionlog","version":2,"session":{"id":"s","epoch":3},"created":1767225600,"info":"v2"`), false, sessionlog.ErrVersion},
		{"a future version with this version's fields",
			line(`"format":"acpcompact-sessionlog","version":2,"session":"s","created":"2026-12-01T23:36:11.637Z"`), false, sessionlog.ErrVersion},
		{"a future version naming another session",
			line(`"format":"acpcompact-sessionlog","version":7,"session":"other"`), false, sessionlog.ErrVersion},
		{"a future version with members this version never writes",
			line(`"format":"acpcompact-sessionlog","version":3,"session":"s","created":"2026-12-01T23:36:11.637Z","compression":"zstd"`), false, sessionlog.ErrVersion},
		{"a version before this one",
			line(`"format":"acpcompact-sessionlog","version":0,"session":"s","created":"2026-12-01T23:36:11.637Z"`), false, sessionlog.ErrVersion},
		{"a future version as the whole file, without a newline",
			line(`"format":"acpcompact-sessionlog","version":2,"session":"s"`), true, sessionlog.ErrVersion},

		// Then corruption.
		{"one damaged byte in the format key of this session's header (issue 12)", damage(t, v1, `"format"`, `"formbt"`), false, sessionlog.ErrCorrupt},
		{"one damaged byte in the format value", damage(t, v1, `sessionlog"`, `sessionlob"`), false, sessionlog.ErrCorrupt},
		{"one damaged byte in the session ID", damage(t, v1, `"session":"s"`, `"session":"t"`), false, sessionlog.ErrCorrupt},
		{"one damaged byte in the session key", damage(t, v1, `"session"`, `"sessiom"`), false, sessionlog.ErrCorrupt},
		{"a damaged version digit: the checksum says it is damage, not a version", damage(t, v1, `"version":1`, `"version":3`), false, sessionlog.ErrCorrupt},
		{"a damaged checksum digit", damage(t, v1, string(v1[8:10]), "zz"), false, sessionlog.ErrCorrupt},
		{"a damaged checksum prefix", damage(t, v1, `{"crc"`, `{"crd"`), false, sessionlog.ErrCorrupt},
		{"the info damaged", damage(t, v1, `"/work"`, `"/wotk"`), false, sessionlog.ErrCorrupt},
		{"the header cut short, nothing after it", v1[:len(v1)-20], true, sessionlog.ErrCorrupt},
		{"a header that checks out with the creation time of another shape",
			line(`"format":"acpcompact-sessionlog","version":1,"session":"s","created":12`), false, sessionlog.ErrCorrupt},
		{"a header that checks out without its version",
			line(`"format":"acpcompact-sessionlog","session":"s","created":"2026-12-01T23:36:11.637Z"`), false, sessionlog.ErrCorrupt},
		{"a header that checks out with a null version",
			line(`"format":"acpcompact-sessionlog","version":null,"session":"s"`), false, sessionlog.ErrCorrupt},
		{"a header that checks out with a version that is no integer",
			line(`"format":"acpcompact-sessionlog","version":"2","session":"s"`), false, sessionlog.ErrCorrupt},

		// Foreign only when nothing says it is this format's log.
		{"JSON of something else", []byte(`{"role":"user","content":"hello"}`), false, sessionlog.ErrForeign},
		{"another format with a checksum member", line(`"format":"other","version":1,"session":"s"`), false, sessionlog.ErrForeign},
		{"another format with a checksum member, damaged", damage(t, line(`"format":"other","version":1,"session":"x"`), "other", "othar"), false, sessionlog.ErrForeign},
		{"the whole header of another session", line(`"format":"acpcompact-sessionlog","version":1,"session":"other","created":"2026-12-01T23:36:11.637Z"`), false, sessionlog.ErrForeign},
		{"plain text", []byte("# notes"), false, sessionlog.ErrForeign},
		{"an empty first line", nil, false, sessionlog.ErrForeign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readErr, appendErr := judge(t, tc.first, tc.torn)
			for op, err := range map[string]error{"Read": readErr, "Append": appendErr} {
				if tc.want == nil {
					assert.NoError(t, err, op)
					continue
				}
				assert.ErrorIs(t, err, tc.want, "%s of %q", op, tc.first)
				var fe *sessionlog.Error
				if assert.ErrorAs(t, err, &fe, op) {
					assert.Equal(t, 1, fe.Line, "%s: the line", op)
				}
				for _, k := range kinds {
					if k != tc.want {
						assert.False(t, errors.Is(err, k), "%s: %v is %v too", op, err, k)
					}
				}
			}
		})
	}
}

// TestOneDamagedByteInTheHeaderIsCorruption: whatever byte of this
// session's header is damaged, and however, the log reads as corrupt:
// never as foreign, another version or a good log. (A byte damaged into a
// newline splits the line, and is left out: the header then ends early.)
func TestOneDamagedByteInTheHeaderIsCorruption(t *testing.T) {
	v1 := line(headerMembers)
	for i := range v1 {
		for x := 1; x < 256; x++ {
			b := bytes.Clone(v1)
			b[i] ^= byte(x)
			if b[i] == '\n' {
				continue
			}
			_, err := sessionlog.CheckHeader("s.jsonl", "s", b, true)
			if !errors.Is(err, sessionlog.ErrCorrupt) || errors.Is(err, sessionlog.ErrForeign) || errors.Is(err, sessionlog.ErrVersion) {
				require.Failf(t, "a damaged header is not corrupt", "byte %d %q -> %q: %v", i, v1[i], b[i], err)
			}
		}
	}
}
