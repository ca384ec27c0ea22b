package docs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// binDir holds the programs the checks build to read their -h output.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpcompact-docs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestDocShellBlocks checks every command of every ```sh block for what a
// reader relies on when running it (see checkCommand).
func TestDocShellBlocks(t *testing.T) {
	m := loadModule(t)
	var lines, commands int
	for _, name := range docFiles(t) {
		_, blocks := split(read(t, name))
		for _, b := range blocks {
			if b.lang != "sh" {
				continue
			}
			sl, err := shellLines(b)
			if !assert.NoError(t, err, "%s:%d: the block does not parse as shell", name, b.line) {
				continue
			}
			for _, ln := range sl {
				lines++
				where := fmt.Sprintf("%s:%d", name, ln.line)
				for _, c := range ln.cmds {
					commands++
					for _, p := range m.checkCommand(t, c) {
						assert.Fail(t, where+": "+p, "%s", ln.text)
					}
				}
			}
		}
	}
	assert.NotZero(t, commands, "no commands in the ```sh blocks: is the fence still ```sh?")
	t.Logf("sh blocks: %d lines, %d commands checked", lines, commands)
}

// TestDocJSONBlocks checks that every ```json block parses: as one value,
// or as JSON Lines when every line is an object. In an editor
// configuration (agent_servers, acp.agents, acpx's agents: see
// editorLaunches), each entry's command line is checked as an editor's
// launch (see checkLaunch).
func TestDocJSONBlocks(t *testing.T) {
	m := loadModule(t)
	var values, jsonLines, servers int
	for _, name := range docFiles(t) {
		_, blocks := split(read(t, name))
		for _, b := range blocks {
			if b.lang != "json" {
				continue
			}
			if isJSONLines(b.text) {
				jsonLines++
				for i, ln := range strings.Split(strings.TrimRight(b.text, "\n"), "\n") {
					var v any
					assert.NoError(t, json.Unmarshal([]byte(ln), &v), "%s:%d: a JSON Lines line does not parse\n\t%s", name, b.line+1+i, ln)
				}
				continue
			}
			values++
			var v any
			if err := json.Unmarshal([]byte(b.text), &v); !assert.NoError(t, err, "%s:%d: the block does not parse as JSON", name, b.line+1+jsonErrorLine(b.text, err)) {
				continue
			}
			launches, ok := editorLaunches(b.text)
			if !ok {
				continue // not an editor configuration
			}
			for _, server := range slices.Sorted(maps.Keys(launches)) {
				servers++
				_, entry, _ := strings.Cut(server, ".") // the key of the agents map; acp.agents has a dot of its own
				if strings.HasPrefix(server, "acp.agents.") {
					entry = strings.TrimPrefix(server, "acp.agents.")
				}
				where := fmt.Sprintf("%s:%d", name, b.line+1+lineOf(b.text, strconv.Quote(entry)))
				for _, p := range m.checkLaunch(t, launches[server]) {
					assert.Fail(t, fmt.Sprintf("%s: agent server %q: %s", where, entry, p))
				}
			}
		}
	}
	assert.NotZero(t, values+jsonLines, "no ```json blocks")
	t.Logf("json blocks: %d values (%d agent servers checked), %d JSON Lines", values, servers, jsonLines)
}

func isJSONLines(text string) bool {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) < 2 {
		return false
	}
	for _, ln := range lines {
		ln = strings.TrimSpace(ln)
		if !strings.HasPrefix(ln, "{") || !strings.HasSuffix(ln, "}") {
			return false
		}
	}
	return true
}

// jsonErrorLine returns the line of text (0 for its first) that err, from
// decoding text, is about.
func jsonErrorLine(text string, err error) int {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return 0
	}
	off := min(max(int(syn.Offset)-1, 0), len(text))
	return strings.Count(text[:off], "\n")
}

// lineOf returns the line of text (0 for its first) where s first occurs.
func lineOf(text, s string) int {
	i := strings.Index(text, s)
	if i < 0 {
		return 0
	}
	return strings.Count(text[:i], "\n")
}

// shellLine is one command line of a block, continuation lines joined.
type shellLine struct {
	text string
	line int // in the markdown file
	cmds []shellCmd
}

