// Package runtime stands in for a third-party agent runtime of
// docker-agent's shape, which an ACP agent wraps unchanged: it knows
// nothing of ACP or acpcompact. A run of a prompt is a stream of events
// (the model's answer in deltas, token usage, and compaction started, its
// summary in deltas, completed or failed), which the run may go on sending
// after it says it stopped (a compaction applied once the prompt is
// answered), and "completed" comes from a defer, whatever happened, with
// the error beside it. The runtime keeps its own history of each session
// in files of its own, as docker-agent keeps its sessions.
//
// Its model is a script: a prompt "/compact" compacts (3 summary deltas),
// "/compact fail" fails after one delta, "/compact slow" streams a delta
// every 100 ms for 5 s (until its context ends), "/compact late" answers
// first and compacts after the run stopped; anything else is echoed.
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Kind is what an Event says.
type Kind int

const (
	AgentChoice         Kind = iota + 1 // a delta of the model's answer (Text)
	TokenUsage                          // the context's size now (Tokens)
	CompactionStarted                   // the runtime began to compact its history
	CompactionSummary                   // a delta of the summary (Text)
	CompactionCompleted                 // sent from a defer: Err says how it went, Text is the summary
	CompactionFailed                    // the summary request failed (Err)
	StreamStopped                       // the run answered the prompt (events may follow)
)

// Event is one event of a run.
type Event struct {
	Kind   Kind
	Text   string
	Tokens int64
	Err    error
}

// ErrSummary is the failure of "/compact fail".
var ErrSummary = errors.New("summary request failed")

// Runtime runs prompts and keeps each session's history in dir.
type Runtime struct {
	dir string
	mu  sync.Mutex
}

// New returns a runtime whose sessions live in dir.
func New(dir string) (*Runtime, error) {
	return &Runtime{dir: dir}, os.MkdirAll(dir, 0o700)
}

// state is a session's history as the runtime keeps it.
type state struct {
	Messages []string `json:"messages"`
	Summary  string   `json:"summary"`
	Tokens   int64    `json:"tokens"`
}

func (r *Runtime) path(sessionID string) string { return filepath.Join(r.dir, sessionID+".json") }

// Load reads a session's history, for a session loaded after a restart.
func (r *Runtime) Load(sessionID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.read(sessionID)
	return err
}

func (r *Runtime) read(sessionID string) (state, error) {
	var s state
	b, err := os.ReadFile(r.path(sessionID))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func (r *Runtime) update(sessionID string, f func(*state)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, _ := r.read(sessionID)
	f(&s)
	b, _ := json.Marshal(s)
	_ = os.WriteFile(r.path(sessionID), b, 0o600)
}

// RunStream runs prompt in sessionID and returns its events; the channel
// is closed when the run has ended, which may be after StreamStopped.
func (r *Runtime) RunStream(ctx context.Context, sessionID, prompt string) <-chan Event {
	events := make(chan Event)
	go func() {
		defer close(events)
		send := func(e Event) { events <- e }
		r.update(sessionID, func(s *state) { s.Messages = append(s.Messages, prompt) })
		switch prompt {
		case "/compact", "/compact fail", "/compact slow":
			r.compact(ctx, sessionID, prompt, send)
			send(Event{Kind: AgentChoice, Text: "Context compacted."})
		case "/compact late":
			send(Event{Kind: AgentChoice, Text: "Compacting in the background."})
			send(Event{Kind: StreamStopped})
			time.Sleep(100 * time.Millisecond)
			r.compact(context.Background(), sessionID, prompt, send)
			return
		default:
			send(Event{Kind: AgentChoice, Text: "echo: " + prompt})
		}
		r.update(sessionID, func(s *state) { s.Tokens += 900; send(Event{Kind: TokenUsage, Tokens: s.Tokens}) })
		send(Event{Kind: StreamStopped})
	}()
	return events
}

// compact summarizes the session's history, as docker-agent does: started,
// summary deltas, and completed from a defer.
func (r *Runtime) compact(ctx context.Context, sessionID, prompt string, send func(Event)) {
	send(Event{Kind: CompactionStarted})
	var err error
	var parts []string
	defer func() { send(Event{Kind: CompactionCompleted, Err: err, Text: strings.Join(parts, "")}) }()
	parts = []string{"## Retained context\n", "- The user asked for a compaction.\n", "- Earlier messages are summarized here.\n"}
	switch prompt {
	case "/compact fail":
		send(Event{Kind: CompactionSummary, Text: parts[0]})
		parts, err = nil, ErrSummary
		send(Event{Kind: CompactionFailed, Err: err})
		return
	case "/compact slow":
		parts = parts[:0]
		for i := range 50 {
			select {
			case <-ctx.Done():
				err = ctx.Err()
				return
			case <-time.After(100 * time.Millisecond):
			}
			p := fmt.Sprintf("- Step %d of 50 summarized.\n", i+1)
			parts = append(parts, p)
			send(Event{Kind: CompactionSummary, Text: p})
		}
	default:
		for _, p := range parts {
			send(Event{Kind: CompactionSummary, Text: p})
		}
	}
	r.update(sessionID, func(s *state) { s.Summary, s.Messages, s.Tokens = strings.Join(parts, ""), nil, 6000 })
}
