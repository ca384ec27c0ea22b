package conformance_test

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Transcript builders: each returns one transcript line, so a test reads as
// the conversation it describes.

func initV1(capabilities string) string {
	return `client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":` + capabilities + `}}` + "\n" +
		`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`
}

var (
	initV1Capable   = initV1(`{"session":{"compaction":{}}}`)
	initV1Incapable = initV1(`{}`)
	initV2          = `client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"c","version":"1"}}}` + "\n" +
		`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}`
)

func prompt(id int, sid string) string {
	return fmt.Sprintf(`client {"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}}`, id, sid)
}

func answer(id int, stopReason string) string {
	return fmt.Sprintf(`agent {"jsonrpc":"2.0","id":%d,"result":{"stopReason":%q}}`, id, stopReason)
}

func load(id int, sid string) string {
	return fmt.Sprintf(`client {"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":"/p","mcpServers":[]}}`, id, sid)
}

func loaded(id int) string { return fmt.Sprintf(`agent {"jsonrpc":"2.0","id":%d,"result":{}}`, id) }

func cancel(sid string) string {
	return fmt.Sprintf(`client {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid)
}

// upd is an agent session/update for session s1.
func upd(update string) string { return updFor("s1", update) }

func updFor(sid, update string) string {
	return fmt.Sprintf(`agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, sid, update)
}

// cu is a compaction_update; extra holds further members, e.g. `"error":"x"`.
func cu(id, status string, extra ...string) string {
	s := fmt.Sprintf(`{"sessionUpdate":"compaction_update","compactionId":%q,"status":%q`, id, status)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

func chunk(id, text string) string {
	return fmt.Sprintf(`{"sessionUpdate":"compaction_summary_chunk","compactionId":%q,"content":{"type":"text","text":%q}}`, id, text)
}

func msg(kind, text string) string {
	return fmt.Sprintf(`{"sessionUpdate":%q,"content":{"type":"text","text":%q}}`, kind, text)
}

func state(s string) string { return fmt.Sprintf(`{"sessionUpdate":"state_update","state":%q}`, s) }

func transcript(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func check(t *testing.T, opts []conformance.Option, lines ...string) []conformance.Violation {
	t.Helper()
	vs, err := conformance.CheckTranscript(strings.NewReader(transcript(lines...)), opts...)
	require.NoError(t, err, "CheckTranscript")
	return vs
}

// want is an expected violation: its line, rule, and a part of its message.
type want struct {
	line int
	rule conformance.Rule
	text string
}

// expect fails unless got and wants pair up one to one.
func expect(t *testing.T, got []conformance.Violation, wants ...want) {
	t.Helper()
	used := make([]bool, len(wants))
	var unexpected []conformance.Violation
next:
	for _, v := range got {
		for i, w := range wants {
			if !used[i] && v.Line == w.line && v.Rule == w.rule && strings.Contains(v.Message, w.text) {
				used[i] = true
				continue next
			}
		}
		unexpected = append(unexpected, v)
	}
	assert.Empty(t, unexpected, "unexpected violations")

	for i, w := range wants {
		assert.True(t, used[i], "missing violation: line %d: %s: …%s…", w.line, w.rule, w.text)
	}
}

// annotations reads the "# ^ rule: text" comments of a transcript; each
// expects a violation on the closest message line above it.
func annotations(t *testing.T, raw []byte) []want {
	t.Helper()
	var (
		out  []want
		last int
	)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, conformance.MaxLineBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "# ^ "):
			rule, text, ok := strings.Cut(strings.TrimPrefix(line, "# ^ "), ": ")
			require.True(t, ok, "line %d: bad annotation %q", n, line)
			require.NotEqual(t, 0, last, "line %d: bad annotation %q", n, line)
			out = append(out, want{last, conformance.Rule(rule), text})
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			last = n
		}
	}
	return out
}

// officialSchema returns the checker option validating against the
// installed official schemas. Without them it validates nothing and the
// test checks the other rules (or fails under ACPCOMPACT_REQUIRE_SCHEMA=1:
// see schematest); a test that is about the schema calls requireSchema.
func officialSchema(t testing.TB) conformance.Option {
	t.Helper()
	return conformance.WithSchema(schematest.For(t, 1), schematest.For(t, 2))
}

// requireSchema is officialSchema for a test that checks nothing else: it
// skips the test when the schemas are not installed.
func requireSchema(t testing.TB) conformance.Option {
	t.Helper()
	return conformance.WithSchema(schematest.Require(t, 1), schematest.Require(t, 2))
}
