// Package wiretest records what would go over the wire, for tests: a
// Notifier that marshals each session update into the exact session/update
// JSON-RPC notification line an agent writes, and helpers to read it back.
package wiretest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Recorder is an emitter.Notifier that keeps every notification as its
// newline-free JSON-RPC line. Safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	lines [][]byte
	// Fail, when set, is returned by Notify instead of recording.
	Fail error
}

// Notify marshals update into a session/update notification and keeps it.
func (r *Recorder) Notify(_ context.Context, sessionID string, update any) error {
	line, err := Line(sessionID, update)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail != nil {
		return r.Fail
	}
	r.lines = append(r.lines, line)
	return nil
}

// Line returns the JSON-RPC notification an agent sends for update.
func Line(sessionID string, update any) ([]byte, error) {
	u, err := json.Marshal(update)
	if err != nil {
		return nil, fmt.Errorf("wiretest: marshal update: %w", err)
	}
	return json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		} `json:"params"`
	}{"2.0", "session/update", struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}{sessionID, u}})
}

// Lines returns a copy of the recorded lines.
func (r *Recorder) Lines() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]byte, len(r.lines))
	copy(out, r.lines)
	return out
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = nil
}

// Updates returns each recorded line's params.update object, decoded as a
// generic map, with its sessionId under the key "·session".
func (r *Recorder) Updates() []map[string]any {
	var out []map[string]any
	for _, l := range r.Lines() {
		out = append(out, Update(l))
	}
	return out
}

// Update decodes one notification line's params.update, adding the
// session ID under "·session". It returns nil for anything else.
func Update(line []byte) map[string]any {
	var n struct {
		Params struct {
			SessionID string         `json:"sessionId"`
			Update    map[string]any `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || n.Params.Update == nil {
		return nil
	}
	n.Params.Update["·session"] = n.Params.SessionID
	return n.Params.Update
}

// RawUpdate returns the raw params.update of a notification line.
func RawUpdate(line []byte) json.RawMessage {
	var n struct {
		Params struct {
			Update json.RawMessage `json:"update"`
		} `json:"params"`
	}
	_ = json.Unmarshal(line, &n)
	return n.Params.Update
}

// Buffer is a bytes.Buffer that one goroutine may write (a process's
// stderr copier, a logger, a pipe's reader) while another reads it: the
// tests' one locked buffer. Safe for concurrent use; the zero value is
// ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Bytes returns a copy of what was written so far.
func (l *Buffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
