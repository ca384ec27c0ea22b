// Package interop runs the official ACP TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json) as the client of an
// agent process, so that tests can check what a real client library makes
// of an agent's compaction updates.
//
// The client is harness.mjs, a Node program in this directory: Run starts
// it with an agent command line and a scenario, and decodes the JSON it
// prints into a Result: the updates the SDK delivered to its session/update
// handler in order, each request's response with the number of updates
// delivered before it, the number of updates the SDK rejected (it drops
// them with only a console.error "Error handling notification"), and the
// raw wire in both directions. The SDK silently strips malformed optional
// fields, so callers should validate the raw wire against the JSON Schema
// as well as count rejections.
//
// The npm packages are installed by `make test-deps` (npm ci in this
// directory). Run reports ErrNoNode when node is not on PATH and
// ErrNoDeps when the packages are missing.
package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Errors Run returns when the Node side cannot run.
var (
	// ErrNoNode: the node executable is not on PATH.
	ErrNoNode = errors.New("interop: node is not on PATH")
	// ErrNoDeps: test/interop/node_modules lacks the pinned SDK; run make test-deps.
	ErrNoDeps = errors.New("interop: the npm test dependencies are not installed; run make test-deps")
)

// Capability values for Options.Capability: what a v1 client puts at
// clientCapabilities.session.compaction. Only CapObject advertises support.
const (
	CapObject      = "object"       // {"session":{"compaction":{}}}
	CapAbsent      = "absent"       // no "session" key
	CapSessionNull = "session-null" // {"session":null}
	CapNull        = "null"         // {"session":{"compaction":null}}
	CapFalse       = "false"        // {"session":{"compaction":false}}
	CapTrue        = "true"         // {"session":{"compaction":true}}
)

// Step is one action of a scenario. Exactly one of Prompt, Load and
// NewSession is set.
type Step struct {
	// Prompt sends session/prompt with this text and waits for the turn to
	// end (v1: the response; v2: the response and the idle state_update).
	Prompt string `json:"prompt,omitempty"`
	// Cancel sends session/cancel during the prompt: "immediate" (right
	// behind it), "first-update" (once the prompt's work shows: a
	// compaction update, a fallback form or agent text; session state such
	// as available_commands_update does not count) or "first-compaction"
	// (once a compaction update arrived; for a v1 client without the
	// capability, as first-update). Failing both, after 1.5 s.
	Cancel string `json:"cancel,omitempty"`
	// Load replays the session: session/load (v1) or session/resume with
	// replayFrom start (v2).
	Load bool `json:"load,omitempty"`
	// NewSession sends session/new and makes its session the current one.
	NewSession bool `json:"newSession,omitempty"`
}

// Options configures one harness run.
type Options struct {
	// Protocol is 1 or 2 (default 1).
	Protocol int
	// Capability is one of the Cap constants (default CapObject); v1 only.
	Capability string
	// Scenario names a scenario of harness.mjs (compact, nosummary, fail,
	// failearly, cancel-slow, twice, load, flood, echo). Ignored when Steps
	// is set.
	Scenario string
	// Steps, when set, replace Scenario. A session/new always comes first.
	Steps []Step
	// Agent is the agent's command line.
	Agent []string
	// Timeout bounds the whole run, as a hang guard (default 60 s).
	Timeout time.Duration
	// Stderr receives the harness's and the agent's stderr (default: discarded).
	Stderr io.Writer
}

// Update is one session/update as the SDK delivered it to the handler.
type Update struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// Kind returns the update's sessionUpdate discriminator.
func (u Update) Kind() string {
	var h struct {
		Kind string `json:"sessionUpdate"`
	}
	_ = json.Unmarshal(u.Update, &h)
	return h.Kind
}

// Request is one request the harness sent and what came back.
type Request struct {
	Method   string          `json:"method"`
	ID       json.RawMessage `json:"id"`
	Params   json.RawMessage `json:"params"`
	Response json.RawMessage `json:"response"`
	Error    *RequestError   `json:"error"`
	// UpdatesBefore is how many updates the SDK had delivered (or
	// rejected) when the response reached it; Result.Updates[:UpdatesBefore]
	// precede the response.
	UpdatesBefore int `json:"updatesBefore"`
}

// RequestError is a JSON-RPC error response (or a local failure).
type RequestError struct {
	Message string          `json:"message"`
	Code    *int            `json:"code"`
	Data    json.RawMessage `json:"data"`
}

// StepResult is what one step did.
type StepResult struct {
	Step     json.RawMessage `json:"step"`
	Requests []Request       `json:"requests"`
	// StartIndex is len(Updates) when the step began.
	StartIndex int `json:"startIndex"`
	// CancelSentAfter is len(Updates) when session/cancel was sent, or nil.
	CancelSentAfter *int `json:"cancelSentAfter"`
	// IdleIndex is the index in Updates of the idle state_update that ended
	// a v2 prompt turn, or nil.
	IdleIndex *int `json:"idleIndex"`
}

