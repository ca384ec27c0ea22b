package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzClientsReadNoMoreThanTheProxy is the differential test of the
// proxy's reading: the agent's lines (agent, split at LF) go through the
// proxy to a v1 client, with or without the capability (capable), after
// the handshake and a session/prompt (id 2), and what the client receives
// is read by the reference readers of the clients the proxy serves
// (clientread_test.go). Each property below must hold whatever the agent
// sends; a property is one entry of fuzzProperties.
//
// The seed corpus (testdata/fuzz/FuzzClientsReadNoMoreThanTheProxy) holds
// the lines of issue 18: framed with a BOM, a form feed, a no-break space
// or a line separator, nested 10,001 deep, spelt in another case, or
// unreadable. Run it longer with
//
//	go test ./proxy -run '^$' -fuzz FuzzClientsReadNoMoreThanTheProxy -fuzztime 5m
func FuzzClientsReadNoMoreThanTheProxy(f *testing.F) {
	f.Fuzz(func(t *testing.T, capable bool, agent []byte) {
		if len(agent) > 1<<20 {
			return // the properties are about reading lines, not about size
		}
		r := runAgentLines(t, capable, agent)
		for _, p := range fuzzProperties {
			assert.NoError(t, p.check(r), "%s\nagent lines:\n%s\nclient received:\n%s", p.name, quoteLines(r.agent), quoteLines(r.received))
		}
	})
}

// fuzzRun is one run: what the agent sent, and what the client received.
type fuzzRun struct {
	capable  bool
	agent    [][]byte // the agent's lines after the handshake, as sent
	received [][]byte // what the client received after the handshake, split at LF
	sent     map[string]bool
}

// madeByProxy reports whether a line the client received is one the
// proxy made (not one of the agent's, byte for byte).
func (r *fuzzRun) madeByProxy(l []byte) bool { return !r.sent[string(l)] }

// fuzzProperty is one rule the client's stream keeps, whatever the agent
// sends.
type fuzzProperty struct {
	name  string
	check func(r *fuzzRun) error
}

var fuzzProperties = []fuzzProperty{
	{"a client without the capability never receives a compaction update", noCompactionUpdateWithoutTheCapability},
	{"every turn end the client sees comes after the settlement of what it saw start", turnEndsAfterTheSettlement},
	{"nothing about compaction arrives outside a turn", nothingAboutCompactionOutsideATurn},
}

// nothingAboutCompactionOutsideATurn: once a client has read the answer to
// its one prompt, no turn of the session runs, and nothing it reads about
// a compaction may follow (what the agent reports then is held for a next
// turn that never comes in this run).
func nothingAboutCompactionOutsideATurn(r *fuzzRun) error {
	for _, rd := range readers {
		if r.capable && rd.name != "typescript" {
			continue
		}
		over := false
		for _, l := range r.received {
			m := rd.read(l)
			if !m.ok {
				continue
			}
			if m.answers(fuzzPromptID) {
				over = true
				continue
			}
			if !over || m.method != "session/update" {
				continue
			}
			if _, _, ok := fuzzSeenCompaction(r, m, l); ok || (r.capable && m.isCompaction()) {
				return fmt.Errorf("the %s client read %s after its turn ended", rd.name, clipQ(l))
			}
		}
	}
	return nil
}

// The client's one prompt, and its session.
const (
	fuzzPromptID = 2
	fuzzSession  = "s1"
)

func noCompactionUpdateWithoutTheCapability(r *fuzzRun) error {
	if r.capable {
		return nil
	}
	for _, l := range r.received {
		for _, rd := range readers {
			if m := rd.read(l); m.isCompaction() {
				return fmt.Errorf("the %s client reads %q as a %s", rd.name, clipQ(l), m.kind)
			}
		}
	}
	return nil
}

