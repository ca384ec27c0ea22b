package docs_test

// Checks of the npm distribution's commands (npx, npm install of the
// launcher or of make dist's tarballs, npm publish) and of the editor
// configurations that launch the proxy: JSON (Zed's and JetBrains'
// agent_servers, VS Code's acp.agents, acpx's agents), Lua (CodeCompanion)
// and Emacs Lisp (agent-shell).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// distInfo is what npm/mkdist -print says of the npm packages: the
// launcher's name, the version, and every package's tarball.
type distInfo struct {
	launcher, version string
	packages          []string        // every package's name, in publish order
	tarballs          map[string]bool // file names, as npm pack writes them
	err               string
}

var (
	distOnce sync.Once
	distMemo *distInfo
)

// dist runs npm/mkdist -print once.
func (m *modInfo) dist(t *testing.T) *distInfo {
	t.Helper()
	distOnce.Do(func() {
		d := &distInfo{tarballs: map[string]bool{}}
		distMemo = d
		m.mu.Lock()
		bin, err := m.build("npm/mkdist")
		m.mu.Unlock()
		if err != nil {
			d.err = fmt.Sprintf("go build ./npm/mkdist: %v", err)
			return
		}
		cmd := exec.Command(bin, "-print")
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			d.err = fmt.Sprintf("mkdist -print: %v", err)
			return
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				d.err = fmt.Sprintf("mkdist -print: unexpected line %q", sc.Text())
				return
			}
			d.packages = append(d.packages, f[0])
			d.launcher, d.version = f[0], f[1] // the launcher comes last
			d.tarballs[f[2]] = true
		}
		if d.launcher == "" {
			d.err = "mkdist -print printed no package"
		}
	})
	require.Empty(t, distMemo.err, "the npm packages' names")
	return distMemo
}

// checkPackageSpec checks an npm package spec that names the launcher:
// NAME, or NAME@VERSION with the version make dist builds.
func (d *distInfo) checkPackageSpec(spec string) (isLauncher bool, probs []string) {
	name, v, pinned := strings.Cut(spec, "@")
	if strings.HasPrefix(spec, "@") { // a scoped name: @scope/name[@version]
		name, v, pinned = spec, "", false
		if at := strings.LastIndexByte(spec, '@'); at > 0 {
			name, v, pinned = spec[:at], spec[at+1:], true
		}
	}
	if name != d.launcher && !slices.Contains(d.packages, name) {
		return false, nil
	}
	if name != d.launcher {
		probs = append(probs, fmt.Sprintf("%s: install the launcher, %s; npm installs the platform package that fits", spec, d.launcher))
	}
	if pinned && v != d.version {
		probs = append(probs, fmt.Sprintf("%s: make dist builds %s@%s (the VERSION file)", spec, name, d.version))
	}
	return true, probs
}

// checkTarball checks a path to a tarball of make dist: dist/ and a file
// name mkdist -print names.
func (d *distInfo) checkTarball(path string) []string {
	name, ok := strings.CutPrefix(path, "dist/")
	if !ok || !d.tarballs[name] {
		return []string{fmt.Sprintf("%s: not a tarball make dist writes (dist/ and one of %s)", path, strings.Join(slices.Sorted(maps.Keys(d.tarballs)), ", "))}
	}
	return nil
}

// checkNpx checks `npx [-y|--yes] SPEC ARGS...`: SPEC is the launcher,
// and ARGS are acpcompact's.
func (m *modInfo) checkNpx(t *testing.T, args []string) []string {
	var probs []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] != "-y" && args[0] != "--yes" {
			probs = append(probs, fmt.Sprintf("no check for the npx flag %s", args[0]))
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return append(probs, "npx without a package")
	}
	d := m.dist(t)
	isLauncher, p := d.checkPackageSpec(args[0])
	if !isLauncher {
		return append(probs, fmt.Sprintf("npx %s: not this project's package (%s)", args[0], d.launcher))
	}
	probs = append(probs, p...)
	return append(probs, m.checkProgram(t, m.commands["acpcompact"], args[1:])...)
}

