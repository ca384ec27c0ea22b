package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/conformance"
)

const auditUsage = `usage: acpcompact audit [--json] FILE

Rebuilds each session's history from an ACP transcript (lines "client <json>"
/ "agent <json>"; FILE "-" reads stdin) and, for every compaction that
carries a summary (a completed compaction_update's summary or chunks, or a
continuation message), prints what the history held that the summary lost:
paths, URLs, commits, checksums, versions, issues, identifiers, error codes,
unanswered requests, open promises, the latest correction. The grammars:
docs/conformance.md, "The preservation audit". --json prints one JSON object
a compaction: {"sessionId","compactionId","form","where","historyItems",
"knownLoss":[{"kind","value","where","role","count"}]}.
Exit status: 0 audited, 2 usage or I/O error.
`

// runAudit implements "acpcompact audit"; args exclude the subcommand name.
func runAudit(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit", auditUsage, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per compaction")
	file, exit, ok := transcriptArg(fs, args, stderr)
	if !ok {
		return exit
	}
	name, in, err := openTranscript(file, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact audit: %v\n", err)
		return 2
	}
	defer in.Close()
	reports, err := auditTranscript(ctxReader{ctx, in}, stderr, name)
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact audit: read %s: %v\n", name, err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range reports {
			if err := enc.Encode(r); err != nil {
				fmt.Fprintf(stderr, "acpcompact audit: %v\n", err)
				return 2
			}
		}
		return 0
	}
	printReports(stdout, name, reports)
	return 0
}

// auditTranscript follows a transcript's messages and returns the audit of
// every compaction with a summary, in order. Malformed lines are reported on
// stderr and skipped, as check skips them.
func auditTranscript(r io.Reader, stderr io.Writer, name string) ([]audit.Report, error) {
	f := audit.NewFollower()
	var out []audit.Report
	err := conformance.NewScanner(r).Each(
		func(l conformance.Line) {
			side := audit.FromAgent
			if l.Dir == conformance.FromClient {
				side = audit.FromClient
			}
			out = append(out, f.Observe(side, fmt.Sprintf("line %d", l.N), l.Raw)...)
		},
		func(le *conformance.LineError) { fmt.Fprintf(stderr, "%s:%d: skipped: %v\n", name, le.N, le.Err) })
	if err != nil {
		return out, err
	}
	return append(out, f.Close()...), nil
}

func printReports(w io.Writer, name string, reports []audit.Report) {
	if len(reports) == 0 {
		fmt.Fprintf(w, "%s: no compaction with a summary\n", name)
		return
	}
	for _, r := range reports {
		what := "compaction " + r.CompactionID
		if r.Form == "continuation" {
			what = "continuation message"
		}
		line := strings.TrimPrefix(r.Where, "line ")
		fmt.Fprintf(w, "%s:%s: session %s, %s: ", name, line, r.SessionID, what)
		switch n := len(r.KnownLoss); {
		case r.HistoryItems == 0:
			fmt.Fprintln(w, "no history before it on this connection")
			continue
		case n == 0:
			fmt.Fprintf(w, "nothing lost (%d history items)\n", r.HistoryItems)
			continue
		case n == 1:
			fmt.Fprintf(w, "1 loss (%d history items)\n", r.HistoryItems)
		default:
			fmt.Fprintf(w, "%d losses (%d history items)\n", n, r.HistoryItems)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, l := range r.KnownLoss {
			fmt.Fprintf(tw, "    %s\t%s\t(%s, %s)\n", l.Kind, oneLine(l.Value), l.Where, l.Role)
		}
		tw.Flush()
	}
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", " ").Replace(s)
}
