package audit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/protocol"
)

// refs returns what the audit extracts from text, as "kind value" rows: the
// losses against an empty summary. A tool item has no open items.
func refs(text string) []string {
	var out []string
	for _, l := range audit.Check([]audit.Item{{Role: audit.Tool, Text: text}}, nil) {
		out = append(out, string(l.Kind)+" "+l.Value)
	}
	return out
}

func TestEachGrammarRecognisesItsKind(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"see https://github.com/acme/app/pull/12.", []string{"url https://github.com/acme/app/pull/12"}},
		{"(https://example.com/a_(b))", []string{"url https://example.com/a_(b)"}},
		{"[the docs](https://example.com/docs)", []string{"url https://example.com/docs"}},
		{"url=https://x.io/y?z=1#frag,", []string{"url https://x.io/y?z=1#frag"}},
		{"fixes #123 and acme/app#45, GH-7", []string{"issue #123", "issue acme/app#45", "issue GH-7"}},
		{"see PR 88 and pull request 90", []string{"issue PR 88", "issue pull request 90"}},
		{"error[E0308]: mismatched", []string{"error-code E0308"}},
		{"open x: ENOENT; TS2345 and SA1019, SC2086", []string{"error-code ENOENT", "error-code TS2345", "error-code SA1019", "error-code SC2086"}},
		{"code -32601 ERR_MODULE_NOT_FOUND", []string{"error-code -32601", "error-code ERR_MODULE_NOT_FOUND"}},
		{"got HTTP 529 then exit status 2", []string{"error-code HTTP 529", "error-code exit status 2"}},
		{"commit 3f2a9c1 and 9fceb02d0ae598e95dc970b74767f19372d61af8", []string{"commit 3f2a9c1", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8"}},
		{"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", []string{"checksum 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}},
		{"md5 d41d8cd98f00b204e9800998ecf8427e", []string{"checksum d41d8cd98f00b204e9800998ecf8427e"}},
		{"v0.13.0, 1.26.8 and @agentclientprotocol/sdk@2.4.0", []string{"version v0.13.0", "version 1.26.8", "version @agentclientprotocol/sdk@2.4.0"}},
		{"version 1.5 and 2.0.0-rc.1", []string{"version 1.5", "version 2.0.0-rc.1"}},
		{"edit /work/repo/cmd/main.go:12:5 and ./x.go, ~/notes.txt", []string{"path /work/repo/cmd/main.go", "path ./x.go", "path ~/notes.txt"}},
		{"in internal/turn/engine.go and docs/api/ and README.md", []string{"path internal/turn/engine.go", "path docs/api/", "path README.md"}},
		{"see Makefile and go.mod", []string{"path Makefile", "path go.mod"}},
		{"call `conformance.WithStrictReplay()` with `--strict-replay`", []string{"identifier conformance.WithStrictReplay()", "identifier --strict-replay"}},
		{"the `Auditor` type and `retry_count`", []string{"identifier Auditor", "identifier retry_count"}},
		{"`cmd/acpcompact/main.go` is a path", []string{"path cmd/acpcompact/main.go"}},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, refs(c.text), "text %q", c.text)
	}
}

// The grammars are conservative: each of these could be read as a
// reference by a looser grammar and must not be.
func TestGrammarsDoNotInventReferences(t *testing.T) {
	for _, text := range []string{
		"/compact",                                // a slash command
		"and/or TCP/IP 1/2",                       // words with slashes, a fraction
		"the proxy at 127.0.0.1:41414",            // an IP address is not a version
		"3.14 and 0.5 seconds",                    // decimals
		"id 336610cf-a34a-454e-b2d8-fd180e2d9e7e", // a UUID is no hash
		"msg_2314cdf6f001LzZWSRxOyjThGi",          // an ID with hex in it
		"deadbeef facade decade",                  // hex letters only: words
		"1234567 and 20260101",                    // digits only
		"Node.js and Next.js",                     // products, not files
		"e.g. i.e. etc.",                          // abbreviations
		"`nil` `true` `x` `go` `a b`",             // keywords, short words, spaces
		"```\n`inside a fence`\n```",              // fenced code is not read for identifiers
		"#fff and # heading and &#123;",           // a colour, a heading, an entity
		"ISO8601 RFC3339 UTF8",                    // standards are no error codes
		"2026.12.01",                              // a date with a 4-digit first part
	} {
		assert.Empty(t, refs(text), "text %q", text)
	}
}

func TestStructuredToolFieldsArePaths(t *testing.T) {
	loss := audit.Check([]audit.Item{{
		Role:      audit.Tool,
		Locations: []string{"/work/repo/a b/c.go"},
		RawInput:  []byte(`{"file_path":"/work/repo/go.mod","paths":["x/y.md"],"command":"cat internal/turn/engine.go","other":{"path":"z.txt"}}`),
	}}, nil)
	var got []string
	for _, l := range loss {
		got = append(got, l.Value)
	}
	assert.ElementsMatch(t, []string{"/work/repo/a b/c.go", "/work/repo/go.mod", "x/y.md", "internal/turn/engine.go", "z.txt"}, got)
}

func TestUnreadableRawInputIsSkipped(t *testing.T) {
	assert.Empty(t, audit.Check([]audit.Item{{Role: audit.Tool, RawInput: []byte(`{"path":`)}}, nil))
}

func TestEachSurvivalRuleKeepsItsReference(t *testing.T) {
	cases := []struct {
		kind             audit.Kind
		history, summary string
	}{
		{audit.KindPath, "/work/repo/cmd/x/main.go", "we changed x/main.go"},
		{audit.KindPath, "cmd/x/main.go", "file /work/repo/cmd/x/main.go"},
		{audit.KindPath, "./docs/", "see docs"},
		{audit.KindURL, "https://www.example.com/a/#top", "EXAMPLE.com/a"},
		{audit.KindURL, "https://github.com/acme/app/pull/12", "PR #12 is open"},
		{audit.KindCommit, "9fceb02d0ae598e95dc970b74767f19372d61af8", "at 9fceb02"},
		{audit.KindCommit, "9fceb02", "at 9fceb02d0ae598e95dc970b74767f19372d61af8"},
		{audit.KindChecksum, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "digest 9F86D08…"},
		{audit.KindVersion, "v1.4.2", "release 1.4.2"},
		{audit.KindVersion, "left-pad@1.3.0", "left-pad 1.3.0"},
		{audit.KindIssue, "#42", "https://github.com/acme/app/issues/42"},
		{audit.KindIssue, "PR 42", "pull request #42"},
		{audit.KindIdentifier, "`conformance.WithStrictReplay()`", "WithStrictReplay is an option"},
		{audit.KindErrorCode, "HTTP 529", "the 529 overloaded"},
		{audit.KindErrorCode, "exit status 2", "it exited with 2"},
	}
	for _, c := range cases {
		h := []audit.Item{{Role: audit.Tool, Text: c.history}}
		require.Len(t, refs(c.history), 1, "history %q", c.history)
		assert.Empty(t, audit.Check(h, []protocol.ContentBlock{protocol.Text(c.summary)}),
			"%s %q should survive in %q", c.kind, c.history, c.summary)
	}
}

func TestALossIsReportedOnceWithItsFirstPlaceAndCount(t *testing.T) {
	loss := audit.Check([]audit.Item{
		{Role: audit.Agent, Text: "edit main.go", Where: "msg_1"},
		{Role: audit.Agent, Text: "main.go again", Where: "msg_2"},
	}, []protocol.ContentBlock{protocol.Text("nothing")})
	require.Len(t, loss, 1)
	assert.Equal(t, audit.Loss{Kind: audit.KindPath, Value: "main.go", Where: "msg_1", Role: audit.Agent, Count: 2}, loss[0])
}

func TestWithKindsRestrictsTheAudit(t *testing.T) {
	h := []audit.Item{{Role: audit.Tool, Text: "main.go https://x.io/a #12"}}
	loss := audit.Check(h, nil, audit.WithKinds(audit.KindIssue))
	require.Len(t, loss, 1)
	assert.Equal(t, audit.KindIssue, loss[0].Kind)
}

func TestMemoryIsBoundedByMaxReferences(t *testing.T) {
	a := audit.NewAuditor(audit.WithMaxReferences(10))
	var b strings.Builder
	for i := range 100 {
		b.WriteString("#" + strings.Repeat("1", 1+i%6) + string(rune('0'+i%10)) + " ")
	}
	a.Add(audit.Item{Role: audit.Tool, Text: b.String()})
	assert.Equal(t, 10, a.Len())
	assert.Positive(t, a.Dropped())
}

func TestLongValuesAreClipped(t *testing.T) {
	long := "Please update " + strings.Repeat("internationalization ", 30)
	loss := audit.Check([]audit.Item{{Role: audit.User, Text: long}}, nil)
	require.Len(t, loss, 1)
	assert.LessOrEqual(t, len(loss[0].Value), audit.MaxValueBytes)
	assert.True(t, strings.HasSuffix(loss[0].Value, "…"))
}
