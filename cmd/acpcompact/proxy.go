package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
)

const proxyUsage = `usage: acpcompact proxy [flags] -- AGENT [ARGS...]

Runs AGENT, an ACP agent speaking JSON-RPC over stdio, and carries the
editor's connection to it unchanged except for context compaction, which it
makes correct: legacy signals become standard compaction updates for
clients that support them, standard updates never reach clients that do
not, and every compaction the client saw start is settled before the turn
ends. Configure the editor to launch this command in place of the agent.

SIGINT, SIGTERM and SIGHUP are forwarded to AGENT; on SIGTERM and SIGHUP
the compactions the editor saw start are settled before the proxy exits.

Exit status: the agent's (128+N when signal N ended it); 141 when the
editor went away (a write to it failed); 2 for a usage error; 126 or 127
when AGENT cannot be started.

flags:
`

// Process timing of the proxy command (see docs/proxy.md, "Signals, pipes
// and exit"). Each is a bound on a wait, so that neither a hung agent nor
// a client that stopped reading keeps the proxy alive.
const (
	// termSettle is how long the agent's output may stay open after
	// SIGTERM or SIGHUP before the proxy settles what is open for the
	// client and stops carrying the connection: acpx, for one, kills 1.5 s
	// after its SIGTERM.
	termSettle = time.Second
	// drainGrace is how long, after the agent exited, its output may stay
	// open (a grandchild holding it), or the client may go without
	// reading any of it, before the proxy stops carrying the connection.
	drainGrace = 2 * time.Second
	// exitGrace is how long the agent may take to exit on its own once
	// its connection has ended (its output closed, or the client went
	// away) before it gets SIGTERM.
	exitGrace = 2 * time.Second
	// killGrace is how long the agent has to exit after SIGTERM (the
	// proxy's own or a forwarded one), SIGHUP or SIGINT before it is
	// killed.
	killGrace = 5 * time.Second
	// stopTimeout is how long, once the proxy stops carrying the
	// connection, a write to a client that does not read is waited for
	// before the client's output is abandoned (proxy.WithStopTimeout).
	stopTimeout = 2 * time.Second
)

