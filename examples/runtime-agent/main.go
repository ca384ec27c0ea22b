// Command runtime-agent is an ACP agent that wraps a third-party runtime
// of docker-agent's shape (package runtime: events for compaction started,
// summary, completed and failed, a run stream that may outlive its prompt,
// a history of its own) with acpcompact's kit, which reports its
// compactions live and keeps the session's history, so that session/load
// in a later process replays what the client saw. All of the
// acpcompact-specific code is glue.go and one kit file: under fifty lines
// (docs/agentkit.md, "Mapping your runtime's events").
//
//	runtime-agent --state-dir DIR [--kit acpsdk|jsonrpc2]
//
// It serves one client on stdin and stdout, on coder/acp-go-sdk
// (agentkit/acpsdk, the default: docker-agent's stack) or on
// sourcegraph/jsonrpc2 (agentkit). SIGINT and SIGTERM settle what is open
// before it exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/acpcompact/acpcompact/examples/runtime-agent/runtime"
)

func main() {
	stateDir := flag.String("state-dir", "", "where the sessions are kept (required)")
	kit := flag.String("kit", "acpsdk", "the kit's stack: acpsdk (coder/acp-go-sdk) or jsonrpc2 (sourcegraph/jsonrpc2)")
	flag.Parse()
	if err := run(*stateDir, *kit); err != nil {
		fmt.Fprintln(os.Stderr, "runtime-agent:", err)
		os.Exit(1)
	}
}

func run(stateDir, kit string) error {
	if stateDir == "" {
		return fmt.Errorf("--state-dir is required")
	}
	rt, err := runtime.New(filepath.Join(stateDir, "runtime"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &agent{rt: rt}
	sessions := filepath.Join(stateDir, "sessions")
	var done <-chan struct{}
	var shutdown func(context.Context) error
	switch kit {
	case "acpsdk":
		done, shutdown, err = serveSDK(a, sessions, os.Stdin, os.Stdout)
	case "jsonrpc2":
		done, shutdown, err = serveJSONRPC(a, sessions, stdio{os.Stdin, os.Stdout})
	default:
		return fmt.Errorf("--kit %q: acpsdk or jsonrpc2", kit)
	}
	if err != nil {
		return err
	}
	select {
	case <-done: // the client hung up
	case <-ctx.Done(): // SIGINT, SIGTERM
	}
	return shutdown(context.Background())
}

// stdio is stdin and stdout as one stream.
type stdio struct {
	io.Reader
	io.WriteCloser
}
