package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/acpcompact/acpcompact/internal/scenario"
)

// demoAgentCommand is the subcommand the demo re-executes this program
// with, to load a session in a new agent process. It is not listed in the
// usage: it serves the demo only.
const demoAgentCommand = "demo-agent"

// runDemoAgent serves one ACP connection on stdin/stdout with the scenario
// agent on a state directory, until the end of stdin.
func runDemoAgent(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(demoAgentCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("state-dir", "", "the state directory the demo's first agent wrote (required)")
	fb := fs.String("fallback", scenario.DefaultFallback, "the form a client without the capability gets")
	verbose := fs.Bool("verbose", false, "log to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "usage: acpcompact %s --state-dir DIR [--fallback NAME] [--verbose]\n", demoAgentCommand)
		return 2
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("pid", os.Getpid())
	}
	a, err := scenario.New(scenario.Config{Fallback: *fb, Logger: logger, StateDir: *dir, Audit: true})
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact %s: %v\n", demoAgentCommand, err)
		return 2
	}
	err = a.Serve(ctx, duplex{stdin, stdout})
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact %s: %v\n", demoAgentCommand, err)
		return 1
	}
	return 0
}

// duplex joins a reader and a writer into one connection: the agent's
// stdin and stdout in demo-agent, the new agent process's stdout and stdin
// in the demo's client.
type duplex struct {
	r io.Reader
	w io.Writer
}

func (d duplex) Read(p []byte) (int, error)  { return d.r.Read(p) }
func (d duplex) Write(p []byte) (int, error) { return d.w.Write(p) }

// Close closes the writer, which tells the peer this end is gone; the
// reader is left to its owner (the process, or exec.Cmd.Wait).
func (d duplex) Close() error {
	if c, ok := d.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