// runProxy implements "acpcompact proxy"; args exclude the subcommand name.
func runProxy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("proxy", proxyUsage, stderr)
	all := make([]string, 0, len(proxy.Translators()))
	for _, t := range proxy.Translators() {
		all = append(all, string(t))
	}
	translate := fs.String("translate", "",
		"comma-separated legacy signals to translate for every agent, on top of its profile's (all: every one): "+strings.Join(all, ", "))
	noTranslate := fs.String("no-translate", "", "comma-separated legacy signals to leave untouched, even where the agent's profile reads them")
	profileName := fs.String("profile", "auto",
		"the agent profile: auto (from the agent's agentInfo), none (the universal rules only), or a name that --profiles lists")
	listProfiles := fs.Bool("profiles", false, "list the agent profiles (what each agent sends, what the client gets) and exit")
	heartbeat := fs.Duration("heartbeat", proxy.DefaultHeartbeat,
		"re-send the progress of an open compaction after this much silence from the agent, so client watchdogs see life (0: never)")
	summaries := fs.String("summaries", "agent",
		"which summaries reach the client: agent (those the agent sent as summaries) or all (also the one the proxy reads from Claude's continuation message on session/load)")
	fallbackName := fs.String("fallback", "",
		"how a v1 client without the compaction capability sees compaction: "+strings.Join(fallback.Names(), ", ")+
			" (default: the agent's legacy signals untouched, and standard updates rewritten as a toolcall)")
	var check checkMode
	fs.Var(&check, "check", "also check the live connection for compaction conformance and log violations: "+
		"--check or --check=agent checks what the agent sends, --check=client what the client receives")
	auditOn := fs.Bool("audit", false, "audit each summary a compaction completes with against the session's history as the client received it, and send what it lost in the compaction's record (knownLoss under _meta's record key)")
	logLevel := fs.String("log-level", "info", "log level of the proxy's own messages on stderr: debug, info, warn, error")
	cancelGrace := fs.Duration("cancel-grace", proxy.DefaultCancelGrace,
		"how long after session/cancel the agent may take to settle the cancelled turn's compactions before the proxy settles them as cancelled, "+
			"even if the agent hangs (0: at once; negative: at the end of the turn)")

	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if *listProfiles {
		printProfiles(stdout)
		return 0
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "acpcompact proxy: missing the agent command (acpcompact proxy [flags] -- AGENT [ARGS...])")
		fs.Usage()
		return 2
	}

	errOut := &syncWriter{w: stderr}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "acpcompact proxy: --log-level: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{
		Level: level,
		// The editor's log already stamps the time of each stderr line.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})).With("src", "acpcompact-proxy")

	on, err := proxy.ParseTranslators(*translate)
	var off []proxy.Translator
	if err == nil {
		off, err = proxy.ParseTranslators(*noTranslate)
	}
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact proxy: %v\n", err)
		return 2
	}
	var summaryPolicy emitter.SummaryPolicy
	switch *summaries {
	case "agent":
	case "all":
		summaryPolicy = emitter.AllSummaries
	default:
		fmt.Fprintf(stderr, "acpcompact proxy: --summaries: %q is neither agent nor all\n", *summaries)
		return 2
	}
	opts := []proxy.Option{
		proxy.WithTranslators(on...),
		proxy.WithoutTranslators(off...),
		proxy.WithProfile(*profileName),
		proxy.WithHeartbeat(*heartbeat),
		proxy.WithSummaryPolicy(summaryPolicy),
		proxy.WithLogger(logger),
		proxy.WithCancelGrace(*cancelGrace),
		proxy.WithStopTimeout(stopTimeout),
	}
	if *auditOn {
		opts = append(opts, proxy.WithAudit())
	}
	if *fallbackName != "" {
		r, err := fallback.ByName(*fallbackName)
		if err != nil {
			fmt.Fprintf(stderr, "acpcompact proxy: --fallback: %v\n", err)
			return 2
		}
		opts = append(opts, proxy.WithFallback(r))
	}
	var counter *countingChecker
	if check.on {
		var copts []conformance.Option
		if opt, err := loadSchema(); err == nil {
			copts = append(copts, opt)
		} else {
			args := []any{"reason", schemaProblem(err)}
			if fix := schemaFix(err); fix != "" {
				args = append(args, "fix", fix)
			}
			logger.Warn("--check: schema validation off, checking the lifecycle rules only", args...)
		}
		counter = &countingChecker{Checker: conformance.NewChecker(copts...), rules: map[conformance.Rule]int{}}
		opts = append(opts, proxy.WithChecker(counter, check.which))
	}
	px, err := proxy.New(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact proxy: %v\n", err)
		return 2
	}

	code := superviseAgent(ctx, px, argv, stdin, stdout, errOut, logger)
	if counter != nil {
		fmt.Fprintf(errOut, "acpcompact proxy: --check=%s: %s\n", check.which, counter.summary())
	}
	return code
}

