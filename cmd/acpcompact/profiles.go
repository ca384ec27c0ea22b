package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/acpcompact/acpcompact/proxy"
)

// printProfiles writes the agent profiles for `acpcompact proxy
// --profiles`: which agent and releases each covers, what they send and
// what the client gets through the proxy.
func printProfiles(w io.Writer) {
	fmt.Fprintln(w, "Agent profiles (picked from the agentInfo of the agent's initialize answer; --profile overrides):")
	for _, p := range proxy.Profiles() {
		seen := strings.Join(p.Seen, ", ")
		if seen == "" {
			seen = "none; built from release notes"
		}
		var trs []string
		for _, t := range p.Translators {
			trs = append(trs, string(t))
		}
		if len(trs) == 0 {
			trs = []string{"none"}
		}
		fmt.Fprintf(w, "\n%s\n", p.Name)
		fmt.Fprintf(w, "  agent:       %s, versions %s (recorded: %s)\n", p.Agent, p.Range, seen)
		fmt.Fprintf(w, "  translators: %s\n", strings.Join(trs, ", "))
		fmt.Fprintf(w, "  sends:       %s\n", wrap(p.Sends, 15))
		fmt.Fprintf(w, "  client gets: %s\n", wrap(p.Gets, 15))
	}
	fmt.Fprintln(w, "\nAn agent without a profile gets the universal rules only: the capability gate, the settlement of the")
	fmt.Fprintln(w, "standard updates it saw start, one terminal update per compaction, nothing outside a turn; name")
	fmt.Fprintln(w, "translators with --translate to read its legacy signals. A release newer than the last one seen")
	fmt.Fprintln(w, "gets its agent's newest profile, and the log says so.")
}

// wrap breaks s into lines of about 90 columns, indenting the following
// ones by indent.
func wrap(s string, indent int) string {
	const width = 90
	var b strings.Builder
	col := indent
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if col+1+len(word) > width {
				b.WriteString("\n" + strings.Repeat(" ", indent))
				col = indent
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}