// checkDistInstall checks an npm install of the launcher (NAME or
// NAME@VERSION) or of make dist's tarballs; handled is false when args
// install anything else.
func (m *modInfo) checkDistInstall(t *testing.T, args []string) (probs []string, handled bool) {
	d := m.dist(t)
	var specs []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--prefix" && i+1 < len(args):
			i++
		case a == "-g" || a == "--global" || a == "--offline" || a == "--no-audit" || a == "--no-fund":
		case strings.HasPrefix(a, "-"):
			probs = append(probs, fmt.Sprintf("no check for the npm install flag %s", a))
		default:
			specs = append(specs, a)
		}
	}
	var launcher bool
	for _, s := range specs {
		if strings.HasSuffix(s, ".tgz") {
			probs = append(probs, d.checkTarball(s)...)
			launcher = launcher || s == "dist/"+tarballName(d.launcher, d.version)
			continue
		}
		isLauncher, p := d.checkPackageSpec(s)
		if !isLauncher {
			return nil, false
		}
		launcher = true
		probs = append(probs, p...)
	}
	if len(specs) > 0 && !launcher {
		probs = append(probs, fmt.Sprintf("npm install without the launcher, %s: nothing would run the binary", d.launcher))
	}
	return probs, len(specs) > 0
}

// releaseVersion is the VERSION file's: the release make dist builds and
// go get fetches.
func releaseVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "VERSION"))
	return strings.TrimSpace(string(b)), err
}

// npmRelease is the release's npm version: VERSION's without the v.
func npmRelease(t *testing.T) string {
	v, err := releaseVersion()
	require.NoError(t, err)
	return strings.TrimPrefix(v, "v")
}

// tarballName is npm pack's file name for a package.
func tarballName(name, version string) string {
	return strings.ReplaceAll(strings.TrimPrefix(name, "@"), "/", "-") + "-" + version + ".tgz"
}

// checkNpmPublish checks `npm publish [--provenance] TARBALL`: a tarball
// of make dist.
func (m *modInfo) checkNpmPublish(t *testing.T, args []string) []string {
	var probs []string
	var n int
	for _, a := range args {
		switch {
		case a == "--provenance":
		case strings.HasPrefix(a, "-"):
			probs = append(probs, fmt.Sprintf("no check for the npm publish flag %s", a))
		default:
			n++
			probs = append(probs, m.dist(t).checkTarball(a)...)
		}
	}
	if n != 1 {
		probs = append(probs, "npm publish takes one tarball of make dist")
	}
	return probs
}

// checkLaunch checks a command line an editor configuration launches, as
// checkCommand does; and one that runs acpcompact (installed, or through
// npx) must run `proxy` with the agent's command after --.
func (m *modInfo) checkLaunch(t *testing.T, words []string) []string {
	t.Helper()
	if len(words) == 0 || words[0] == "" {
		return []string{"no command"}
	}
	probs := m.checkCommand(t, shellCmd{words: words})
	var args []string
	switch words[0] {
	case "acpcompact":
		args = words[1:]
	case "npx":
		args = words[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "-") {
			args = args[1:]
		}
		if len(args) == 0 {
			return probs
		}
		args = args[1:]
	default:
		return probs
	}
	i := slices.Index(args, "--")
	if len(args) == 0 || args[0] != "proxy" || i < 0 || i == len(args)-1 {
		probs = append(probs, fmt.Sprintf("%q: an editor launches acpcompact proxy [flags] -- AGENT [ARGS]", strings.Join(words, " ")))
	}
	return probs
}

// editorLaunches returns the agent command lines of a JSON editor
// configuration, by entry name: agent_servers (Zed, JetBrains IDEs) and
// acp.agents (VS Code's ACP Client), each entry's command and args; acpx's
// agents, each entry's argv (or command and args). ok is false for JSON
// that is no editor configuration.
func editorLaunches(text string) (launches map[string][]string, ok bool) {
	type entry struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Argv    []string `json:"argv"`
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &cfg) != nil {
		return nil, false
	}
	launches = map[string][]string{}
	for _, key := range []string{"agent_servers", "acp.agents", "agents"} {
		raw, found := cfg[key]
		if !found {
			continue
		}
		var entries map[string]entry
		if json.Unmarshal(raw, &entries) != nil {
			continue
		}
		for name, e := range entries {
			words := append([]string{e.Command}, e.Args...)
			if key == "agents" && len(e.Argv) > 0 {
				words = e.Argv
			}
			launches[key+"."+name] = words
		}
		ok = true
	}
	return launches, ok
}

