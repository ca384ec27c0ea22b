package agentkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/protocol"
)

// The plumbing of Example_summaryAndCancel: a stand-in model and a client
// on the other end of the agent's stdin and stdout.

// model stands in for the agent's LLM client.
var model *fakeModel

// fakeModel streams a two-block summary on its first call; on the next it
// streams one block and then waits for the turn to be cancelled, as a slow
// model would.
type fakeModel struct{ calls atomic.Int32 }

// Summarize streams the summary of the compacted context.
func (m *fakeModel) Summarize(ctx context.Context) iter.Seq[string] {
	slow := m.calls.Add(1) > 1
	return func(yield func(string) bool) {
		if !yield("## Retained context\n") {
			return
		}
		if slow {
			<-ctx.Done()
			return
		}
		yield("- The user is writing a JSON parser in Go.\n")
	}
}

// clientPeer returns the agent's stdin and stdout, in-process pipes to a
// client that advertises the compaction capability and, on its own
// goroutine, initializes, opens a session, prompts, prompts again and
// cancels that prompt after its first summary chunk, prints what it sent
// and received, and hangs up.
func clientPeer() (io.Reader, io.WriteCloser) {
	model = &fakeModel{}
	agentEnd, clientEnd := net.Pipe()
	c := kittest.NewClient(context.Background(), clientEnd)
	go func() {
		for _, line := range playClient(c) {
			fmt.Println(line)
		}
		_ = c.Conn.Close()
	}()
	return agentEnd, agentEnd
}

// playClient plays the examples' client and returns its transcript.
func playClient(c *kittest.Client) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, 1, true); err != nil {
		return []string{"initialize: " + err.Error()}
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.Conn.Call(ctx, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}}, &s); err != nil {
		return []string{"session/new: " + err.Error()}
	}
	var res json.RawMessage
	if err := c.Conn.Call(ctx, "session/prompt", kittest.PromptText(s.SessionID, "hello", nil), &res); err != nil {
		return []string{"prompt: " + err.Error()}
	}
	var firstID string // the first prompt's compaction
	for _, e := range kittest.Compactions(c.Wire.Events()) {
		firstID = e.CompactionID
	}
	done := make(chan error, 1)
	go func() {
		var res json.RawMessage
		done <- c.Conn.Call(ctx, "session/prompt", kittest.PromptText(s.SessionID, "go on", nil), &res)
	}()
	if _, err := c.Wire.Wait(ctx, func(e kittest.Event) bool {
		return !e.Sent && e.Kind == protocol.KindSummaryChunk && e.CompactionID != firstID
	}); err != nil {
		return []string{"waiting for a chunk: " + err.Error()}
	}
	if err := c.Cancel(ctx, s.SessionID); err != nil {
		return []string{"cancel: " + err.Error()}
	}
	if err := <-done; err != nil {
		return []string{"prompt: " + err.Error()}
	}
	return transcript(c.Wire.Events())
}

// transcript renders the prompts' part of the record: what the client sent
// (->) and received (<-), compactions numbered in order of appearance,
// chunks with their text.
func transcript(evs []kittest.Event) []string {
	var out []string
	ids := map[string]int{}
	for _, e := range evs {
		switch {
		case e.Method == "initialize" || e.Method == "session/new":
		case e.Sent && e.Method == "session/prompt":
			var p struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			}
			_ = json.Unmarshal(e.Params, &p)
			text := ""
			if len(p.Prompt) > 0 {
				text = p.Prompt[0].Text
			}
			out = append(out, fmt.Sprintf("-> session/prompt %q", text))
		case e.Sent:
			out = append(out, "-> "+e.Method)
		case e.Response:
			out = append(out, "<- "+e.Method+": "+kittest.StopReason(e.Result))
		case e.Compaction():
			if ids[e.CompactionID] == 0 {
				ids[e.CompactionID] = len(ids) + 1
			}
			line := fmt.Sprintf("<- compaction %d: ", ids[e.CompactionID])
			if e.Kind == protocol.KindSummaryChunk {
				var content struct {
					Text string `json:"text"`
				}
				_ = json.Unmarshal(kittest.Field(e, "content"), &content)
				line += fmt.Sprintf("chunk %q", content.Text)
			} else {
				line += e.Status
			}
			out = append(out, line)
		default:
			out = append(out, "<- "+e.Kind)
		}
	}
	return out
}
