package docs_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cellRef is a file named in a cell of the rules table, with the
// declarations named after it in parentheses.
var cellRef = regexp.MustCompile("`([^`]+\\.go)`(?:\\s*\\(([^)]*)\\))?")

var backticked = regexp.MustCompile("`([^`]+)`")

// declared lists the top-level names a Go file declares: functions,
// methods as Type.Method, types, constants and variables.
func declared(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	require.NoError(t, err, "parse %s", path)
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			names[name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names
}

// The table "Where each rule lives" of docs/architecture.md names, for each
// rule, the file and function that keep it and the tests that pin it: each
// must exist, so the table cannot send a newcomer to a rule's old home.
func TestArchitectureRuleHomesExist(t *testing.T) {
	f, err := os.Open("architecture.md")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, rows, refs := false, 0, 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Where each rule lives"
			continue
		case !in || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| rule |"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		require.Len(t, cells, 3, "architecture.md:%d: a row has a rule, its home and its tests", n)
		rows++
		for i, cell := range cells[1:] {
			matches := cellRef.FindAllStringSubmatch(cell, -1)
			if i == 0 {
				assert.NotEmpty(t, matches, "architecture.md:%d: the rule %q names no home", n, cells[0])
			}
			for _, m := range matches {
				path := filepath.Join("..", filepath.FromSlash(m[1]))
				if !assert.FileExists(t, path, "architecture.md:%d names %s", n, m[1]) {
					continue
				}
				refs++
				if m[2] == "" {
					continue
				}
				have := declared(t, path)
				for _, name := range backticked.FindAllStringSubmatch(m[2], -1) {
					refs++
					assert.True(t, have[name[1]], "architecture.md:%d: %s declares no %s", n, m[1], name[1])
				}
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, rows, 20, "the table of rules was not found")
	t.Logf("%d rules, %d files and names checked", rows, refs)
}
