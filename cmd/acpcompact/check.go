package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema"
)

const checkUsage = `usage: acpcompact check [--schema=auto|on|off] [--strict-replay] [--html OUT] FILE

Checks an ACP transcript (lines "client <json>" / "agent <json>"; FILE "-"
reads stdin) for the agent's compaction obligations and prints each
violation as FILE:LINE: rule: message. Exit status: 0 clean, 1 violations,
2 usage or I/O error.

--html OUT also writes the transcript as the timeline a client shows, one
self-contained HTML file (no script, nothing fetched): per connection the
negotiated version and capability, per session the messages, tool calls and
each compaction updated in place with its updates, summary, record and known
loss, and each violation at its line. OUT "-" writes the page to stdout and
the violations to stderr.
`

// runCheck implements "acpcompact check"; args exclude the subcommand name.
func runCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runCheckWith(ctx, args, stdin, stdout, stderr, schemaOption)
}

// runCheckWith takes the schema loader as a parameter because acpschema
// caches validators per process, so a test cannot make an installed schema
// disappear any other way.
func runCheckWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer,
	loadSchema func() (conformance.Option, error)) int {
	fs := newFlagSet("check", checkUsage+schemaUsage(), stderr)
	schemaMode := fs.String("schema", "auto",
		"validate agent session/update messages against the official ACP schema: auto (when installed, else say so on stderr), on (fail without it), off")
	strictReplay := fs.Bool("strict-replay", false,
		"hold history replays to terminal-first (one terminal compaction_update per compaction, this project's own rule); the RFD also allows a replay that re-streams")
	htmlOut := fs.String("html", "",
		"also write the timeline a client shows to `out`, one self-contained HTML file (- for stdout; the violations then go to stderr)")
	file, exit, ok := transcriptArg(fs, args, stderr)
	if !ok {
		return exit
	}
	var opts []conformance.Option
	if *strictReplay {
		opts = append(opts, conformance.WithStrictReplay())
	}
	switch *schemaMode {
	case "off":
	case "auto", "on":
		opt, err := loadSchema()
		switch {
		case err == nil:
			opts = append(opts, opt)
		case *schemaMode == "on":
			fmt.Fprintf(stderr, "acpcompact check: --schema=on: %s\n", schemaProblem(err))
			if fix := schemaFix(err); fix != "" {
				fmt.Fprintf(stderr, "acpcompact check: %s\n", fix)
			}
			return 2
		default:
			fmt.Fprintf(stderr, "acpcompact check: schema validation off, checking the lifecycle rules only: %s\n", schemaProblem(err))
			if fix := schemaFix(err); fix != "" {
				fmt.Fprintf(stderr, "acpcompact check: %s; or pass --schema=off to silence this\n", fix)
			}
		}
	default:
		fmt.Fprintf(stderr, "acpcompact check: --schema must be auto, on or off, not %q\n", *schemaMode)
		return 2
	}

	name, in, err := openTranscript(file, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact check: %v\n", err)
		return 2
	}
	defer in.Close()

	var (
		vs   []conformance.Violation
		tl   *timeline
		page = stdout
	)
	if *htmlOut == "" {
		vs, err = conformance.CheckTranscript(ctxReader{ctx, in}, opts...)
	} else {
		tl = newTimeline()
		vs, err = tl.check(ctxReader{ctx, in}, opts...)
		if *htmlOut == "-" {
			stdout = stderr // the page has stdout
		}
	}
	for _, v := range vs {
		fmt.Fprintf(stdout, "%s:%d: %s: %s\n", name, v.Line, v.Rule, v.Message)
	}
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact check: read %s: %v\n", name, err)
		return 2
	}
	fmt.Fprintln(stdout, summary(name, vs))
	if tl != nil {
		if err := writeTimeline(tl, *htmlOut, page, name, vs); err != nil {
			fmt.Fprintf(stderr, "acpcompact check: --html: %v\n", err)
			return 2
		}
	}
	if len(vs) > 0 {
		return 1
	}
	return 0
}

// writeTimeline writes the page to the file out, or to stdout for "-". A
// file is written whole or not at all: to a temporary file beside it, then
// renamed over it.
func writeTimeline(tl *timeline, out string, stdout io.Writer, name string, vs []conformance.Violation) error {
	if out == "-" {
		return tl.writeHTML(stdout, name, vs)
	}
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	if err := tl.writeHTML(f, name, vs); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

func schemaOption() (conformance.Option, error) {
	v1, err := acpschema.For(1)
	if err != nil {
		return nil, err
	}
	v2, err := acpschema.For(2)
	if err != nil {
		return nil, err
	}
	return conformance.WithSchema(v1, v2), nil
}

// summary counts violations per rule so a long report ends with its gist.
func summary(name string, vs []conformance.Violation) string {
	if len(vs) == 0 {
		return name + ": ok, no violations"
	}
	counts := map[conformance.Rule]int{}
	for _, v := range vs {
		counts[v.Rule]++
	}
	rules := make([]string, 0, len(counts))
	for r, n := range counts {
		rules = append(rules, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(rules)
	noun := "violations"
	if len(vs) == 1 {
		noun = "violation"
	}
	return fmt.Sprintf("%s: %d %s (%s)", name, len(vs), noun, strings.Join(rules, ", "))
}

// ctxReader stops a long check when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
