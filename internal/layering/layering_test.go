package layering_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/acpcompact/acpcompact"

// imports lists every package of the module with the module packages it
// imports (test files excluded: they may use test helpers).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Skipf("go list is not available here: %v", err)
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		var deps []string
		for _, d := range f[1:] {
			if rest, ok := strings.CutPrefix(d, module+"/"); ok {
				deps = append(deps, rest)
			}
		}
		m[pkg] = deps
	}
	return m
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// noImportsFrom fails for every package outside dir that imports one
// under it.
func noImportsFrom(t *testing.T, dir, why string) {
	t.Helper()
	for pkg, deps := range imports(t) {
		if under(pkg, dir) {
			continue
		}
		for _, d := range deps {
			if under(d, dir) {
				t.Errorf("%s imports %s: %s", pkg, d, why)
			}
		}
	}
}

func TestNoProductionPackageImportsTest(t *testing.T) {
	noImportsFrom(t, "test", "production code never imports test/")
}

// Examples only compose: a package the CLI or a library needs lives where
// its role is visible (the scenario agent is internal/scenario), never
// under examples/.
func TestNothingImportsAnExample(t *testing.T) {
	noImportsFrom(t, "examples", "examples only compose, nothing depends on them")
}

func TestImportsAreOneWay(t *testing.T) {
	// What each lower layer may import from the module; anything else is
	// an upward import.
	allowed := map[string][]string{
		"protocol":       {"internal/skim"},
		"capability":     nil,
		"internal/skim":  nil,
		"internal/pulse": nil,
		"internal/lines": nil,
		"emitter":        {"protocol", "capability", "internal/pulse"},
		"fallback":       {"protocol", "emitter", "capability"},
		"internal/turn":  {"protocol", "capability", "emitter", "internal/skim"},
		// The contract between the kits and a store of histories.
		"history": {"protocol", "emitter"},
		// Stores of what a runtime replays: records, never the wire.
		"sessionlog": {"protocol", "emitter", "history", "internal/lines"},
		"sqlstore":   {"protocol", "emitter", "history"},
		// The oracle is an independent implementation on purpose.
		"conformance": nil,
	}
	all := imports(t)
	for pkg, ok := range allowed {
		deps, found := all[pkg]
		if !found {
			t.Errorf("package %s is gone: update this test", pkg)
			continue
		}
		for _, d := range deps {
			permitted := false
			for _, a := range ok {
				if d == a {
					permitted = true
				}
			}
			if !permitted {
				t.Errorf("%s imports %s, which is above it (allowed: %v)", pkg, d, ok)
			}
		}
	}
}

func TestHostsShareOneEngine(t *testing.T) {
	all := imports(t)
	for _, host := range []string{"agentkit/internal/tap", "proxy"} {
		uses := false
		for _, d := range all[host] {
			if d == "internal/turn" {
				uses = true
			}
		}
		if !uses {
			t.Errorf("%s does not host internal/turn: the wire state would live twice", host)
		}
	}
}

// The repository's tests use one assertion style, the standard library's
// testing package: a check, then t.Errorf or t.Fatalf with what was
// checked. An assertion library in one package and not the others makes a
// reader learn two dialects.
func TestOneAssertionStyle(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Skipf("go list is not available here: %v", err)
	}
	banned := []string{"gotest.tools", "github.com/onsi/gomega", "github.com/frankban/quicktest", "github.com/matryer/is"}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for _, d := range f[1:] {
			for _, b := range banned {
				if under(d, b) {
					t.Errorf("%s's tests import %s: the repository's tests use package testing alone (docs/architecture.md, \"Tests\")", f[0], d)
				}
			}
		}
	}
}
