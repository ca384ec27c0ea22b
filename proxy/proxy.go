package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

// Sentinel errors. Errors returned by this package that stem from one of
// these wrap it, so callers branch with errors.Is.
var (
	// ErrUnknownTranslator: a translator name that Translators does not
	// list.
	ErrUnknownTranslator = errors.New("proxy: unknown translator")
	// ErrRunning: Run was called while another Run of the same Proxy was
	// still going. A Proxy carries one connection at a time.
	ErrRunning = errors.New("proxy: already running")
	// ErrClientClosed: a write to the client failed, so the client is
	// gone; Run stops, since nothing the agent says can reach anyone.
	ErrClientClosed = errors.New("proxy: write to the client failed")
	// ErrAgentOutput: reading the agent's output failed with something
	// other than end of file.
	ErrAgentOutput = errors.New("proxy: read from the agent failed")
)

// DefaultMaxLineBytes is the longest line the proxy reads whole. ACP
// messages carrying images or resources are large, so the bound is
// generous; it exists so that a framing error cannot exhaust memory. A
// longer line is read from its head (see the package documentation) and
// streams through.
const DefaultMaxLineBytes = conformance.MaxLineBytes

// DefaultCancelGrace is the cancel grace unless WithCancelGrace says
// otherwise: the agent kits' default too.
const DefaultCancelGrace = turn.DefaultCancelGrace

// Translator names one recogniser of a legacy compaction signal; package
// agents (proxy/agents) defines and documents each, with the profiles of
// the agents that send it.
type Translator = agents.Translator

// The translators of the releases before package agents held them (see
// it for the exact wire forms, and for those added since, which are named
// by their agents.Translator).
const (
	ClaudeText         = agents.ClaudeText
	ToolCall           = agents.ToolCall
	OpencodeMarker     = agents.OpencodeMarker
	CodexText          = agents.CodexText
	CodexNotice        = agents.CodexNotice
	Qwen               = agents.Qwen
	ClaudeContinuation = agents.ClaudeContinuation
	QwenText           = agents.QwenText
	ClaudeLocalCommand = agents.ClaudeLocalCommand
	Kimi               = agents.Kimi
	Copilot            = agents.Copilot
)

// Translators returns every translator, in the order flags list them.
func Translators() []Translator { return agents.Translators() }