// shellLines parses a ```sh block as the shell does (mvdan.cc/sh) and
// returns its command lines, each with its simple commands.
func shellLines(b block) ([]shellLine, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(b.text), "")
	if err != nil {
		return nil, err
	}
	var out []shellLine
	for _, st := range f.Stmts {
		cmds, err := simpleCommands(st)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", b.line+int(st.Pos().Line()), err)
		}
		text := b.text[st.Pos().Offset():st.End().Offset()]
		out = append(out, shellLine{text: text, line: b.line + int(st.Pos().Line()), cmds: cmds})
	}
	return out, nil
}

// shellCmd is one simple command of a line: its leading VAR=value
// assignments and its words, quotes removed, redirections dropped.
type shellCmd struct {
	env   []string // the variable names
	words []string
}

// parseShell parses one command line into its simple commands (those
// joined by |, ||, &&, ; and &), without # comments and redirections.
func parseShell(line string) ([]shellCmd, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, err
	}
	var cmds []shellCmd
	for _, st := range f.Stmts {
		c, err := simpleCommands(st)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, c...)
	}
	return cmds, nil
}

// simpleCommands returns the simple commands of st in order. Words keep
// their parameter expansions as written ($HOME, ${X:-y}), quotes removed.
func simpleCommands(st *syntax.Stmt) ([]shellCmd, error) {
	var cmds []shellCmd
	var err error
	syntax.Walk(st, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || err != nil {
			return err == nil
		}
		if len(call.Args) == 0 {
			err = errors.New("a command of assignments only")
			return false
		}
		var c shellCmd
		for _, a := range call.Assigns {
			c.env = append(c.env, a.Name.Value)
		}
		for _, w := range call.Args {
			c.words = append(c.words, unquote(w.Parts))
		}
		cmds = append(cmds, c)
		return false
	})
	return cmds, err
}

// unquote is a word without its quotes; expansions stay as written.
func unquote(parts []syntax.WordPart) string {
	var b strings.Builder
	for _, p := range parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			b.WriteString(unquote(p.Parts))
		default:
			_ = syntax.NewPrinter().Print(&b, p)
		}
	}
	return b.String()
}

// modInfo is what the checks know of this module.
type modInfo struct {
	path     string
	pkgs     map[string]*pkgInfo // by directory relative to the module root, "" for the root
	commands map[string]string   // an installed program's name -> its package directory
	make     makefile
	npm      map[string]string // test/interop/package.json: package -> pinned version

	mu       sync.Mutex
	builds   map[string]string // package directory -> built program
	helps    map[string]help   // program and arguments -> what -h printed
	buildErr map[string]error  // package directory -> why it did not build
}

type pkgInfo struct {
	dir, name string
	files     []string // absolute: .go files, test files too
	testFiles []string
	funcs     []string // top-level funcs of the test files; nil until read
}

type makefile struct {
	targets, vars map[string]bool
}

var (
	modOnce sync.Once
	mod     *modInfo
	modErr  error
)

// loadModule lists the module's packages (one `go list`), its Makefile and
// the npm pins, once for every test.
func loadModule(t *testing.T) *modInfo {
	t.Helper()
	modOnce.Do(func() { mod, modErr = readModule() })
	require.NoError(t, modErr, "reading the module (go list, the Makefile, the npm pins)")
	return mod
}

func readModule() (*modInfo, error) {
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		return nil, err
	}
	m := &modInfo{
		path:     modfile.ModulePath(gomod),
		pkgs:     map[string]*pkgInfo{},
		commands: map[string]string{},
		builds:   map[string]string{},
		helps:    map[string]help{},
		buildErr: map[string]error{},
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Dir}}\t{{join .GoFiles \" \"}}\t{{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %v", err)
	}
	for _, ln := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(ln, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("go list: unexpected line %q", ln)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], m.path), "/")
		p := &pkgInfo{dir: rel, name: f[1]}
		for _, name := range strings.Fields(f[3]) {
			p.files = append(p.files, filepath.Join(f[2], name))
		}
		for _, name := range strings.Fields(f[4]) {
			p.testFiles = append(p.testFiles, filepath.Join(f[2], name))
		}
		p.files = append(p.files, p.testFiles...)
		m.pkgs[rel] = p
		if p.name == "main" {
			m.commands[filepath.Base(rel)] = rel
		}
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		return nil, err
	}
	m.make = parseMakefile(string(mk))
	pj, err := os.ReadFile(filepath.Join("..", "test", "interop", "package.json"))
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(pj, &pkg); err != nil {
		return nil, fmt.Errorf("test/interop/package.json: %v", err)
	}
	m.npm = pkg.Dependencies
	return m, nil
}

