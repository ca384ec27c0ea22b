package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textBlock is an unlabelled block, known by its file and first line, and
// how it is kept true: check (program output, compared with the program)
// or, for a diagram or an illustration, why nothing runs it.
type textBlock struct {
	file, first string
	check       func(t *testing.T, file string, b block)
	exempt      string
}

var textBlocks = []textBlock{
	{file: "README.md", first: "Client A  (advertises the compaction capability: standard updates)",
		check: checkedBy(filepath.Join("cmd", "acpcompact", "readme_demo_test.go"), "TestReadmeDemoExcerpt")},
	{file: filepath.Join("docs", "agentkit.md"), first: `-> session/prompt "hello"`,
		check: checkExampleOutput},
	{file: filepath.Join("docs", "performance.md"), first: "ratio (per round; median, [min, max])                                 value                    target",
		check: checkBenchTable},
	{file: filepath.Join("docs", "proxy.md"), first: "[tool] Compact conversation (running)",
		check: checkedBy(filepath.Join("test", "interop", "acpx_test.go"), "TestAcpxThroughTheProxy")},
	{file: filepath.Join("docs", "architecture.md"), first: "cmd/acpcompact ──▶ proxy · conformance · audit · internal/acpschema · internal/scenario (for the demo)",
		exempt: "a diagram of who imports whom: internal/layering's tests enforce the rules it draws"},
	{file: filepath.Join("docs", "architecture.md"), first: "initialize ──▶ capability          what the client can take, per connection",
		exempt: "a diagram of the data path, which no program prints"},
}

// TestDocTextBlocks checks that every unlabelled block is in textBlocks,
// and every entry there is in the docs: program output is compared with
// its program, and of a diagram only the repository paths it names are
// checked to exist. A block of a language no test knows fails.
func TestDocTextBlocks(t *testing.T) {
	found := make([]int, len(textBlocks))
	for _, name := range docFiles(t) {
		_, blocks := split(read(t, name))
	blocks:
		for _, b := range blocks {
			where := name + ":" + strconv.Itoa(b.line)
			switch b.lang {
			case "go", "sh", "json", "lua", "elisp": // TestDocEditorBlocks reads lua and elisp
				continue
			case "":
			default:
				assert.Fail(t, fmt.Sprintf("%s: no test checks ```%s blocks: add one to docs/", where, b.lang))
				continue
			}
			first, _, _ := strings.Cut(b.text, "\n")
			for i, tb := range textBlocks {
				if tb.file != name || tb.first != strings.TrimRight(first, " ") {
					continue
				}
				found[i]++
				if tb.check != nil {
					tb.check(t, name, b)
				} else {
					checkPaths(t, name, b)
				}
				continue blocks
			}
			assert.Fail(t, where+": an unlabelled block that textBlocks neither checks nor exempts", "its first line: %q", first)
		}
	}
	var checked, exempt int
	for i, tb := range textBlocks {
		assert.Equal(t, 1, found[i], "textBlocks lists a block of %s starting %q: the blocks the docs have", tb.file, tb.first)
		if tb.check != nil {
			checked++
		} else {
			exempt++
		}
	}
	t.Logf("unlabelled blocks: %d checked against their programs, %d diagrams exempt (their paths checked)", checked, exempt)
}

// repoPath matches what reads as a path in the repository: two or more
// lowercase names joined by slashes.
var repoPath = regexp.MustCompile(`(?:^|[\s(])((?:[a-z][a-z0-9_-]*/)+[a-z][a-z0-9_-]*(?:\.go)?)`)

func checkPaths(t *testing.T, file string, b block) {
	t.Helper()
	for i, ln := range strings.Split(b.text, "\n") {
		for _, m := range repoPath.FindAllStringSubmatch(ln, -1) {
			_, err := os.Stat(filepath.Join("..", m[1]))
			assert.NoError(t, err, "%s:%d: the diagram names %s, which is not in the repository", file, b.line+1+i, m[1])
		}
	}
}