// ParseTranslators reads a comma-separated list of translator names, as
// given to a command-line flag. Names are matched case-insensitively; empty
// entries are skipped, so "" is the empty list; "all" names every
// translator.
func ParseTranslators(list string) ([]Translator, error) {
	var out []Translator
	for _, part := range strings.Split(list, ",") {
		name := Translator(strings.ToLower(strings.TrimSpace(part)))
		if name == "" {
			continue
		}
		if name == "all" {
			for _, t := range Translators() {
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
			continue
		}
		if !slices.Contains(Translators(), name) {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownTranslator, string(name), translatorList())
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func translatorList() string {
	names := make([]string, 0, len(Translators()))
	for _, t := range Translators() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// Checker follows a connection's messages and reports broken compaction
// obligations; *conformance.Checker implements it. The proxy serializes
// its calls.
type Checker interface {
	Observe(dir conformance.Direction, line int, raw json.RawMessage) []conformance.Violation
	Close() []conformance.Violation
}

// Checked names the agent-to-client stream a Checker sees. The client's
// messages are the same in both, since the proxy never changes them.
type Checked int

const (
	// CheckAgent checks what the agent sent, before any correction: the
	// agent's own bugs, which is what its author wants to see.
	CheckAgent Checked = iota
	// CheckClient checks what the client received, corrections included:
	// the proxy's own output.
	CheckClient
)

// String returns "agent" or "client".
func (c Checked) String() string {
	if c == CheckClient {
		return "client"
	}
	return "agent"
}

// Option configures a Proxy.
type Option func(*config)

type config struct {
	translators  map[Translator]bool
	unknown      []string
	fallback     emitter.Renderer
	gateFallback emitter.Renderer
	checker      Checker
	checked      Checked
	logger       *slog.Logger
	turnReason   error
	exitReason   error
	cancelGrace  time.Duration
	maxLine      int
	// profile is WithProfile's name ("" or "auto": from agentInfo).
	profile       string
	heartbeat     time.Duration
	summaryPolicy emitter.SummaryPolicy
	stopTimeout   time.Duration
	audit         bool
}

// WithTranslators runs ts for every agent, on top of the signals of its
// profile (see Profile): an agent without a profile gets exactly ts. By
// default only the profile's translators run, so that a text which is a
// signal in one agent's stream is never rewritten in another's.
func WithTranslators(ts ...Translator) Option {
	return func(c *config) {
		for _, t := range ts {
			c.enable(t, true)
		}
	}
}

// WithoutTranslators disables ts, even where the agent's profile reads
// them, leaving their signals untouched.
func WithoutTranslators(ts ...Translator) Option {
	return func(c *config) {
		for _, t := range ts {
			c.enable(t, false)
		}
	}
}

func (c *config) enable(t Translator, on bool) {
	if !slices.Contains(Translators(), t) {
		c.unknown = append(c.unknown, string(t))
		return
	}
	c.translators[t] = on
}

// WithAudit has the proxy audit the summary of every compaction that
// completes with one (text forms, or standard updates forwarded, rewritten
// or held) against the session's history as the client received it, and
// send what it lost in the compaction's record: knownLoss, [{kind, value,
// where}], under the record key of the terminal update's _meta, beside
// the agent's own record keys (package audit says what each kind is and
// when a reference survives). Off by default: it parses every line.
func WithAudit() Option { return func(c *config) { c.audit = true } }

// WithFallback sets how compaction is shown to a v1 client without the
// capability: recognised legacy signals are replaced by r's rendering, and
// standard updates the agent should not have sent are rewritten with it.
// Without it such a client gets the legacy signals untouched. Use the
// renderers of package fallback; fallback.None drops both.
func WithFallback(r emitter.Renderer) Option { return func(c *config) { c.fallback = r } }

// WithGateFallback sets the rendering of standard updates sent to a v1
// client without the capability when no WithFallback is given. The default
// is fallback.ToolCall(): a "Compact conversation" tool call that every v1
// client shows as one row updated in place, ends with a terminal status
// that stops the client's spinner, and keeps the agent's message text
// clean.
func WithGateFallback(r emitter.Renderer) Option {
	return func(c *config) {
		if r != nil {
			c.gateFallback = r
		}
	}
}

// WithChecker runs ch on the live connection: it sees every client message
// and the stream which says (CheckAgent by default), and each violation is
// logged at warn level.
func WithChecker(ch Checker, which Checked) Option {
	return func(c *config) { c.checker, c.checked = ch, which }
}

// WithLogger sets where the proxy logs malformed lines, corrections and
// violations. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithTurnEndReason sets the failure the client sees for a compaction still
// open when its turn ends without a cancel (default emitter.ErrTurnEnded).
// A reason wrapping emitter.ErrCancelled would report a cancel the user
// never asked for, so it is ignored.
func WithTurnEndReason(err error) Option {
	return func(c *config) {
		if err != nil && !errors.Is(err, emitter.ErrCancelled) {
			c.turnReason = err
		}
	}
}

// WithExitReason sets the failure the client sees for a compaction still
// open when the agent's output ends while the client is still connected
// (default emitter.ErrAgentCrashed). When the client's input ended first,
// or Run stops on its context, the reason is emitter.ErrConnectionClosed.
// Like WithTurnEndReason it ignores a reason wrapping emitter.ErrCancelled.
func WithExitReason(err error) Option {
	return func(c *config) {
		if err != nil && !errors.Is(err, emitter.ErrCancelled) {
			c.exitReason = err
		}
	}
}

// WithCancelGrace sets how long after the client's session/cancel (or
// $/cancel_request for the prompt) the agent may take to report the
// cancelled turn's compactions before the proxy settles those still open
// as cancelled, so that a hung agent cannot keep the client's spinner
// running; the agent's later updates for them are dropped. It means what
// it means for the agent kits: d > 0 settles d after the cancel; 0 settles
// at once; d < 0 sets no deadline, and they are settled when the turn ends
// (as every open compaction is). The default is DefaultCancelGrace.
func WithCancelGrace(d time.Duration) Option { return func(c *config) { c.cancelGrace = d } }

// WithMaxLineBytes sets the longest line the proxy reads whole (default
// DefaultMaxLineBytes); a longer line is read from its head and streams
// through.
func WithMaxLineBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxLine = n
		}
	}
}

// Proxy carries one ACP connection at a time between a client and an
// agent. Create it with New; its methods are safe for concurrent use.
type Proxy struct {
	cfg     config
	running atomic.Bool
	// terminating: Terminating was called for the Run in progress (or the
	// next one).
	terminating atomic.Bool
}

// New returns a proxy configured by opts. It fails only for an unknown
// translator name (ErrUnknownTranslator) or profile name
// (ErrUnknownProfile).
func New(opts ...Option) (*Proxy, error) {
	c := config{
		translators: map[Translator]bool{},
		turnReason:  emitter.ErrTurnEnded,
		exitReason:  emitter.ErrAgentCrashed,
		cancelGrace: DefaultCancelGrace,
		maxLine:     DefaultMaxLineBytes,
		heartbeat:   DefaultHeartbeat,
		stopTimeout: DefaultStopTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if len(c.unknown) > 0 {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownTranslator, strings.Join(c.unknown, ","), translatorList())
	}
	switch strings.ToLower(c.profile) {
	case "", "auto", "none":
	default:
		if _, ok := agents.ByName(c.profile); !ok {
			return nil, fmt.Errorf("%w %q (known: auto, none, %s)", ErrUnknownProfile, c.profile, agents.Names())
		}
	}
	if c.summaryPolicy == nil {
		c.summaryPolicy = emitter.DisplayableOnly
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.gateFallback == nil {
		c.gateFallback = fallback.ToolCall()
	}
	return &Proxy{cfg: c}, nil
}

// Enabled reports whether translator t runs for every agent
// (WithTranslators): without it, t runs only for an agent whose profile
// reads it.
func (p *Proxy) Enabled(t Translator) bool { return p.cfg.translators[t] }

// Run carries one connection: client messages are read from clientIn and
// written to agentIn, agent messages are read from agentOut and written,
// corrected, to clientOut.
//
// Run returns when agentOut ends (nil at end of file), when a write to the
// client fails (ErrClientClosed), or when ctx is done (ctx.Err()); in every
// case it first settles the compactions the client saw start: failed with
// emitter.ErrConnectionClosed when clientIn had ended, Terminating was
// called or ctx is done, with the exit reason (WithExitReason) when the
// agent's output ended on its own.
//
// agentIn is closed, if it is an io.Closer, when clientIn ends and when Run
// returns, because end of input is how an agent learns that its client has
// gone. When ctx is done, agentOut is closed too, if it is an io.Closer, so
// that a blocked read returns, and a write to clientOut in progress is
// waited for, since the settlement must follow it, but for at most the
// stop timeout (WithStopTimeout): a client that does not read cannot keep
// Run from returning. Past it the client's output is abandoned: nothing
// more is written to clientOut, and the compactions still open are not
// settled; the write that was stuck is cut short if clientOut has write
// deadlines (SetWriteDeadline), else it ends when clientOut does. While
// ctx is not done, a client that reads slowly, or not at all, slows the
// agent's output down as a pipe would, for as long as it does.
//
// Run does not wait for a read of clientIn or agentOut still in progress
// when it returns: the reading goroutine ends when that read does, without
// writing anything further. Run never closes clientOut.
func (p *Proxy) Run(ctx context.Context, clientIn io.Reader, clientOut io.Writer, agentIn io.Writer, agentOut io.Reader) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)
	defer p.terminating.Store(false)
	c := newConn(p, clientOut, agentIn)
	// Not an errgroup: the two pumps' ends are not peers. The client's end
	// of input is no failure (the agent's answers still flow, and the
	// connection lasts as long as the agent's output), and the client pump
	// may sit in a read of the client's stdin that nothing can interrupt,
	// which a group's Wait would wait on forever. The agent pump's end is
	// the connection's; the client pump is left to end with the process.
	agentDone := make(chan error, 1)
	go func() { agentDone <- c.pumpAgent(ctx, agentOut) }()
	go c.pumpClient(ctx, clientIn)

	var err error
	abandoned := false
	select {
	case err = <-agentDone:
	case <-ctx.Done():
		if cl, ok := agentOut.(io.Closer); ok {
			_ = cl.Close()
		}
		abandoned = !c.stop(ctx, emitter.ErrConnectionClosed)
		err = ctx.Err()
	}
	// No client line can reach the agent any more, and an agent that
	// still reads learns so from end of file.
	c.ain.end(p.cfg.stopTimeout)
	// A grace callback still running takes emu: wait without it (unless
	// a write stuck on the client holds emu, and it would wait as long).
	if !abandoned {
		c.e.Wait()
	}
	c.closeChecker()
	return err
}
