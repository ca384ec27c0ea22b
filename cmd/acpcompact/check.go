package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema"
)

const checkUsage = `usage: acpcompact check [--schema=auto|on|off] [--strict-replay] FILE

Checks an ACP transcript (lines "client <json>" / "agent <json>"; FILE "-"
reads stdin) for the agent's compaction obligations and prints each
violation as FILE:LINE: rule: message. Exit status: 0 clean, 1 violations,
2 usage or I/O error.
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
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, checkUsage+schemaUsage())
		fs.PrintDefaults()
	}
	schemaMode := fs.String("schema", "auto",
		"validate agent session/update messages against the official ACP schema: auto (when installed, else say so on stderr), on (fail without it), off")
	strictReplay := fs.Bool("strict-replay", false,
		"hold history replays to terminal-first (one terminal compaction_update per compaction, this project's own rule); the RFD also allows a replay that re-streams")
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "acpcompact check: want exactly one FILE (or - for stdin)")
		fs.Usage()
		return 2
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

	name, in := files[0], stdin
	if name == "-" {
		name = "<stdin>"
	} else {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "acpcompact check: %v\n", err)
			return 2
		}
		defer f.Close()
		in = f
	}

	vs, err := conformance.CheckTranscript(ctxReader{ctx, in}, opts...)
	for _, v := range vs {
		fmt.Fprintf(stdout, "%s:%d: %s: %s\n", name, v.Line, v.Rule, v.Message)
	}
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact check: read %s: %v\n", name, err)
		return 2
	}
	fmt.Fprintln(stdout, summary(name, vs))
	if len(vs) > 0 {
		return 1
	}
	return 0
}

// parseInterspersed lets flags follow the file name too ("check x.jsonl
// --schema=off"), which the flag package alone stops parsing at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
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