// checkedBy: a test elsewhere compares the block with its program; the
// test must be there.
func checkedBy(file, test string) func(t *testing.T, md string, b block) {
	return func(t *testing.T, md string, b block) {
		t.Helper()
		where := md + ":" + strconv.Itoa(b.line)
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", file), nil, parser.SkipObjectResolution)
		if !assert.NoError(t, err, "%s: the block is checked by %s in %s", where, test, file) {
			return
		}
		assert.True(t, hasFunc(f, test), "%s: the block is checked by %s, which %s lacks", where, test, file)
	}
}

func hasFunc(f *ast.File, name string) bool {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == name {
			return true
		}
	}
	return false
}

// exampleFiles hold the Examples whose output docs/agentkit.md shows: go
// test compares each with its // Output: comment, and checkExampleOutput
// the block with those comments.
var exampleFiles = []string{
	filepath.Join("agentkit", "example_readme_test.go"),
	filepath.Join("agentkit", "acpsdk", "example_readme_test.go"),
}

func checkExampleOutput(t *testing.T, md string, b block) {
	t.Helper()
	for _, file := range exampleFiles {
		want, err := exampleOutput(filepath.Join("..", file), "Example_summaryAndCancel")
		if !assert.NoError(t, err, "%s:%d: the output of %s's Example_summaryAndCancel", md, b.line, file) {
			continue
		}
		got := strings.Split(trimLines(b.text), "\n")
		wl := strings.Split(want, "\n")
		for i := range max(len(got), len(wl)) {
			g, w := "(the block ends)", "(the output ends)"
			if i < len(got) {
				g = strconv.Quote(got[i])
			}
			if i < len(wl) {
				w = strconv.Quote(wl[i])
			}
			if !assert.Equal(t, w, g, "%s:%d: the block, against the // Output: of %s's Example_summaryAndCancel", md, b.line+1+i, file) {
				break
			}
		}
	}
}

// exampleOutput returns the // Output: comment of the Example fn of file.
func exampleOutput(file, fn string) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		for _, cg := range f.Comments {
			if cg.Pos() < fd.Body.Lbrace || cg.End() > fd.Body.Rbrace {
				continue
			}
			if out, ok := strings.CutPrefix(cg.Text(), "Output:\n"); ok {
				return trimLines(out), nil
			}
		}
		return "", fmt.Errorf("%s: %s has no // Output: comment", file, fn)
	}
	return "", fmt.Errorf("%s: no func %s", file, fn)
}

func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, ln := range lines {
		lines[i] = strings.TrimSpace(ln)
	}
	return strings.Join(lines, "\n")
}

// benchRow is one ratio row of benchtable's table, as its source states it.
type benchRow struct {
	source string         // the name as the source writes it
	name   *regexp.Regexp // source, its %d matching a number
	target string
}

var (
	// A row: its name, the median with [min, max], then the target and
	// the verdict, if any.
	benchLine   = regexp.MustCompile(`^(.*\S)\s+(\S+) \[\s*(\S+),\s*(\S+)\]\s*(.*?)\s*$`)
	benchTarget = regexp.MustCompile(`^(>=|<=) (\S+)\s+(met|MISSED)$`)
)

