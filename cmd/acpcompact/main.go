// Command acpcompact is the project's toolbox: `demo` shows compaction
// reporting end to end, `check` verifies an agent's recorded transcript
// against the RFD's obligations, `audit` says what each compaction's summary
// lost of the history it replaced, `proxy` gives third-party agent CLIs
// standard compaction updates, and `version` says which release it is.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: acpcompact <command> [flags] [args]

commands:
  demo     run the scenario agent against in-process clients and print the timeline
  check    check an ACP transcript (client/agent lines) for compaction conformance
  audit    say what each compaction's summary lost of the history it replaced
  proxy    run an ACP agent behind a proxy that fixes its compaction reporting
  version  print the version of this binary
  help     print this help

Run 'acpcompact <command> -h' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], stdin, stdout, stderr)
	case "check":
		return runCheck(ctx, args[1:], stdin, stdout, stderr)
	case "audit":
		return runAudit(ctx, args[1:], stdin, stdout, stderr)
	case "proxy":
		return runProxy(ctx, args[1:], stdin, stdout, stderr)
	case "version":
		return runVersion(ctx, args[1:], stdin, stdout, stderr)
	case demoAgentCommand: // the demo's new agent process; not listed
		return runDemoAgent(ctx, args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "acpcompact: unknown command %q\n\n%s", args[0], usage)
	return 2
}
