// Package docs_test checks the markdown of the repository: README.md,
// CHANGELOG.md and docs/*.md.
//
//   - TestDocLinks: every relative link points to a file that exists and,
//     with a #fragment into a markdown file, to a heading of that file.
//   - TestDocGoBlocks: every ```go block is one of three kinds. The two kit
//     integrations in docs/agentkit.md are checked against their runnable
//     examples by agentkit's TestReadmeSnippets. A block that starts with
//     "package" is a whole program: it is written to a temporary directory
//     and must pass `go vet` in this module. Any other block must say
//     "// fragment" on its first line; a fragment is only parsed (as
//     declarations, or as statements inside a function, its leading import
//     block aside), not type-checked, since it uses names of the reader's
//     program.
//   - TestSessionLogExample: the example lines of the session log format in
//     docs/records.md carry their true checksums.
//   - TestDocShellBlocks: every command of every ```sh block (comments,
//     VAR=value prefixes and redirections dropped, pipes and && split) is
//     one of a known kind, checked for what a reader relies on: a go
//     run/install/build target is a main package of the module; a go test
//     package exists and each -run/-bench alternative names a test or
//     benchmark in it; go get names this module at a version its path
//     allows; a make target and VAR=value are the Makefile's; npm install
//     pins the version test/interop/package.json pins, into the prefix
//     internal/acpschema reads; acpcompact's subcommand and every program's
//     flags are ones its -h lists (the programs are built once for that);
//     a VAR=value prefix names a variable the module's code reads; npx,
//     npm install and npm publish of the npm packages name the launcher,
//     the version and the tarballs that make dist builds (npm/mkdist
//     -print). Any other command fails, naming its file and line, so that
//     a new kind gets a check (checkCommand).
//   - TestDocJSONBlocks: every ```json block parses, as JSON Lines when
//     every line is an object; the command line of each agent of an editor
//     configuration (Zed's and JetBrains' agent_servers, VS Code's
//     acp.agents, acpx's agents) passes the same checks as a ```sh command
//     line, and one that runs acpcompact, installed or through npx, runs
//     proxy with the agent after --.
//   - TestDocEditorBlocks: the same for the command lines of every ```lua
//     block (CodeCompanion: each table of string literals) and ```elisp
//     block (agent-shell: each quoted list of strings).
//   - TestDocTextBlocks: every unlabelled block is in textBlocks, and
//     every entry there is in the docs. Program output is compared with its
//     program: the README's demo excerpt by cmd/acpcompact's
//     TestReadmeDemoExcerpt (a real run), the agentkit example's output
//     with both kits' Example // Output: comments (which go test runs), the
//     benchmark table's rows and targets with benchtable's source and its
//     verdicts with its figures. A diagram is exempt, with the reason, and
//     only the repository paths it names are checked. A block of any other
//     language fails.
//   - TestParseShell and TestCheckCommand: the checks above fail stale
//     commands of each kind.
package docs_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docFiles returns the markdown files the tests read, relative to the
// module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md"}
	more, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err, "filepath.Glob")
	for _, m := range more {
		files = append(files, filepath.Join("docs", filepath.Base(m)))
	}
	require.NotEmpty(t, more, "no docs/*.md")
	return files
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	require.NoError(t, err, "os.ReadFile")
	return string(b)
}

// block is a fenced code block.
type block struct {
	lang, text string
	line       int // of the opening fence
}

// split returns md's prose (code blocks blanked, line count kept) and its
// fenced code blocks.
func split(md string) (prose string, blocks []block) {
	var b strings.Builder
	var cur *block
	var body []string
	for i, ln := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(ln, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(ln, "```")), line: i + 1}
			body = nil
			b.WriteString("\n")
		case cur != nil && strings.TrimSpace(ln) == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
			b.WriteString("\n")
		case cur != nil:
			body = append(body, ln)
			b.WriteString("\n")
		default:
			b.WriteString(ln + "\n")
		}
	}
	return b.String(), blocks
}