// checkBenchTable checks a sample of benchtable's ratio table: the header
// and the rows' names and targets are those of
// test/bench/cmd/benchtable, in its order, and each verdict is the one its
// median and target give. The figures are one run's, which no test
// repeats: `make bench` takes minutes.
func checkBenchTable(t *testing.T, md string, b block) {
	t.Helper()
	where := md + ":" + strconv.Itoa(b.line)
	text := b.text
	src := filepath.Join("..", "test", "bench", "cmd", "benchtable", "main.go")
	rows, literals, err := benchtableRows(src)
	require.NoError(t, err, "%s", where)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for _, h := range regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(lines[0]), -1) {
		assert.True(t, literals[h], "%s:%d: the header's %q is not benchtable's", md, b.line+1, h)
	}
	lines = lines[1:]
	assert.Len(t, lines, len(rows), "%s: rows, against those benchtable prints", where)
	for i, ln := range lines {
		at := fmt.Sprintf("%s:%d", md, b.line+2+i)
		m := benchLine.FindStringSubmatch(ln)
		if !assert.NotNil(t, m, "%s is not name, value [min, max], target: %q", at, ln) {
			continue
		}
		name, value, rest := m[1], m[2], m[5]
		if i < len(rows) {
			assert.Regexp(t, rows[i].name, name, "%s: benchtable prints %q there", at, rows[i].source)
			target, _, _ := strings.Cut(rest, "  ")
			assert.Equal(t, rows[i].target, strings.TrimSpace(target), "%s (%s): target, against benchtable's", at, name)
		}
		if rest == "" {
			continue
		}
		tm := benchTarget.FindStringSubmatch(rest)
		if !assert.NotNil(t, tm, "%s (%s): %q is not a target and a verdict (met or MISSED)", at, name, rest) {
			continue
		}
		v, ulp, err1 := parseHuman(value)
		limit, err2 := strconv.ParseFloat(tm[2], 64)
		if !assert.NoError(t, err1, "%s (%s): cannot read the value %q", at, name, value) ||
			!assert.NoError(t, err2, "%s (%s): cannot read the target %q", at, name, tm[2]) {
			continue
		}
		// The verdict is the unrounded median's: a printed value within
		// half a unit of its last digit of the target may go either way.
		lo, hi := v-ulp/2, v+ulp/2
		var canMeet, canMiss bool
		if tm[1] == ">=" {
			canMeet, canMiss = hi >= limit, lo < limit
		} else {
			canMeet, canMiss = lo <= limit, hi > limit
		}
		switch tm[3] {
		case "met":
			assert.True(t, canMeet, "%s (%s): %s %s %s says met", at, name, value, tm[1], tm[2])
		case "MISSED":
			assert.True(t, canMiss, "%s (%s): %s %s %s says MISSED", at, name, value, tm[1], tm[2])
		}
	}
}

// benchtableRows reads the row(name, values, target, ok) calls of
// benchtable's source, in order, and its string literals.
func benchtableRows(file string) ([]benchRow, map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, err
	}
	var rows []benchRow
	literals := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
				literals[s] = true
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); !ok || id.Name != "row" || len(n.Args) != 4 {
				return true
			}
			name := n.Args[0]
			if c, ok := name.(*ast.CallExpr); ok && len(c.Args) > 0 { // fmt.Sprintf(format, ...)
				name = c.Args[0]
			}
			nl, ok1 := name.(*ast.BasicLit)
			tl, ok2 := n.Args[2].(*ast.BasicLit)
			if !ok1 || !ok2 {
				err = fmt.Errorf("%s: a row whose name or target is not a literal", file)
				return false
			}
			ns, _ := strconv.Unquote(nl.Value)
			ts, _ := strconv.Unquote(tl.Value)
			rx := strings.ReplaceAll(regexp.QuoteMeta(ns), "%d", `\d+`)
			rows = append(rows, benchRow{ns, regexp.MustCompile("^" + rx + "$"), ts})
		}
		return true
	})
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("%s: no row(...) calls", file)
	}
	return rows, literals, err
}

// parseHuman reads benchtable's figures (9.67, 3737, 588.5k, 1.2M) and
// the unit of their last digit.
func parseHuman(s string) (v, ulp float64, err error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	}
	v, err = strconv.ParseFloat(s, 64)
	ulp = mult
	if _, frac, ok := strings.Cut(s, "."); ok {
		ulp *= math.Pow10(-len(frac))
	}
	return v * mult, ulp, err
}
