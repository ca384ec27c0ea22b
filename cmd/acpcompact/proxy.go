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
	"syscall"
	"time"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/acpcompact/acpcompact/test/conformance"
)

const proxyUsage = `usage: acpcompact proxy [flags] -- AGENT [ARGS...]

Runs AGENT, an ACP agent speaking JSON-RPC over stdio, and carries the
editor's connection to it unchanged except for context compaction, which it
makes correct: legacy signals become standard compaction updates for
clients that support them, standard updates never reach clients that do
not, and every compaction the client saw start is settled before the turn
ends. Configure the editor to launch this command in place of the agent.

Exit status: the agent's (128+N when signal N ended it); 2 for a usage
error; 126 or 127 when AGENT cannot be started.

flags:
`

// Process timing of the proxy command.
const (
	// drainGrace is how long the agent's output may stay open after the
	// agent exited (a grandchild holding it) before it is cut off.
	drainGrace = 2 * time.Second
	// killGrace is how long the agent has to exit after SIGTERM, or after
	// the client left, before it is killed.
	killGrace = 10 * time.Second
)

// runProxy implements "acpcompact proxy"; args exclude the subcommand name.
func runProxy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, proxyUsage)
		fs.PrintDefaults()
	}
	all := make([]string, 0, len(proxy.Translators()))
	for _, t := range proxy.Translators() {
		all = append(all, string(t))
	}
	translate := fs.String("translate", strings.Join(all, ","),
		"comma-separated legacy signals to translate: "+strings.Join(all, ", "))
	noTranslate := fs.String("no-translate", "", "comma-separated legacy signals to leave untouched")
	fallbackName := fs.String("fallback", "",
		"how a v1 client without the compaction capability sees compaction: "+strings.Join(fallback.Names(), ", ")+
			" (default: the agent's legacy signals untouched, and standard updates rewritten as a toolcall)")
	var check checkMode
	fs.Var(&check, "check", "also check the live connection for compaction conformance and log violations: "+
		"--check or --check=agent checks what the agent sends, --check=client what the client receives")
	logLevel := fs.String("log-level", "info", "log level of the proxy's own messages on stderr: debug, info, warn, error")
	cancelGrace := fs.Duration("cancel-grace", 0,
		"settle a cancelled turn's open compactions as cancelled this long after session/cancel, even if the agent hangs (0: at the end of the turn)")

	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
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
	if err == nil {
		var off []proxy.Translator
		if off, err = proxy.ParseTranslators(*noTranslate); err == nil {
			on = slices.DeleteFunc(on, func(t proxy.Translator) bool { return slices.Contains(off, t) })
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "acpcompact proxy: %v\n", err)
		return 2
	}
	opts := []proxy.Option{
		proxy.WithTranslators(on...),
		proxy.WithLogger(logger),
		proxy.WithCancelGrace(*cancelGrace),
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
		if opt, err := schemaOption(); err == nil {
			copts = append(copts, opt)
		} else {
			logger.Debug("--check: schema validation off", "error", err)
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
// client, forwards SIGINT and SIGTERM to it, and returns its exit code.
func superviseAgent(ctx context.Context, px *proxy.Proxy, argv []string, stdin io.Reader, stdout io.Writer, stderr io.Writer, logger *slog.Logger) int {
	// Signals are caught before the agent starts so that none is lost
	// between the start and the forwarding loop.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

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

	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	runDone := make(chan error, 1)
	go func() { runDone <- px.Run(runCtx, stdin, stdout, inW, outR) }()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var (
		killTimer, drainTimer <-chan time.Time
		ctxDone               = ctx.Done()
		signalled             bool
		runOver, exited       bool
		runErr                error
	)
	forward := func(s os.Signal) {
		signalled = true
		logger.Debug("forwarding signal to the agent", "signal", s.String())
		_ = cmd.Process.Signal(s)
	}
	terminate := func() {
		if killTimer == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			killTimer = time.After(killGrace)
		}
	}
	for !runOver || !exited {
		select {
		case s := <-sigs:
			forward(s)
		case <-ctxDone:
			ctxDone = nil
			// The caller's context usually ends because of the very
			// signal being forwarded (main's signal.NotifyContext); give
			// it a moment to arrive before terminating the agent.
			select {
			case s := <-sigs:
				forward(s)
			case <-time.After(50 * time.Millisecond):
			}
			if !signalled {
				terminate()
			} else if killTimer == nil {
				killTimer = time.After(killGrace)
			}
		case <-killTimer:
			killTimer = nil
			logger.Warn("the agent did not exit in time; killing it", "grace", killGrace)
			_ = cmd.Process.Kill()
		case <-drainTimer:
			drainTimer = nil
			// A grandchild still holds the agent's output open.
			outR.Close()
		case runErr = <-runDone:
			runOver = true
			inW.Close()
			if errors.Is(runErr, proxy.ErrClientClosed) {
				logger.Info("the client went away; stopping the agent")
				terminate()
			}
		case <-waitDone:
			exited = true
			if !runOver {
				drainTimer = time.After(drainGrace)
			}
		}
	}
	outR.Close()
	if runErr != nil && !errors.Is(runErr, proxy.ErrClientClosed) && !errors.Is(runErr, os.ErrClosed) {
		logger.Debug("proxy stopped", "error", runErr)
	}
	return exitCode(cmd.ProcessState)
}

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