// anchors returns the GitHub anchors of md's headings.
func anchors(md string) map[string]bool {
	prose, _ := split(md)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, ln := range strings.Split(prose, "\n") {
		if !strings.HasPrefix(ln, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(ln, "#"))
		var s strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
				s.WriteRune(r)
			case r == ' ':
				s.WriteRune('-')
			}
		}
		a := s.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestDocLinks(t *testing.T) {
	for _, name := range docFiles(t) {
		md := read(t, name)
		prose, _ := split(md)
		// Inline code is not a link.
		prose = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(prose, "")
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := name
			if path != "" {
				file = filepath.Join(filepath.Dir(name), path)
				if _, err := os.Stat(filepath.Join("..", file)); !assert.NoError(t, err, "%s: link %q", name, target) {
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			assert.True(t, anchors(read(t, file))[frag], "%s: link %q: %s has no heading with anchor #%s", name, target, file, frag)
		}
	}
}

// checkedSnippets are the markers of the blocks agentkit's
// TestReadmeSnippets compares with the kits' runnable examples.
var checkedSnippets = []string{"agentkit.NewStream(stdio{os.Stdin, os.Stdout})", "kit.NewAgentSideConnection(&myAgent{}"}

func TestDocGoBlocks(t *testing.T) {
	var programs, fragments, checked int
	for _, name := range docFiles(t) {
		_, blocks := split(read(t, name))
		for _, b := range blocks {
			if b.lang != "go" {
				continue
			}
			where := name + ":" + strconv.Itoa(b.line)
			switch {
			case name == filepath.Join("docs", "agentkit.md") && containsAny(b.text, checkedSnippets):
				checked++ // TestReadmeSnippets
			case strings.HasPrefix(b.text, "package "):
				programs++
				vet(t, where, b.text)
			case strings.HasPrefix(b.text, "// fragment"):
				fragments++
				parseFragment(t, where, b.text)
			default:
				assert.Fail(t, where+": a go block that is neither a whole program (package ...) nor marked // fragment")
			}
		}
	}
	assert.Equal(t, len(checkedSnippets), checked, "the kit integrations TestReadmeSnippets checks found in docs/agentkit.md")
	t.Logf("go blocks: %d checked against the kits' examples, %d programs vetted, %d fragments parsed", checked, programs, fragments)
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// vet runs `go vet` on a whole program in this module.
func vet(t *testing.T, where, src string) {
	t.Helper()
	if testing.Short() {
		return
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(f, []byte(src), 0o644), "os.WriteFile")
	cmd := exec.Command("go", "vet", f)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s: go vet\n%s", where, out)
}

// parseFragment parses a fragment as declarations, or else as statements
// in a function body after its leading import block.
func parseFragment(t *testing.T, where, src string) {
	t.Helper()
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, where, "package p\n"+src, 0); err == nil {
		return
	}
	imports, body := "", src
	if i := strings.Index(src, "import ("); i >= 0 {
		if j := strings.Index(src[i:], "\n)\n"); j >= 0 {
			imports, body = src[:i+j+3], src[i+j+3:]
		}
	}
	_, err := parser.ParseFile(fset, where, "package p\n"+imports+"func _() {\n"+body+"\n}\n", 0)
	assert.NoError(t, err, "%s: the fragment parses neither as declarations nor as statements", where)
}

// TestSessionLogExample checks the checksums of the example lines in
// docs/records.md ("The session log format"): CRC-32C of the bytes after
// the `{"crc":"xxxxxxxx",` prefix, in eight lowercase hex digits.
func TestSessionLogExample(t *testing.T) {
	md := read(t, filepath.Join("docs", "records.md"))
	i := strings.Index(md, "\n## The session log format\n")
	require.GreaterOrEqual(t, i, 0, `docs/records.md has no section "The session log format"`)
	_, blocks := split(md[i:])
	require.NotEmpty(t, blocks, "the session log format has no ```json example")
	require.Equal(t, "json", blocks[0].lang, "the session log format has no ```json example")
	const prefix = `{"crc":"xxxxxxxx",`
	n := 0
	for _, ln := range strings.Split(strings.TrimSpace(blocks[0].text), "\n") {
		if !assert.True(t, len(ln) >= len(prefix) && strings.HasPrefix(ln, `{"crc":"`), "line without a checksum: %s", ln) {
			continue
		}
		want := fmt.Sprintf("%08x", crc32.Checksum([]byte(ln[len(prefix):]), crc32.MakeTable(crc32.Castagnoli)))
		assert.Equal(t, want, ln[len(`{"crc":"`):len(`{"crc":"`)+8], "checksum of %s", ln)
		n++
	}
	assert.GreaterOrEqual(t, n, 4, "example lines: want the header, a message, a start and a record")
}