// luaCommandLines returns the command lines of a Lua block: every table
// constructor that holds only string literals (CodeCompanion's
// commands.default = { "npx", "-y", ... }), in order. Comments (-- to the
// end of the line) and long strings or comments ([[ ]]) are skipped; an
// unterminated string or a table constructor left open is an error.
func luaCommandLines(src string) ([][]string, error) {
	type table struct {
		words    []string
		onlyStrs bool
	}
	var stack []*table
	var out [][]string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case strings.HasPrefix(src[i:], "--"):
			j := i + 2
			if strings.HasPrefix(src[j:], "[[") {
				k := strings.Index(src[j:], "]]")
				if k < 0 {
					return nil, errors.New("an unterminated long comment")
				}
				i = j + k + 2
				continue
			}
			for j < len(src) && src[j] != '\n' {
				j++
			}
			i = j
		case c == '"' || c == '\'':
			s, n, err := luaString(src[i:])
			if err != nil {
				return nil, err
			}
			if len(stack) > 0 {
				stack[len(stack)-1].words = append(stack[len(stack)-1].words, s)
			}
			i += n
		case strings.HasPrefix(src[i:], "[["):
			k := strings.Index(src[i+2:], "]]")
			if k < 0 {
				return nil, errors.New("an unterminated long string")
			}
			if len(stack) > 0 {
				stack[len(stack)-1].onlyStrs = false
			}
			i += k + 4
		case c == '{':
			if len(stack) > 0 {
				stack[len(stack)-1].onlyStrs = false
			}
			stack = append(stack, &table{onlyStrs: true})
			i++
		case c == '}':
			if len(stack) == 0 {
				return nil, errors.New("a } that closes nothing")
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.onlyStrs && len(top.words) > 0 {
				out = append(out, top.words)
			}
			i++
		case c == ',' || c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			if len(stack) > 0 {
				stack[len(stack)-1].onlyStrs = false
			}
			i++
		}
	}
	if len(stack) > 0 {
		return nil, errors.New("a table constructor left open")
	}
	return out, nil
}

// luaString reads the quoted Lua string at the start of s and returns its
// value and length; only the escapes a command line needs (\\, \", \', \n,
// \t) are read.
func luaString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\n':
			return "", 0, errors.New("a string broken by a newline")
		case c == '\\' && i+1 < len(s):
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\', '"', '\'':
				b.WriteByte(e)
			default:
				return "", 0, fmt.Errorf("no check for the escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("an unterminated string")
}

// elispCommandLines returns the command lines of an Emacs Lisp block:
// every quoted list that holds only strings, '("npx" "-y" ...), as
// agent-shell's agent-shell-…-command variables take them, in order.
// Comments (; to the end of the line) are skipped; an unterminated string
// or unbalanced parentheses are an error.
func elispCommandLines(src string) ([][]string, error) {
	type list struct {
		quoted   bool
		words    []string
		onlyStrs bool
	}
	var stack []*list
	var out [][]string
	quote := false // the next list is quoted
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' && j+1 < len(src) {
					j++
				}
				b.WriteByte(src[j])
			}
			if j >= len(src) {
				return nil, errors.New("an unterminated string")
			}
			if len(stack) > 0 {
				stack[len(stack)-1].words = append(stack[len(stack)-1].words, b.String())
			}
			quote = false
			i = j + 1
		case c == '\'':
			quote = true
			i++
		case c == '(':
			if len(stack) > 0 {
				stack[len(stack)-1].onlyStrs = false
			}
			stack = append(stack, &list{quoted: quote, onlyStrs: true})
			quote = false
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, errors.New("a ) that closes nothing")
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.quoted && top.onlyStrs && len(top.words) > 0 {
				out = append(out, top.words)
			}
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			if len(stack) > 0 {
				stack[len(stack)-1].onlyStrs = false
			}
			quote = false
			i++
		}
	}
	if len(stack) > 0 {
		return nil, errors.New("a list left open")
	}
	return out, nil
}

// TestDocEditorBlocks checks the command lines of every ```lua and
// ```elisp block (luaCommandLines, elispCommandLines) as an editor's
// launch (checkLaunch); a block without one fails.
func TestDocEditorBlocks(t *testing.T) {
	m := loadModule(t)
	extract := map[string]func(string) ([][]string, error){"lua": luaCommandLines, "elisp": elispCommandLines}
	found := map[string]int{}
	for _, name := range docFiles(t) {
		_, blocks := split(read(t, name))
		for _, b := range blocks {
			f := extract[b.lang]
			if f == nil {
				continue
			}
			where := fmt.Sprintf("%s:%d", name, b.line)
			lines, err := f(b.text)
			if !assert.NoError(t, err, "%s: the %s block does not read", where, b.lang) {
				continue
			}
			assert.NotEmpty(t, lines, "%s: a %s block that launches no command line", where, b.lang)
			for _, words := range lines {
				found[b.lang]++
				for _, p := range m.checkLaunch(t, words) {
					assert.Fail(t, fmt.Sprintf("%s: %s", where, p))
				}
			}
		}
	}
	t.Logf("editor blocks: %d Lua and %d Emacs Lisp command lines checked", found["lua"], found["elisp"])
}