// superviseAgent runs the agent process with the proxy between it and the
// client, forwards SIGINT, SIGTERM and SIGHUP to it, and returns its exit
// code.
func superviseAgent(ctx context.Context, px *proxy.Proxy, argv []string, stdin io.Reader, stdout io.Writer, stderr io.Writer, logger *slog.Logger) int {
	// Signals are caught before the agent starts so that none is lost
	// between the start and the forwarding loop.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// A write to a client that closed its read end then fails with EPIPE,
	// and the proxy takes its client-gone path, instead of dying of
	// SIGPIPE (the Go runtime's default for stdout). Caught, not ignored:
	// an ignored SIGPIPE would be inherited by the agent.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	// Plain pipes rather than exec's: Wait must not close the agent's
	// output before the proxy has read and settled all of it.
	inR, inW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact proxy: %v\n", err)
		return 126
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		fmt.Fprintf(stderr, "acpcompact proxy: %v\n", err)
		return 126
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.WaitDelay = drainGrace
	if f, ok := stderr.(*syncWriter); ok {
		if file, ok := f.w.(*os.File); ok {
			// The agent writes its stderr straight to ours, unbuffered.
			cmd.Stderr = file
		}
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		fmt.Fprintf(stderr, "acpcompact proxy: cannot start the agent: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}

	out := &progressWriter{w: stdout}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	// Not an errgroup: neither end may end the other at once. The agent's
	// exit, even a failed one, leaves the client its output to read
	// (drainGrace); the end of the connection leaves the agent exitGrace
	// to exit on its own; and the outcome is the agent's exit status (or
	// 141), not the first error. The loop below is that state machine.
	runDone := make(chan error, 1)
	go func() { runDone <- px.Run(runCtx, stdin, out, inW, outR) }()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var (
		settleTimer, drainTimer, exitTimer, killTimer <-chan time.Time
		ctxDone                                       = ctx.Done()
		signalled                                     bool
		runOver, exited                               bool
		runErr                                        error
		clientGone                                    bool
		drained                                       int64 // bytes the client had read when drainTimer was set
	)
	// armKill kills the agent killGrace from now unless it has exited.
	armKill := func() {
		if killTimer == nil && !exited {
			killTimer = time.After(killGrace)
		}
	}
	// terminate sends the agent the proxy's own SIGTERM.
	terminate := func() {
		if killTimer == nil && !exited {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			armKill()
		}
	}
	// endConnection begins the end of the connection: what is open is
	// settled for the client (the connection closed) when the agent's
	// output ends, or termSettle from now.
	endConnection := func() {
		px.Terminating()
		if !runOver && settleTimer == nil {
			settleTimer = time.After(termSettle)
		}
	}
	onSignal := func(s os.Signal) {
		signalled = true
		if s != os.Interrupt {
			// SIGTERM, SIGHUP: the proxy is to end. SIGINT (Ctrl-C in a
			// terminal, which reaches the client too) leaves the
			// connection open, so that the client can still cancel the
			// turn and read the answer. Marked before the signal goes
			// on: an agent that exits at once ends its output, and what
			// is open must then be settled as the connection closing,
			// not as the agent crashing.
			endConnection()
		}
		logger.Debug("forwarding signal to the agent", "signal", s.String())
		_ = cmd.Process.Signal(s)
		armKill()
	}
	for !runOver || !exited {
		select {
		case s := <-sigs:
			onSignal(s)
		case <-ctxDone:
			ctxDone = nil
			// The caller's context usually ends because of the very
			// signal being forwarded (main's signal.NotifyContext); give
			// it a moment to arrive before terminating the agent.
			select {
			case s := <-sigs:
				onSignal(s)
			case <-time.After(50 * time.Millisecond):
			}
			if !signalled {
				endConnection()
				terminate()
			}
		case <-settleTimer:
			settleTimer = nil
			if !runOver {
				logger.Info("the agent's output is still open after the signal; settling for the client", "after", termSettle)
				cancelRun()
			}
		case <-drainTimer:
			drainTimer = nil
			if runOver {
				break
			}
			if n := out.written(); n != drained {
				// The client still reads what the agent left.
				drained, drainTimer = n, time.After(drainGrace)
				break
			}
			logger.Info("the agent exited, and its output stays open or the client does not read it; stopping", "after", drainGrace)
			cancelRun()
		case <-exitTimer:
			exitTimer = nil
			logger.Info("the agent did not exit after its connection ended; terminating it", "after", exitGrace)
			terminate()
		case <-killTimer:
			killTimer = nil
			logger.Warn("the agent did not exit in time; killing it", "grace", killGrace)
			_ = cmd.Process.Kill()
		case runErr = <-runDone:
			runOver = true
			inW.Close()
			// The client sees the end of the output now, not when the
			// agent exits.
			if cl, ok := stdout.(io.Closer); ok {
				_ = cl.Close()
			}
			switch {
			case exited:
			case errors.Is(runErr, proxy.ErrClientClosed):
				clientGone = true
				logger.Info("the client went away; stopping the agent")
				terminate()
			case killTimer == nil:
				exitTimer = time.After(exitGrace)
			}
		case <-waitDone:
			exited = true
			killTimer, exitTimer = nil, nil
			if !runOver {
				drained, drainTimer = out.written(), time.After(drainGrace)
			}
		}
	}
	outR.Close()
	if runErr != nil && !errors.Is(runErr, proxy.ErrClientClosed) && !errors.Is(runErr, os.ErrClosed) && !errors.Is(runErr, context.Canceled) {
		logger.Debug("proxy stopped", "error", runErr)
	}
	if clientGone || errors.Is(runErr, proxy.ErrClientClosed) {
		// What a process killed by SIGPIPE reports, as every filter whose
		// reader went away does; the proxy does not die of it.
		return 128 + int(syscall.SIGPIPE)
	}
	return exitCode(cmd.ProcessState)
}

// progressWriter counts the bytes written to the client, in writes of at
// most a pipe's capacity, so that even a long line reaching a client that
// reads slowly shows progress.
type progressWriter struct {
	w io.Writer
	n atomic.Int64
}

const pipeCapacity = 64 << 10

func (p *progressWriter) Write(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		k := min(len(b), pipeCapacity)
		n, err := p.w.Write(b[:k])
		total += n
		p.n.Add(int64(n))
		if err != nil {
			return total, err
		}
		b = b[k:]
	}
	return total, nil
}

// SetWriteDeadline passes a deadline on to a writer that has them, so
// that the proxy can cut short a write to a client that does not read.
func (p *progressWriter) SetWriteDeadline(t time.Time) error {
	if d, ok := p.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return os.ErrNoDeadline
}

func (p *progressWriter) written() int64 { return p.n.Load() }

// exitCode passes the agent's status on, shell style for a signal.
func exitCode(st *os.ProcessState) int {
	if st == nil {
		return 1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// checkMode is the --check flag: a bool flag that also takes a value.
type checkMode struct {
	on    bool
	which proxy.Checked
}

func (m *checkMode) String() string {
	if m == nil || !m.on {
		return ""
	}
	return m.which.String()
}

func (m *checkMode) Set(s string) error {
	switch strings.ToLower(s) {
	case "true", "agent":
		m.on, m.which = true, proxy.CheckAgent
	case "client":
		m.on, m.which = true, proxy.CheckClient
	case "false", "off":
		m.on = false
	default:
		return fmt.Errorf("want agent or client, not %q", s)
	}
	return nil
}

// IsBoolFlag lets --check stand alone.
func (m *checkMode) IsBoolFlag() bool { return true }

// countingChecker counts violations by rule for the exit summary, in
// constant memory however long the session.
type countingChecker struct {
	*conformance.Checker
	mu    sync.Mutex
	rules map[conformance.Rule]int
	total int
}

func (c *countingChecker) Observe(dir conformance.Direction, line int, raw json.RawMessage) []conformance.Violation {
	return c.count(c.Checker.Observe(dir, line, raw))
}

func (c *countingChecker) Close() []conformance.Violation { return c.count(c.Checker.Close()) }

func (c *countingChecker) count(vs []conformance.Violation) []conformance.Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range vs {
		c.rules[v.Rule]++
		c.total++
	}
	return vs
}

func (c *countingChecker) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total == 0 {
		return "ok, no violations"
	}
	rules := make([]string, 0, len(c.rules))
	for r, n := range c.rules {
		rules = append(rules, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(rules)
	return fmt.Sprintf("%d violations (%s)", c.total, strings.Join(rules, ", "))
}

// syncWriter serializes the proxy's log lines with the agent's stderr when
// both share a writer that is not a file.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