// turnEndsAfterTheSettlement: when a client reads the answer to its
// prompt, every compaction it saw start in the prompt's session has its
// terminal form. (One in another session, which has no turn, is not the
// turn's.)
// What a client sees start: a capable client, a compaction_update or
// summary chunk it accepts (a string sessionId and compactionId, and a
// string status for an update; the TypeScript SDK rejects the rest); one
// without the capability, the gate's tool call ("compact-" and the
// compaction ID, made by the proxy). A capable client's stream is read as
// the TypeScript client reads it: a Go client that reads a compaction
// update whose member names repeat in another case follows a reading the
// proxy does not (docs/proxy.md, "Limits").
func turnEndsAfterTheSettlement(r *fuzzRun) error {
	for _, rd := range readers {
		if r.capable && rd.name != "typescript" {
			continue
		}
		open := map[string]bool{}
		for _, l := range r.received {
			m := rd.read(l)
			if !m.ok {
				continue
			}
			if m.answers(fuzzPromptID) {
				for id := range open {
					return fmt.Errorf("the %s client read the prompt's answer %s while compaction %s was still open", rd.name, clipQ(l), id)
				}
				break // the one turn ended
			}
			if m.method != "session/update" || m.sessionID != fuzzSession {
				continue
			}
			id, status, ok := fuzzSeenCompaction(r, m, l)
			if !ok {
				continue
			}
			if status == "completed" || status == "failed" || status == "cancelled" {
				delete(open, id)
			} else if !open[id] && status != "" {
				open[id] = true
			}
		}
	}
	return nil
}

// fuzzSeenCompaction reads a compaction a client sees in session/update m (line
// l): its ID and status ("" for a summary chunk, which leaves it as it was).
func fuzzSeenCompaction(r *fuzzRun, m readMsg, l []byte) (id, status string, ok bool) {
	u := m.update
	if r.capable {
		id, _ = u["compactionId"].(string)
		switch m.kind {
		case "compaction_update":
			status, ok = u["status"].(string)
			return id, status, ok && id != ""
		case "compaction_summary_chunk":
			if id == "" {
				return "", "", false
			}
			return id, "in_progress", true
		}
		return "", "", false
	}
	if !r.madeByProxy(l) || (m.kind != "tool_call" && m.kind != "tool_call_update") {
		return "", "", false
	}
	id, _ = u["toolCallId"].(string)
	if !strings.HasPrefix(id, "compact-") {
		return "", "", false
	}
	status, _ = u["status"].(string)
	return id, status, true
}

// runAgentLines runs the proxy between a v1 client (capable or not) and an
// agent that, after the handshake and the client's prompt, sends agent
// and ends its output; it returns what the client received after the
// handshake.
func runAgentLines(t *testing.T, capable bool, agent []byte) *fuzzRun {
	t.Helper()
	p, err := proxy.New()
	require.NoError(t, err, "proxy.New")
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	coR, coW := io.Pipe()
	aiR, aiW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), cr, coW, aiW, ar) }()
	toAgent := make(chan []byte, 16)
	go readLines(aiR, toAgent)
	toClient := make(chan []byte, 1024)
	go readLines(coR, toClient)
	defer func() {
		_ = cw.Close()
		for range toAgent {
		}
	}()
	wait := func(ch <-chan []byte, who string) []byte {
		select {
		case l := <-ch:
			return l
		case <-time.After(waitFor):
			require.FailNow(t, "nothing reached the "+who)
		}
		return nil
	}
	client := func(line string) {
		_, err := cw.Write([]byte(line + "\n"))
		require.NoError(t, err, "client write")
		wait(toAgent, "agent")
	}
	say := func(line string) {
		_, err := aw.Write([]byte(line + "\n"))
		require.NoError(t, err, "agent write")
		wait(toClient, "client")
	}
	params := v1Plain
	if capable {
		params = v1Capable
	}
	client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + params + `}`)
	say(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
	client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	say(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"` + fuzzSession + `"}}`)
	client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, fuzzPromptID, fuzzSession))

	r := &fuzzRun{capable: capable, sent: map[string]bool{}}
	for _, l := range splitLines(agent) {
		r.agent = append(r.agent, l)
		r.sent[string(l)] = true
	}
	received := make(chan []byte, 1)
	go func() {
		var out bytes.Buffer
		for l := range toClient {
			out.Write(l)
		}
		received <- out.Bytes()
	}()
	written := make(chan error, 1)
	go func() {
		_, err := aw.Write(agent)
		_ = aw.Close()
		written <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "Run")
	case <-time.After(waitFor):
		require.FailNow(t, "Run did not return once the agent's output ended")
	}
	require.NoError(t, <-written, "the agent's lines")
	_ = coW.Close()
	out := <-received
	r.received = splitLines(out)
	return r
}

func quoteLines(ls [][]byte) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "  %s\n", clipQ(l))
	}
	return b.String()
}
