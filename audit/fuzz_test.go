package audit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/acpcompact/acpcompact/audit"
)

// FuzzAudit holds the extractors to three promises on any text: no panic;
// a reference is reported as written in the history (kinds whose value is
// not composed from several tokens); and a summary that repeats the history
// word for word loses nothing.
func FuzzAudit(f *testing.F) {
	for _, s := range []string{
		"see https://github.com/acme/app/pull/12 and #12",
		"edit /work/repo/cmd/main.go:12 and ./x.go, `pkg.Func()`",
		"commit 3f2a9c1 v1.2.3 sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"error[E0308] ENOENT HTTP 404 exit status 2 -32601",
		"Actually, the port is 8080, not 80. I'll fix main.go later.",
		"[x](https://a.b/(c)) ``` `a` ``` PR 7 pull request 9",
	} {
		f.Add(s)
	}
	composed := map[audit.Kind]bool{audit.KindIssue: true, audit.KindErrorCode: true}
	f.Fuzz(func(t *testing.T, text string) {
		for _, role := range []audit.Role{audit.User, audit.Agent, audit.Tool} {
			h := []audit.Item{{Role: role, Text: text, EndsTurn: true}}
			for _, l := range audit.Check(h, nil) {
				if l.Kind == audit.KindRequest || l.Kind == audit.KindPromise || l.Kind == audit.KindCorrection || composed[l.Kind] {
					continue
				}
				if len(l.Value) < audit.MaxValueBytes {
					assert.True(t, strings.Contains(text, l.Value), "%s %q is not in the text %q", l.Kind, l.Value, text)
				}
			}
			a := audit.NewAuditor()
			a.Add(h[0])
			assert.Empty(t, a.CheckText(text), "a summary that is the history loses nothing: %q", text)
		}
	})
}
