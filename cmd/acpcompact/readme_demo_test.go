package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeDemoExcerpt checks the demo excerpt of README.md ("## The
// demo") against a real run of `acpcompact demo`: the excerpt is the
// output with elisions, so each run of its lines between "..." lines is a
// run of consecutive output lines, in the excerpt's order. Session IDs and
// pids differ per run; each is numbered by its first appearance, so the
// excerpt must still show the same session where the output does, and a
// new process where the output has one.
func TestReadmeDemoExcerpt(t *testing.T) {
	excerpt, line := readmeDemoExcerpt(t)
	r := demoRun(t)
	require.Equal(t, 0, r.code, "demo: exit code\nstderr:\n%s", r.stderr)
	out := normaliseDemo(r.stdout)
	want := normaliseDemo(excerpt)
	pos := 0 // output lines before pos are used up
	for i := 0; i < len(want); {
		if strings.TrimSpace(want[i]) == "..." {
			i++
			continue
		}
		j := i
		for j < len(want) && strings.TrimSpace(want[j]) != "..." {
			j++
		}
		run := want[i:j]
		at, n := longestMatch(out[pos:], run)
		if n < len(run) {
			got := "(the output ends)"
			if at >= 0 && pos+at+n < len(out) {
				got = fmt.Sprintf("%q", out[pos+at+n])
			}
			if at < 0 {
				got = "(no output line from here on matches the line)"
			}
			require.FailNow(t, fmt.Sprintf("README.md:%d: the excerpt's %q is not the demo's output", line+1+i+n, run[n]),
				"there it prints %s\n(session IDs and pids numbered as below)\noutput:\n%s", got, strings.Join(out, "\n"))
		}
		pos += at + len(run)
		i = j
	}
}

// readmeDemoExcerpt returns the unlabelled block of README.md's "## The
// demo" that starts with client A's heading, and the line of its fence.
func readmeDemoExcerpt(t *testing.T) (string, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err, "os.ReadFile")
	md := string(b)
	start := strings.Index(md, "\n## The demo\n")
	require.GreaterOrEqual(t, start, 0, `README.md has no section "## The demo"`)
	sec := md[start:]
	if end := strings.Index(sec[1:], "\n## "); end >= 0 {
		sec = sec[:end+1]
	}
	const open = "\n```\nClient A  ("
	i := strings.Index(sec, open)
	require.GreaterOrEqual(t, i, 0, `README.md's "## The demo" has no unlabelled block starting "Client A  ("`)
	body := sec[i+len("\n```\n"):]
	j := strings.Index(body, "\n```\n")
	require.GreaterOrEqual(t, j, 0, "README.md: the demo excerpt's block does not end")
	line := strings.Count(md[:start+i+1], "\n") + 1
	return body[:j], line
}

var (
	sessionID = regexp.MustCompile(`\bsess_[0-9a-f]+\b`)
	pid       = regexp.MustCompile(`\bpid \d+\b`)
)

// normaliseDemo splits text into lines, right-trimmed, with each distinct
// session ID replaced by sess_<n> and each pid by pid <n>, n counting
// from 1 in order of first appearance.
func normaliseDemo(text string) []string {
	number := func(re *regexp.Regexp, prefix string) func(string) string {
		seen := map[string]int{}
		return func(s string) string {
			return re.ReplaceAllStringFunc(s, func(x string) string {
				if seen[x] == 0 {
					seen[x] = len(seen) + 1
				}
				return fmt.Sprintf("%s<%d>", prefix, seen[x])
			})
		}
	}
	sess, proc := number(sessionID, "sess_"), number(pid, "pid ")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, ln := range lines {
		lines[i] = proc(sess(strings.TrimRight(ln, " \t")))
	}
	return lines
}

// longestMatch returns where in out the longest prefix of run starts and
// its length; -1 and 0 when not even run's first line is in out. Of equal
// prefixes it takes the one followed by the line most like run's next, so
// that a failure shows the line the excerpt got wrong.
func longestMatch(out, run []string) (at, n int) {
	at, like := -1, -1
	for s := range out {
		k := 0
		for k < len(run) && s+k < len(out) && out[s+k] == run[k] {
			k++
		}
		if k == 0 {
			continue
		}
		l := 0
		if k < len(run) && s+k < len(out) {
			l = commonPrefix(out[s+k], run[k])
		}
		if k > n || k == n && l > like {
			at, n, like = s, k, l
			if n == len(run) {
				break
			}
		}
	}
	return at, n
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