// TestEditorConfigurationChecksFailStaleOnes shows the extraction of each
// configuration language, and the launch check failing what a stale or
// wrong configuration would launch.
func TestEditorConfigurationChecksFailStaleOnes(t *testing.T) {
	lua, err := luaCommandLines(`require("codecompanion").setup({ -- "a comment", { "x" }
  adapters = { acp = { claude_code = function()
    return require("codecompanion.adapters").extend("claude_code", {
      commands = { default = { "npx", "-y", 'acpcompact', "proxy", "--", "claude-agent-acp" } },
      env = { KEY = "v" },
    }) end } },
})`)
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"npx", "-y", "acpcompact", "proxy", "--", "claude-agent-acp"}}, lua)
	for _, bad := range []string{`{ "npx" `, `x = "open`, `}`} {
		_, err := luaCommandLines(bad)
		assert.Error(t, err, "Lua %q", bad)
	}

	elisp, err := elispCommandLines(`; '("a comment")
(setq agent-shell-anthropic-claude-command
      '("acpcompact" "proxy" "--" "claude-agent-acp"))
(setq other (list "not" "quoted"))`)
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"acpcompact", "proxy", "--", "claude-agent-acp"}}, elisp)
	for _, bad := range []string{`'("open`, `(setq x '("a")`, `)`} {
		_, err := elispCommandLines(bad)
		assert.Error(t, err, "Emacs Lisp %q", bad)
	}

	launches, ok := editorLaunches(`{"acp.agents": {"a": {"command": "npx", "args": ["-y", "acpcompact", "proxy", "--", "x"]}},
		"agents": {"b": {"argv": ["acpcompact", "proxy", "--", "y"]}}, "agent_servers": {"c": {"command": "acpcompact"}}}`)
	require.True(t, ok)
	assert.Equal(t, map[string][]string{
		"acp.agents.a":    {"npx", "-y", "acpcompact", "proxy", "--", "x"},
		"agents.b":        {"acpcompact", "proxy", "--", "y"},
		"agent_servers.c": {"acpcompact"},
	}, launches)
	_, ok = editorLaunches(`{"defaultAgent": "codex"}`)
	assert.False(t, ok, "JSON that configures no agent")

	m := loadModule(t)
	d := m.dist(t)
	for _, tc := range []struct {
		words   []string
		problem string
	}{
		{[]string{"npx", "-y", "acpcompact", "proxy", "--", "claude-agent-acp"}, ""},
		{[]string{"npx", "-y", "acpcompact@" + d.version, "proxy", "--heartbeat=5s", "--", "qwen", "--acp"}, ""},
		{[]string{"acpcompact", "proxy", "--", "claude-agent-acp"}, ""},
		{[]string{"npx", "-y", "acpcompact@0.0.1", "proxy", "--", "a"}, "make dist builds acpcompact@" + d.version},
		{[]string{"npx", "-y", "acpcompat", "proxy", "--", "a"}, "not this project's package"},
		{[]string{"npx", "-y", "@acpcompact/linux-x64", "proxy", "--", "a"}, "install the launcher"},
		{[]string{"npx", "--no-install", "acpcompact", "proxy", "--", "a"}, "no check for the npx flag --no-install"},
		{[]string{"npx", "-y", "acpcompact", "proxy", "--heartbeats", "--", "a"}, "has no flag -heartbeats"},
		{[]string{"acpcompact", "proxy", "claude-agent-acp"}, "an editor launches acpcompact proxy [flags] -- AGENT"},
		{[]string{"acpcompact", "demo"}, "an editor launches acpcompact proxy [flags] -- AGENT"},
		{[]string{"npx", "-y", "acpcompact", "proxy", "--"}, "an editor launches acpcompact proxy [flags] -- AGENT"},
	} {
		probs := strings.Join(m.checkLaunch(t, tc.words), "\n")
		if tc.problem == "" {
			assert.Empty(t, probs, "%q", tc.words)
		} else {
			assert.Contains(t, probs, tc.problem, "%q", tc.words)
		}
	}
}