var (
	makeTarget = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*:([^=]|$)`)
	makeVarRef = regexp.MustCompile(`\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]`)
)

func parseMakefile(src string) makefile {
	mk := makefile{targets: map[string]bool{}, vars: map[string]bool{}}
	for _, ln := range strings.Split(src, "\n") {
		if m := makeTarget.FindStringSubmatch(ln); m != nil {
			for _, t := range strings.Fields(m[1]) {
				mk.targets[t] = true
			}
		}
		for _, m := range makeVarRef.FindAllStringSubmatch(ln, -1) {
			mk.vars[m[1]] = true
		}
	}
	return mk
}

// checkCommand returns what is wrong with a documented command; each kind
// of command has its check, and a command of no known kind is a problem,
// so that a new kind gets a check:
//
//   - go run|install|build PKG: PKG (./X, or this module's path/X@version)
//     is a main package of this module; the arguments after go run's PKG
//     are checked as that program's (below);
//   - go test PKGS [flags]: each ./X or ./X/... names packages; each
//     |-alternative of -run matches a Test, Example or Fuzz function, and
//     each of -bench a Benchmark, of every pattern's packages; other flags
//     are known ones;
//   - go get MODULE@vN: MODULE is this module, vN a version its path can
//     have;
//   - make [TARGET...] [VAR=value...]: each TARGET is a Makefile target,
//     each VAR a variable the Makefile reads;
//   - npm install [--prefix P] NAME@V: V is the version of NAME that
//     test/interop/package.json pins, and on Linux P is where
//     internal/acpschema looks for the installed schemas;
//   - npm install [-g] [--offline] [--prefix P] of this project's npm
//     launcher (NAME or NAME@V, V the one make dist builds) or of make
//     dist's tarballs (dist/FILE, as npm/mkdist -print names them, the
//     launcher's among them); npm publish [--provenance] dist/FILE;
//   - npx [-y] LAUNCHER ARGS: LAUNCHER as above, ARGS acpcompact's (below);
//   - a program of this module, by its name (acpcompact) or through go
//     run: for acpcompact, the first argument is a subcommand it
//     dispatches; each -flag before -- is one that the program's (or the
//     subcommand's) -h lists.
//
// Every VAR=value before a command names a variable that a Go file of the
// module (of the tested packages, for go test) spells out.
func (m *modInfo) checkCommand(t *testing.T, c shellCmd) []string {
	t.Helper()
	var probs []string
	w := c.words
	envFiles := m.allFiles()
	switch {
	case w[0] == "go" && len(w) > 1 && w[1] == "test":
		var pkgs []*pkgInfo
		probs, pkgs = m.checkGoTest(w[2:])
		envFiles = nil
		for _, p := range pkgs {
			envFiles = append(envFiles, p.files...)
		}
	case w[0] == "go" && len(w) > 1 && (w[1] == "run" || w[1] == "install" || w[1] == "build"):
		probs = m.checkGoBuild(t, w[1], w[2:])
	case w[0] == "go" && len(w) > 1 && w[1] == "get":
		probs = m.checkGoGet(w[2:])
	case w[0] == "make":
		probs = m.checkMake(w[1:])
	case w[0] == "npm" && len(w) > 1 && w[1] == "install":
		var dist bool
		if probs, dist = m.checkDistInstall(t, w[2:]); !dist {
			probs = m.checkNpmInstall(t, w[2:])
		}
	case w[0] == "npm" && len(w) > 1 && w[1] == "publish":
		probs = m.checkNpmPublish(t, w[2:])
	case w[0] == "npx":
		probs = m.checkNpx(t, w[1:])
	case m.commands[w[0]] != "":
		probs = m.checkProgram(t, m.commands[w[0]], w[1:])
	default:
		probs = []string{fmt.Sprintf("no check for the command %q: teach checkCommand what a reader relies on in it", strings.Join(w[:min(2, len(w))], " "))}
	}
	for _, v := range c.env {
		if !filesContain(envFiles, strconv.Quote(v)) {
			probs = append(probs, fmt.Sprintf("$%s: no Go file of the packages it runs reads it", v))
		}
	}
	return probs
}

func (m *modInfo) allFiles() []string {
	var out []string
	for _, p := range m.pkgs {
		out = append(out, p.files...)
	}
	return out
}

func filesContain(files []string, s string) bool {
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// pkgDir returns the directory of the package arg names: ./X, or this
// module's path/X@version (which go run and go install need).
func (m *modInfo) pkgDir(arg string) (string, string) {
	var dir string
	switch {
	case arg == "." || strings.HasPrefix(arg, "./"):
		if strings.Contains(arg, "@") {
			return "", fmt.Sprintf("%s: a local package takes no @version", arg)
		}
		dir = filepath.ToSlash(filepath.Clean(arg))
		if dir == "." {
			dir = ""
		}
	case arg == m.path || strings.HasPrefix(arg, m.path+"/") || strings.HasPrefix(arg, m.path+"@"):
		p, v, ok := strings.Cut(arg, "@")
		if !ok {
			return "", fmt.Sprintf("%s: a package outside the working module needs @version", arg)
		}
		if v != "latest" && !semver.IsValid(v) {
			return "", fmt.Sprintf("%s: %q is neither latest nor a semantic version", arg, v)
		}
		dir = strings.TrimPrefix(strings.TrimPrefix(p, m.path), "/")
	default:
		return "", fmt.Sprintf("%s: not a package of this module (%s)", arg, m.path)
	}
	if m.pkgs[dir] == nil {
		return "", fmt.Sprintf("%s: no such package in this module", arg)
	}
	return dir, ""
}

// Flags of the go command the checks know: whether each takes a value.
var (
	goBuildFlags = map[string]bool{"race": false, "trimpath": false, "v": false, "o": true, "tags": true, "ldflags": true}
	goTestFlags  = map[string]bool{
		"run": true, "bench": true, "count": true, "timeout": true, "benchtime": true, "cpu": true,
		"v": false, "benchmem": false, "race": false, "short": false, "json": false, "failfast": false,
		"tags": true, "fuzz": true, "fuzztime": true,
	}
)

// goFlag reads the flag at args[0] for a go subcommand that knows known;
// it returns the flag's name, its value (if it takes one) and how many
// arguments it used.
func goFlag(args []string, known map[string]bool) (name, value string, n int, prob string) {
	name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(args[0], "-"), "-"), "=")
	takes, ok := known[name]
	switch {
	case !ok:
		return name, "", 1, fmt.Sprintf("no check for the go flag -%s: add it to the known flags", name)
	case !takes || hasValue:
		return name, value, 1, ""
	case len(args) < 2:
		return name, "", 1, fmt.Sprintf("-%s needs a value", name)
	}
	return name, args[1], 2, ""
}

func (m *modInfo) checkGoBuild(t *testing.T, verb string, args []string) []string {
	var probs []string
	for i := 0; i < len(args); {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			_, _, n, p := goFlag(args[i:], goBuildFlags)
			if p != "" {
				probs = append(probs, p)
			}
			i += n
			continue
		}
		dir, p := m.pkgDir(a)
		switch {
		case p != "":
			probs = append(probs, p)
		case m.pkgs[dir].name != "main":
			probs = append(probs, fmt.Sprintf("go %s %s: package %s, not a main package", verb, a, m.pkgs[dir].name))
		}
		if verb == "run" {
			// The rest are the program's arguments.
			if p == "" {
				probs = append(probs, m.checkProgram(t, dir, args[i+1:])...)
			}
			return probs
		}
		i++
	}
	return probs
}

func (m *modInfo) checkGoTest(args []string) ([]string, []*pkgInfo) {
	var probs []string
	var groups [][]*pkgInfo // per package pattern
	var patterns []string
	var all []*pkgInfo
	var run, bench string
	for i := 0; i < len(args); {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			name, value, n, p := goFlag(args[i:], goTestFlags)
			if p != "" {
				probs = append(probs, p)
			}
			switch name {
			case "run":
				run = value
			case "bench":
				bench = value
			}
			i += n
			continue
		}
		i++
		base, tree := strings.CutSuffix(a, "/...")
		if a == "./..." {
			base, tree = ".", true
		}
		dir, p := m.pkgDir(base)
		if p != "" && !tree {
			probs = append(probs, p)
			continue
		}
		var g []*pkgInfo
		for d, pkg := range m.pkgs {
			if d == dir && p == "" || tree && (base == "." || d == strings.TrimPrefix(base, "./") || strings.HasPrefix(d, strings.TrimPrefix(base, "./")+"/")) {
				g = append(g, pkg)
			}
		}
		if len(g) == 0 {
			probs = append(probs, fmt.Sprintf("%s: no packages", a))
			continue
		}
		groups = append(groups, g)
		patterns = append(patterns, a)
		all = append(all, g...)
	}
	if len(patterns) == 0 {
		probs = append(probs, "go test without a package: name the packages it tests")
	}
	for _, f := range []struct {
		flag, re string
		kinds    []string
	}{
		{"-run", run, []string{"Test", "Example", "Fuzz"}},
		{"-bench", bench, []string{"Benchmark"}},
	} {
		if f.re == "" || f.re == "^$" { // ^$: none, on purpose
			continue
		}
		top := splitTop(f.re, '/')[0] // the rest selects subtests
		for _, alt := range splitTop(top, '|') {
			rx, err := regexp.Compile(alt)
			if err != nil {
				probs = append(probs, fmt.Sprintf("%s %q: %v", f.flag, f.re, err))
				continue
			}
			for i, g := range groups {
				if !anyFunc(g, f.kinds, rx) {
					probs = append(probs, fmt.Sprintf("%s %q: %q matches no %s function of %s", f.flag, f.re, alt, strings.Join(f.kinds, "/"), patterns[i]))
				}
			}
		}
	}
	return probs, all
}

// splitTop splits re at sep outside parentheses and brackets.
func splitTop(re string, sep byte) []string {
	var out []string
	depth, inClass, start := 0, false, 0
	for i := 0; i < len(re); i++ {
		switch c := re[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == sep && depth == 0:
			out = append(out, re[start:i])
			start = i + 1
		}
	}
	return append(out, re[start:])
}

func anyFunc(pkgs []*pkgInfo, kinds []string, rx *regexp.Regexp) bool {
	for _, p := range pkgs {
		for _, fn := range p.testFuncs() {
			for _, k := range kinds {
				if strings.HasPrefix(fn, k) && rx.MatchString(fn) {
					return true
				}
			}
		}
	}
	return false
}

// testFuncs returns the names of the top-level functions of p's test
// files.
func (p *pkgInfo) testFuncs() []string {
	if p.funcs != nil {
		return p.funcs
	}
	p.funcs = []string{}
	fset := token.NewFileSet()
	for _, f := range p.testFiles {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			continue // go vet and go test report it
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				p.funcs = append(p.funcs, fd.Name.Name)
			}
		}
	}
	return p.funcs
}

func (m *modInfo) checkGoGet(args []string) []string {
	var probs []string
	if len(args) == 0 {
		return []string{"go get without a module"}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			probs = append(probs, fmt.Sprintf("no check for the go get flag %s", a))
			continue
		}
		path, v, ok := strings.Cut(a, "@")
		switch {
		case path != m.path:
			probs = append(probs, fmt.Sprintf("go get %s: the module is %s", path, m.path))
		case !ok:
			probs = append(probs, fmt.Sprintf("go get %s: no @version", a))
		case v != "latest":
			_, pathMajor, _ := module.SplitPathVersion(path)
			if !semver.IsValid(v) {
				probs = append(probs, fmt.Sprintf("go get %s: %q is not a semantic version", a, v))
			} else if err := module.CheckPathMajor(v, pathMajor); err != nil {
				probs = append(probs, fmt.Sprintf("go get %s: %v", a, err))
			} else if rel, err := releaseVersion(); err != nil || v != rel {
				probs = append(probs, fmt.Sprintf("go get %s: the release is the VERSION file's, %s (%v)", a, rel, err))
			}
		}
	}
	return probs
}

func (m *modInfo) checkMake(args []string) []string {
	var probs []string
	for _, a := range args {
		switch name, _, isVar := strings.Cut(a, "="); {
		case strings.HasPrefix(a, "-"):
			probs = append(probs, fmt.Sprintf("no check for the make flag %s", a))
		case isVar && !m.make.vars[name]:
			probs = append(probs, fmt.Sprintf("make %s: the Makefile never reads $(%s)", a, name))
		case !isVar && !m.make.targets[a]:
			probs = append(probs, fmt.Sprintf("make %s: no such target in the Makefile", a))
		}
	}
	return probs
}

func (m *modInfo) checkNpmInstall(t *testing.T, args []string) []string {
	var probs []string
	var specs int
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--prefix" && i+1 < len(args):
			i++
			probs = append(probs, checkSchemaPrefix(t, args[i])...)
		case strings.HasPrefix(a, "-"):
			probs = append(probs, fmt.Sprintf("no check for the npm install flag %s", a))
		default:
			specs++
			at := strings.LastIndexByte(a, '@')
			if at <= 0 {
				probs = append(probs, fmt.Sprintf("npm install %s: no pinned @version", a))
				continue
			}
			name, v := a[:at], a[at+1:]
			pin, ok := m.npm[name]
			switch {
			case !ok:
				probs = append(probs, fmt.Sprintf("npm install %s: test/interop/package.json does not pin %s", a, name))
			case v != pin:
				probs = append(probs, fmt.Sprintf("npm install %s: test/interop/package.json pins %s@%s", a, name, pin))
			}
		}
	}
	if specs == 0 {
		probs = append(probs, "npm install of no package")
	}
	return probs
}

// checkSchemaPrefix checks that an npm --prefix, as the shell expands it,
// is where internal/acpschema looks for the schemas: the user cache. On
// Linux only, where the documented ${XDG_CACHE_HOME:-$HOME/.cache} is
// os.UserCacheDir's rule.
func checkSchemaPrefix(t *testing.T, prefix string) []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	var probs []string
	for _, xdg := range []string{filepath.Join(t.TempDir(), "xdg"), ""} {
		env := map[string]string{"XDG_CACHE_HOME": xdg, "HOME": filepath.Join(t.TempDir(), "home")}
		got, err := expandShell(prefix, env)
		if err != nil {
			return append(probs, fmt.Sprintf("npm install --prefix %s: %v", prefix, err))
		}
		var want string
		withEnv(env, func() { want, err = acpschema.CachePrefix() })
		require.NoError(t, err, "acpschema.CachePrefix with XDG_CACHE_HOME=%q", xdg)
		if got != want {
			probs = append(probs, fmt.Sprintf("npm install --prefix %s: with XDG_CACHE_HOME=%q that is %s, but acpschema looks in %s", prefix, xdg, got, want))
		}
	}
	return probs
}

// withEnv runs f with the environment variables set, then restores them
// at once rather than at the end of the test (as t.Setenv would): the go
// commands the test runs later must keep the real HOME, where the build
// and module caches are.
func withEnv(vars map[string]string, f func()) {
	for k, v := range vars {
		old, had := os.LookupEnv(k)
		os.Setenv(k, v)
		if had {
			defer os.Setenv(k, old)
		} else {
			defer os.Unsetenv(k)
		}
	}
	f()
}

// expandShell expands the parameters of s as the shell would, with env.
func expandShell(s string, env map[string]string) (string, error) {
	w, err := syntax.NewParser().Document(strings.NewReader(s))
	if err != nil {
		return "", err
	}
	var pairs []string
	for k, v := range env {
		pairs = append(pairs, k+"="+v)
	}
	return expand.Literal(&expand.Config{Env: expand.ListEnviron(pairs...)}, w)
}

// subcommandPrograms are the programs whose first argument is a
// subcommand, each with its own flags.
var subcommandPrograms = map[string]bool{"cmd/acpcompact": true}

// checkProgram checks a program's arguments against what its -h prints.
func (m *modInfo) checkProgram(t *testing.T, dir string, args []string) []string {
	if len(args) == 0 {
		return nil
	}
	name := filepath.Base(dir)
	helpArgs := []string{"-h"}
	if subcommandPrograms[dir] {
		sub := args[0]
		if strings.HasPrefix(sub, "-") && sub != "-h" && sub != "--help" {
			return []string{fmt.Sprintf("%s %s: a subcommand comes first", name, sub)}
		}
		name += " " + sub
		helpArgs = []string{sub, "-h"}
		args = args[1:]
	}
	h := m.help(t, dir, helpArgs)
	if h.err != "" {
		return []string{fmt.Sprintf("%s: %s", name, h.err)}
	}
	var probs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		f, _, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if f == "h" || f == "help" {
			continue
		}
		takes, ok := h.flags[f]
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s has no flag -%s (its -h lists %s)", name, f, strings.Join(slices.Sorted(maps.Keys(h.flags)), ", ")))
		case takes && !hasValue:
			if i+1 == len(args) {
				probs = append(probs, fmt.Sprintf("%s -%s needs a value", name, f))
			}
			i++
		}
	}
	return probs
}

// help is what a program's -h says: its flags, and whether each takes a
// value; or why it could not be read.
type help struct {
	flags map[string]bool
	err   string
}

// helpFlag matches a flag of flag.PrintDefaults: "  -name" with its value
// type, if any, then its usage on the same line after a tab or on the
// next, indented.
var helpFlag = regexp.MustCompile(`(?m)^  --?([^\s=-][^\s=]*)( \S+)?(?:\t|\n    \t)`)

func (m *modInfo) help(t *testing.T, dir string, args []string) help {
	t.Helper()
	key := dir + " " + strings.Join(args, " ")
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.helps[key]; ok {
		return h
	}
	bin, err := m.build(dir)
	require.NoError(t, err, "go build ./%s", dir)
	out, err := exec.Command(bin, args...).CombinedOutput()
	var h help
	if err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		h.err = fmt.Sprintf("%s %s: %v: %s", filepath.Base(dir), strings.Join(args, " "), err, first)
	} else {
		h.flags = map[string]bool{}
		for _, f := range helpFlag.FindAllStringSubmatch(string(out), -1) {
			h.flags[f[1]] = f[2] != ""
		}
	}
	m.helps[key] = h
	return h
}

// build builds the main package in dir once; m.mu is held.
func (m *modInfo) build(dir string) (string, error) {
	if bin, ok := m.builds[dir]; ok {
		return bin, m.buildErr[dir]
	}
	bin := filepath.Join(binDir, strings.ReplaceAll(dir, "/", "_"))
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", bin, "./"+dir)
	cmd.Dir = ".."
	var err error
	if out, e := cmd.CombinedOutput(); e != nil {
		err = fmt.Errorf("%v\n%s", e, out)
	}
	m.builds[dir], m.buildErr[dir] = bin, err
	return bin, err
}

func TestParseShell(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []shellCmd
	}{
		{`A=1 B="x y" go test ./x -run 'A|B' 2>&1 | tee "out file" # a comment`, []shellCmd{
			{env: []string{"A", "B"}, words: []string{"go", "test", "./x", "-run", "A|B"}},
			{words: []string{"tee", "out file"}},
		}},
		{`acpcompact demo --wire > t.jsonl && acpcompact check t.jsonl`, []shellCmd{
			{words: []string{"acpcompact", "demo", "--wire"}},
			{words: []string{"acpcompact", "check", "t.jsonl"}},
		}},
		{`npm install --prefix "${XDG_CACHE_HOME:-$HOME/.cache}/s" p@1 >>log`, []shellCmd{
			{words: []string{"npm", "install", "--prefix", "${XDG_CACHE_HOME:-$HOME/.cache}/s", "p@1"}},
		}},
		{`   # only a comment`, nil},
	} {
		got, err := parseShell(tc.line)
		if !assert.NoError(t, err, "parseShell(%q)", tc.line) {
			continue
		}
		assert.Equal(t, tc.want, got, "parseShell(%q)", tc.line)
	}
	for _, bad := range []string{`echo 'open`, `go test >`, `| tee x`, `A=1`} {
		_, err := parseShell(bad)
		assert.Error(t, err, "parseShell(%q)", bad)
	}
}

