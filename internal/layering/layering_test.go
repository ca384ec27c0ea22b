package layering_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			assert.False(t, under(d, dir), "%s imports %s: %s", pkg, d, why)
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
		// Observability sits beside the wire, above the emitter it watches.
		"observe": {"protocol", "emitter"},
		// The turn engine reads a prompt's trace context (observe's type).
		"internal/turn": {"protocol", "capability", "emitter", "observe", "internal/skim"},
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
		if !assert.True(t, found, "package %s is gone: update this test", pkg) {
			continue
		}
		for _, d := range deps {
			assert.Contains(t, ok, d, "%s imports %s, which is above it", pkg, d)
		}
	}
}

func TestHostsShareOneEngine(t *testing.T) {
	all := imports(t)
	for _, host := range []string{"agentkit/internal/tap", "proxy"} {
		assert.Contains(t, all[host], "internal/turn", "%s does not host internal/turn: the wire state would live twice", host)
	}
}

// The repository's tests use one assertion style, testify's require and
// assert (docs/architecture.md, "Tests"): require where the test cannot go
// on, assert where it can. Another assertion library in one package, or a
// bare t.Errorf in another, makes a reader learn two dialects, and a bare
// check tends to lose what was checked. A test file or a test-helper
// package (a non-test file that imports testing) fails here when it
// imports another assertion library, or when it calls a failure method of
// package testing itself.
func TestOneAssertionStyle(t *testing.T) {
	root := moduleRoot(t)
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
		}
		return nil
	})
	require.NoError(t, err, "walking the module")

	for _, dir := range dirs {
		for _, v := range assertionStyleViolations(t, dir) {
			assert.Fail(t, v.String(), "the repository's tests assert with testify alone (docs/architecture.md, \"Tests\")")
		}
	}
}

// otherAssertionLibraries are the import path prefixes of assertion
// libraries other than testify.
var otherAssertionLibraries = []string{
	"gotest.tools",
	"gopkg.in/check",
	"github.com/go-check/check",
	"github.com/onsi/gomega",
	"github.com/onsi/ginkgo",
	"github.com/frankban/quicktest",
	"github.com/matryer/is",
	"github.com/smartystreets/goconvey",
	"github.com/smarty/assertions",
	"github.com/franela/goblin",
	"github.com/corbym/gocrest",
	"github.com/alecthomas/assert",
	"github.com/go-playground/assert",
	"github.com/shoenig/test",
	"github.com/carlmjohnson/be",
	"github.com/go-openapi/testify",
}

// failureMethods are the methods of testing.T, B, F and TB that fail a
// test; Skip*, Log*, Helper, Run and Cleanup stay allowed.
var failureMethods = map[string]bool{"Error": true, "Errorf": true, "Fatal": true, "Fatalf": true, "Fail": true, "FailNow": true}

type violation struct {
	pos    token.Position
	direct bool // a direct failure call (else an import)
	what   string
}

func (v violation) String() string { return v.pos.String() + ": " + v.what }

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			require.Contains(t, string(b), "module "+module+"\n", "the go.mod above internal/layering")
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above internal/layering")
		dir = parent
	}
}

// assertionStyleViolations parses the Go files of one directory: its test
// files, and its other files when they import testing (a test-helper
// package).
func assertionStyleViolations(t *testing.T, dir string) []violation {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []violation
	for _, name := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err, "parsing %s", name)
		testingName := ""
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if path == "testing" {
				testingName = "testing"
				if imp.Name != nil {
					testingName = imp.Name.Name
				}
			}
			for _, lib := range otherAssertionLibraries {
				if under(path, lib) {
					out = append(out, violation{pos: fset.Position(imp.Pos()), what: "imports " + path + ", another assertion library"})
				}
			}
		}
		if testingName == "" || testingName == "_" || testingName == "." {
			continue
		}
		out = append(out, directFailureCalls(fset, f, testingName)...)
	}
	return out
}

// directFailureCalls finds X.Method(...) where Method fails the test and X
// is declared, in an enclosing function, as a parameter or variable of
// type *testing.T, *testing.B, *testing.F or testing.TB, or X is a
// selector y.f where f is a struct field of such a type declared in the
// same file (a fixture that keeps its test: w.t.Fatalf).
func directFailureCalls(fset *token.FileSet, f *ast.File, testingName string) []violation {
	isTestingType := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			x, ok := sel.X.(*ast.Ident)
			return ok && x.Name == testingName && (sel.Sel.Name == "T" || sel.Sel.Name == "B" || sel.Sel.Name == "F")
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == testingName && sel.Sel.Name == "TB"
	}
	fields := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if st, ok := n.(*ast.StructType); ok {
			for _, fld := range st.Fields.List {
				if isTestingType(fld.Type) {
					for _, name := range fld.Names {
						fields[name.Name] = true
					}
				}
			}
		}
		return true
	})
	var out []violation
	// scopes holds, per enclosing function, the names declared in it with
	// a testing type; a later declaration of the same name with another
	// type hides it.
	var scopes []map[string]bool
	declared := func(name string) bool {
		for i := len(scopes) - 1; i >= 0; i-- {
			if v, ok := scopes[i][name]; ok {
				return v
			}
		}
		return false
	}
	addFields := func(m map[string]bool, fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fld := range fl.List {
			for _, n := range fld.Names {
				m[n.Name] = isTestingType(fld.Type)
			}
		}
	}
	var visit func(n ast.Node) bool
	enter := func(ft *ast.FuncType, body *ast.BlockStmt) {
		if body == nil {
			return
		}
		m := map[string]bool{}
		addFields(m, ft.Params)
		addFields(m, ft.Results)
		// variables of a testing type declared anywhere in the body
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.ValueSpec:
				if n.Type != nil {
					for _, id := range n.Names {
						m[id.Name] = isTestingType(n.Type)
					}
				}
			}
			return true
		})
		scopes = append(scopes, m)
		ast.Inspect(body, visit)
		scopes = scopes[:len(scopes)-1]
	}
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			enter(n.Type, n.Body)
			return false
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !failureMethods[sel.Sel.Name] {
				return true
			}
			var name string
			switch x := sel.X.(type) {
			case *ast.Ident:
				if declared(x.Name) {
					name = x.Name
				}
			case *ast.SelectorExpr:
				if fields[x.Sel.Name] {
					name = "…." + x.Sel.Name
					if y, ok := x.X.(*ast.Ident); ok {
						name = y.Name + "." + x.Sel.Name
					}
				}

			}
			if name != "" {
				out = append(out, violation{pos: fset.Position(n.Pos()), direct: true,
					what: name + "." + sel.Sel.Name + " called directly: use require (to stop) or assert (to go on)"})
			}

		}
		return true
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			enter(fd.Type, fd.Body)
		}
	}
	return out
}
