package agentkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeSnippets checks that the two kit integrations of docs/agentkit.md
// (section "Use it in a Go agent"), which the README links to, are the code of the runnable examples that go
// test runs: agentkit's and agentkit/acpsdk's Example_summaryAndCancel, in
// their example_readme_test.go. Each README block is a main package; the
// example file has the same imports (os aside), the same declarations, in
// the same order and with the same comments, and an Example whose body is
// main's after its first statement (the client on in-process pipes), with
// os.Stdin and os.Stdout read as stdin and stdout.
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "agentkit.md"))
	if err != nil {
		t.Skipf("no docs/agentkit.md in the module: %v", err)
	}
	blocks := goBlocks(t, section(string(readme), "## Use it in a Go agent"))
	for _, tc := range []struct{ marker, file string }{
		{"agentkit.NewStream(", "example_readme_test.go"},
		{"NewAgentSideConnection(", filepath.Join("acpsdk", "example_readme_test.go")},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var found []string
			for _, b := range blocks {
				if strings.Contains(b, tc.marker) {
					found = append(found, b)
				}
			}
			require.Len(t, found, 1, "docs/agentkit.md section %q: its go blocks with %q", "Use it in a Go agent", tc.marker)
			example, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			compareSnippet(t, found[0], string(example))
		})
	}
}

// section returns the markdown from heading to the next heading of the same
// level.
func section(md, heading string) string {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+1+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// goBlocks returns the contents of the ```go fences of md.
func goBlocks(t *testing.T, md string) []string {
	t.Helper()
	var out []string
	for {
		i := strings.Index(md, "```go\n")
		if i < 0 {
			return out
		}
		md = md[i+len("```go\n"):]
		j := strings.Index(md, "\n```")
		if j < 0 {
			require.FailNow(t, "README: unterminated ```go block")
		}
		out = append(out, md[:j+1])
		md = md[j+1:]
	}
}

type goFile struct {
	src   string
	fset  *token.FileSet
	f     *ast.File
	decls []ast.Decl // top-level declarations but imports
}

func parseGo(t *testing.T, name, src string) goFile {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	require.NoError(t, err, "%s does not parse", name)
	g := goFile{src: src, fset: fset, f: f}
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
			continue
		}
		g.decls = append(g.decls, d)
	}
	return g
}

// text returns the source of n, from pos to end.
func (g goFile) text(pos, end token.Pos) string {
	return g.src[g.fset.Position(pos).Offset:g.fset.Position(end).Offset]
}

// declText returns a declaration's source with its doc comment.
func (g goFile) declText(d ast.Decl) string {
	pos := d.Pos()
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Doc != nil {
			pos = d.Doc.Pos()
		}
	case *ast.GenDecl:
		if d.Doc != nil {
			pos = d.Doc.Pos()
		}
	}
	return g.text(pos, d.End())
}

func (g goFile) imports() []string {
	var out []string
	for _, s := range g.f.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// takeFunc removes the function named name (or the one named with prefix,
// when name ends in "*") from g.decls and returns it.
func (g *goFile) takeFunc(t *testing.T, name string) *ast.FuncDecl {
	t.Helper()
	for i, d := range g.decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil {
			continue
		}
		if fd.Name.Name == name || strings.HasSuffix(name, "*") && strings.HasPrefix(fd.Name.Name, strings.TrimSuffix(name, "*")) {
			g.decls = slices.Delete(g.decls, i, i+1)
			return fd
		}
	}
	require.FailNow(t, "no func "+name)
	return nil
}

func compareSnippet(t *testing.T, snippet, example string) {
	readme := parseGo(t, "README.md", snippet)
	ex := parseGo(t, "example", example)
	assert.Equal(t, "main", readme.f.Name.Name, "the README block's package")
	// The example may not need os: its stdin and stdout are pipes.
	want := readme.imports()
	if got := ex.imports(); !slices.Contains(got, "os") {
		want = slices.DeleteFunc(want, func(p string) bool { return p == "os" })
	}
	assert.Equal(t, want, ex.imports(), "imports differ (expected: README's, actual: the example's)")
	main := readme.takeFunc(t, "main")
	exFn := ex.takeFunc(t, "Example*")
	assert.Equal(t, len(readme.decls), len(ex.decls), "declarations: README's besides main (expected), the example file's besides its Example (actual)")
	for i := range min(len(readme.decls), len(ex.decls)) {
		assert.Equal(t, readme.declText(readme.decls[i]), ex.declText(ex.decls[i]), "declaration %d differs (expected: README's, actual: the example's)", i+1)
	}
	ms, es := main.Body.List, exFn.Body.List
	require.True(t, len(ms) > 0 && len(es) >= 2, "main has %d statements, the Example %d: want main's to be the Example's after its first", len(ms), len(es))
	r := readme.text(ms[0].Pos(), ms[len(ms)-1].End())
	r = strings.NewReplacer("os.Stdin", "stdin", "os.Stdout", "stdout").Replace(r)
	assert.Equal(t, r, ex.text(es[1].Pos(), es[len(es)-1].End()), "main's body (os.Stdin, os.Stdout read as stdin, stdout; expected) differs from the Example's after its first statement (actual)")
}
