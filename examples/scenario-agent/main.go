// Command scenario-agent is an ACP agent that reports context compaction on
// cue, for trying clients and the acpcompact library against every
// compaction lifecycle: `/compact`, `/compact fail`, `/compact slow`,
// `/compact hang` and more (see package scenario for the list). It speaks
// ACP (JSON-RPC 2.0, one message a line) on stdin and stdout, v1 or, when
// the client asks for it, v2, and logs to stderr.
//
// Usage:
//
//	scenario-agent [flags]
//
// Flags:
//
//	--fallback NAME          what a v1 client without the compaction capability
//	                         sees: text, marker, opencode-marker, toolcall or none
//	                         (default toolcall)
//	--cancel-grace D         after session/cancel, how long the runtime may take
//	                         to report before the kit settles its compactions as
//	                         cancelled (default 5s; 0: at once; negative: at the
//	                         turn's end)
//	--compaction-timeout D   watchdog: a compaction open this long fails
//	                         (default 30s; 0 disables it)
//	--heartbeat D            re-send in_progress after this much silence
//	                         (default 10s; 0 disables it)
//	--auto-compact-every N   every Nth ordinary prompt first compacts
//	                         automatically (default 0, off)
//	--log-level LEVEL        debug, info, warn or error (default info)
//	--state-dir DIR          keep each session in a file of DIR, so that
//	                         session/load in a later process replays it
//	                         (default: acpcompact/scenario-agent in the user's
//	                         state directory, scenario.DefaultStateDir:
//	                         $XDG_STATE_HOME or ~/.local/state on Linux);
//	                         --state-dir= (empty) keeps sessions in memory only
//
// Each session is a file DIR/<session ID>.jsonl (package sessionlog): its
// messages and its compactions' records, appended as they happen.
// session/load replays a session of this process, or of an earlier one
// from its file; a compaction that an earlier process did not live to
// settle (SIGKILL during /compact slow) replays as failed, "the agent
// stopped before the compaction finished", never in_progress. A file that
// is corrupt, or not a session file at all, fails that session/load with
// a JSON-RPC error naming the file and the line; the agent serves its
// other sessions as before. session/close ends a session in this process;
// its file stays, to be loaded again. Several agents may share DIR (two
// editor windows): a session is served by one process at a time, and
// another process's session/load of it fails at once with an error that
// names the file, until the first closes the session or exits.
//
// SIGINT or SIGTERM shuts the agent down (agentkit's Kit.Shutdown): every
// compaction still open is settled (failed, "connection closed", or
// cancelled in a turn the client cancelled) and written to stdout before
// the process exits, within 5 s for a client that does not read; a second
// signal ends it at once. At the end of stdin the agent first answers the
// requests it has read (for at most 5 s), then settles and exits the same
// way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/scenario"
)

func main() {
	// SIGINT (Ctrl-C reaches the agent with its client) or SIGTERM ends ctx,
	// and run shuts the agent down; a second signal then ends the process
	// at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses flags and serves one ACP connection on stdin/stdout until the
// client hangs up or ctx ends. It returns the exit code.
func run(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenario-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: scenario-agent [flags]\n\nAn ACP agent on stdin/stdout that reports context compaction on cue\n(/compact, /compact fail, /compact slow, /compact hang, ...).\n\n")
		fs.PrintDefaults()
	}
	fb := fs.String("fallback", scenario.DefaultFallback,
		"what a v1 client without the compaction capability sees: "+strings.Join(fallback.Names(), ", "))
	grace := fs.Duration("cancel-grace", scenario.DefaultCancelGrace,
		"after session/cancel, how long the runtime may take to report before its compactions are settled as cancelled (0: at once; negative: at the end of the turn)")
	timeout := fs.Duration("compaction-timeout", scenario.DefaultCompactionTimeout,
		"a compaction still open after this long is settled as failed (0 disables the watchdog)")
	heartbeat := fs.Duration("heartbeat", scenario.DefaultHeartbeat,
		"re-send in_progress for a compaction silent this long (0 disables it)")
	every := fs.Int("auto-compact-every", 0, "every Nth ordinary prompt of a session first runs an automatic compaction (0: never)")
	auditOn := fs.Bool("audit", false, "audit each compaction's summary against the session's history and name what it lost in the compaction's record (knownLoss)")
	level := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	defaultDir, dirErr := scenario.DefaultStateDir()
	stateDir := fs.String("state-dir", defaultDir,
		"keep each session in a file of this directory, for session/load in a later process (empty: in memory only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scenario-agent: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "scenario-agent: --log-level: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	if *stateDir == "" && dirErr != nil {
		logger.Warn("no state directory: sessions live in memory only; pass --state-dir", "error", dirErr)
	}

	cfg := scenario.Config{
		Fallback:          *fb,
		CancelGrace:       grace, // the flag means what the Config means: 0 is "at once"
		CompactionTimeout: flagOff(*timeout),
		Heartbeat:         flagOff(*heartbeat),
		AutoCompactEvery:  *every,
		Logger:            logger,
		StateDir:          *stateDir,
		Audit:             *auditOn,
	}
	a, err := scenario.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "scenario-agent: %v\n", err)
		return 2
	}
	logger.Info("scenario-agent serving ACP on stdin/stdout", "fallback", cfg.Fallback, "cancelGrace", *grace,
		"compactionTimeout", *timeout, "heartbeat", *heartbeat, "autoCompactEvery", *every, "stateDir", *stateDir)
	served := make(chan error, 1)
	go func() { served <- a.Serve(context.Background(), stdio{stdin, stdout}) }()
	select {
	case err = <-served: // the client hung up; Serve has settled and written what was open
	case <-ctx.Done():
		// Settle every open compaction and write it before exiting, within
		// agentkit.CloseTimeout for a client that does not read.
		logger.Info("scenario-agent shutting down", "cause", context.Cause(ctx))
		sctx, cancel := context.WithTimeout(context.Background(), agentkit.CloseTimeout)
		if err := a.Shutdown(sctx); err != nil {
			logger.Warn("shutdown: output not fully written", "error", err)
		}
		cancel()
		select {
		case err = <-served: // its handlers have returned
		case <-time.After(handlerGrace):
			logger.Warn("shutdown: handlers still running; exiting anyway")
		}
	}
	if cerr := a.Close(); cerr != nil {
		logger.Warn("state directory: session files not closed cleanly", "error", cerr)
	}
	if err != nil {
		logger.Error("scenario-agent stopped", "error", err)
		return 1
	}
	return 0
}

// handlerGrace bounds the wait for the handlers after Shutdown, which has
// ended their contexts and written everything: they return at once unless
// one is stuck.
const handlerGrace = 2 * time.Second

// flagOff maps a flag's 0 ("off") to the Config's negative value; Config
// reads zero as "default".
func flagOff(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// stdio is the agent's end of the connection.
type stdio struct {
	in  io.ReadCloser
	out io.WriteCloser
}

func (s stdio) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s stdio) Write(p []byte) (int, error) { return s.out.Write(p) }

// Close closes stdout, which tells the client the agent is gone, then
// stdin.
func (s stdio) Close() error {
	werr := s.out.Close()
	rerr := s.in.Close()
	if werr != nil {
		return werr
	}
	return rerr
}