// Prompt returns the step's session/prompt request, if any.
func (s StepResult) Prompt() (Request, bool) {
	for _, r := range s.Requests {
		if r.Method == "session/prompt" {
			return r, true
		}
	}
	return Request{}, false
}

// WireLine is one raw line of the connection, as the client saw it.
type WireLine struct {
	// Dir is "client" (sent to the agent) or "agent" (received).
	Dir  string `json:"dir"`
	Line string `json:"line"`
}

// Result is what the harness reports.
type Result struct {
	Protocol   int             `json:"protocol"`
	Capability string          `json:"capability"`
	Scenario   string          `json:"scenario"`
	Initialize json.RawMessage `json:"initialize"`
	SessionID  string          `json:"sessionId"`
	// Updates are the updates delivered to the session/update handler, in
	// delivery order.
	Updates []Update `json:"updates"`
	// Steps has the initialize step, the session/new step, then one per
	// scenario step.
	Steps []StepResult `json:"steps"`
	// Rejected counts "Error handling notification" logs: updates the SDK
	// dropped without delivering them.
	Rejected int `json:"rejected"`
	// ConsoleErrors has everything the SDK logged with console.error or
	// console.warn.
	ConsoleErrors []string `json:"consoleErrors"`
	// GateStalls counts responses released to the SDK while updates read
	// before them had not yet been delivered or rejected (normally 0).
	GateStalls int        `json:"gateStalls"`
	Wire       []WireLine `json:"wire"`
	// Error is the harness's own failure (timeout, initialize failed, ...).
	Error    string `json:"error"`
	ExitCode *int   `json:"exitCode"`
	Signal   string `json:"signal"`
}

// Transcript renders the wire in the "client <json>" / "agent <json>"
// transcript format of package conformance.
func (r *Result) Transcript() string {
	var b strings.Builder
	for _, w := range r.Wire {
		b.WriteString(w.Dir)
		b.WriteByte(' ')
		b.WriteString(w.Line)
		b.WriteByte('\n')
	}
	return b.String()
}

// AgentLines returns the raw lines the agent wrote.
func (r *Result) AgentLines() []string {
	var out []string
	for _, w := range r.Wire {
		if w.Dir == "agent" {
			out = append(out, w.Line)
		}
	}
	return out
}

// Dir returns this package's directory, where harness.mjs and
// node_modules live: found from the source file's location, or else as
// test/interop under the module root above the working directory.
func Dir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Dir(file)
		if _, err := os.Stat(filepath.Join(d, "harness.mjs")); err == nil {
			return d, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "test", "interop"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("interop: no go.mod above %s", wd)
		}
	}
}

// Check reports ErrNoNode or ErrNoDeps when the harness cannot run.
func Check() error {
	if _, err := exec.LookPath("node"); err != nil {
		return ErrNoNode
	}
	dir, err := Dir()
	if err != nil {
		return err
	}
	for _, p := range []string{
		filepath.Join("node_modules", "@agentclientprotocol", "sdk", "package.json"),
		filepath.Join("node_modules", "zod", "package.json"),
	} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("%w (missing %s)", ErrNoDeps, p)
		}
	}
	return nil
}

// Run runs the harness once and returns its result. An error means the
// harness produced no result; a result may still carry its own Error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if len(o.Agent) == 0 {
		return nil, errors.New("interop: Options.Agent is empty")
	}
	dir, _ := Dir()
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	args := []string{filepath.Join(dir, "harness.mjs"), "--timeout", strconv.FormatInt(timeout.Milliseconds(), 10)}
	if o.Protocol != 0 {
		args = append(args, "--protocol", strconv.Itoa(o.Protocol))
	}
	if o.Capability != "" {
		args = append(args, "--capability", o.Capability)
	}
	if len(o.Steps) > 0 {
		steps, err := json.Marshal(o.Steps)
		if err != nil {
			return nil, err
		}
		args = append(args, "--steps", string(steps))
	} else if o.Scenario != "" {
		args = append(args, "--scenario", o.Scenario)
	}
	args = append(args, "--")
	args = append(args, o.Agent...)

	// The harness has its own timer; this one only guards against a Node
	// process that stops responding altogether.
	ctx, cancel := context.WithTimeout(ctx, timeout+15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = o.Stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	var res Result
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		return nil, fmt.Errorf("interop: harness (%v) printed no result: %w; stdout: %q", runErr, err, clip(stdout.String()))
	}
	return &res, nil
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