// TestCheckCommand shows each rule of checkCommand failing a stale
// command, and passing its fresh form.
func TestCheckCommand(t *testing.T) {
	m := loadModule(t)
	for _, tc := range []struct{ line, problem string }{
		{"go run ./cmd/acpcompact demo --fallback marker --wire > t.jsonl", ""},
		{"go run ./cmd/acpcompact demo --wired", "has no flag -wired"},
		{"go run ./cmd/acpcompact demos", `unknown command "demos"`},
		{"acpcompact proxy --heartbeat 5s --check=client -- agent --acp", ""},
		{"acpcompact proxy --cancel-grace", "needs a value"},
		{"go run ./test/bench/cmd/benchtable -rounds 3 -round 2", "has no flag -round"},
		{"go run ./proxy", "not a main package"},
		{"go build ./nope", "no such package"},
		{"go install github.com/acpcompact/acpcompact/cmd/acpcompact", "needs @version"},
		{"go run github.com/acpcompact/acpcompact/examples/scenario-agent@latest", ""},
		{"go run example.com/other/cmd@latest", "not a package of this module"},
		{"ACPCOMPACT_SOAK=1 go test ./test/soak -run 'TestSignal|TestUnknown' -v", ""},
		{"go test ./test/soak -run 'TestSignal|TestNoSuchThing'", `"TestNoSuchThing" matches no Test/Example/Fuzz function of ./test/soak`},
		{"go test ./agentkit/... -run 'Shutdown/sub'", ""},
		{"go test ./agentkit/... -run NoSuchTestAnywhere", "matches no"},
		{"go test -run '^$' -bench . ./emitter", ""},
		{"go test -bench BenchmarkNoSuch ./emitter", `"BenchmarkNoSuch" matches no Benchmark function of ./emitter`},
		{"go test ./nope/...", "no packages"},
		{"go test -shuffle on ./emitter", "no check for the go flag -shuffle"},
		{"NO_SUCH_VARIABLE=1 go test ./emitter", "$NO_SUCH_VARIABLE: no Go file"},
		{"go get github.com/acpcompact/acpcompact@v0.1.0", ""},
		{"go get github.com/acpcompact/acpcompact@v2.0.0", "v2"},
		{"go get example.com/other@v1.0.0", "the module is github.com/acpcompact/acpcompact"},
		{"make bench BENCH_ROUNDS=10", ""},
		{"make benchmark", "no such target"},
		{"make bench BENCH_ROUND=10", "never reads $(BENCH_ROUND)"},
		{"npm install @agentclientprotocol/sdk@0.0.1", "test/interop/package.json pins @agentclientprotocol/sdk@"},
		{"npm install left-pad@1.3.0", "does not pin left-pad"},
		{"npm install -g acpcompact", ""},
		{"npm install -g acpcompact@0.0.1", "make dist builds acpcompact@"},
		{"npm install -g @acpcompact/linux-x64", "install the launcher, acpcompact"},
		{"npm install --offline dist/acpcompact-linux-x64-0.0.1.tgz", "not a tarball make dist writes"},
		{"npm install --offline dist/acpcompact-linux-x64-" + npmRelease(t) + ".tgz", "npm install without the launcher"},
		{"npm publish --provenance dist/acpcompact-" + npmRelease(t) + ".tgz", ""},
		{"npm publish --provenance acpcompact-" + npmRelease(t) + ".tgz", "not a tarball make dist writes"},
		{"npx -y acpcompact version", ""},
		{"npx -y acpcompact proxy --profile", "needs a value"},
		{"npx -y left-pad", "not this project's package"},
		{"go get github.com/acpcompact/acpcompact@v0.0.9", "the release is the VERSION file's"},
		{"curl -fsSL https://example.com", `no check for the command "curl -fsSL"`},
	} {
		cmds, err := parseShell(tc.line)
		require.NoError(t, err, "parseShell(%q)", tc.line)
		require.Len(t, cmds, 1, "parseShell(%q)", tc.line)
		probs := strings.Join(m.checkCommand(t, cmds[0]), "\n")
		switch {
		case tc.problem == "":
			assert.Empty(t, probs, "%s: unexpected problems", tc.line)
		default:
			assert.Contains(t, probs, tc.problem, "%s: the problems found", tc.line)
		}
	}
	if runtime.GOOS == "linux" {
		probs := checkSchemaPrefix(t, "$HOME/.cache/acpcompact/schema")
		if assert.Len(t, probs, 1, "an npm prefix that ignores XDG_CACHE_HOME: problems %q, want one", probs) {
			assert.Contains(t, probs[0], "acpschema looks in", "an npm prefix that ignores XDG_CACHE_HOME")
		}
		assert.Empty(t, checkSchemaPrefix(t, "${XDG_CACHE_HOME:-$HOME/.cache}/acpcompact/schema"), "the user cache prefix: problems")
	}
}
