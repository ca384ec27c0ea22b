// Command fakeagent is a scripted ACP agent for the proxy's tests. It
// answers initialize, session/new and session/prompt over stdio, and on
// each prompt plays the legacy or faulty compaction behaviour named by
// -behavior, the way one of the peers in shared/spec/peers.md does.
//
// -record FILE keeps every byte the agent read, so a test can check that
// what the agent received is exactly what the client sent.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type agent struct {
	in        *bufio.Reader
	out       *bufio.Writer
	sid       string
	version   int
	cancelled bool
	prompts   int
}

func main() {
	behavior := flag.String("behavior", "plain", "what to do on session/prompt")
	record := flag.String("record", "", "file to append every byte read from stdin to")
	version := flag.Int("version", 0, "protocolVersion to answer (0: the client's)")
	exit := flag.Int("exit", 0, "exit code at end of input")
	stderrText := flag.String("stderr", "", "text to write to stderr at start")
	bigSize := flag.Int("big-size", 64<<20, "length of the -behavior big line, terminator excluded")
	trap := flag.Int("trap", 0, "catch SIGTERM, SIGHUP and SIGINT, report the signal on stderr and exit with this code (0: do not)")
	flag.BoolVar(&manySessions, "sessions", false, "give each session/new a session ID of its own (s1, s2, ...) and answer each prompt in its session")
	flag.DurationVar(&linger, "linger", 0, "how long to keep running after the end of input before exiting (a signal may come meanwhile)")
	flag.IntVar(&flood, "flood", 100_000, "how many compactions (flood-held-ids) or summary chunks of -big-size bytes (flood-held-chunks) to send after the first turn")
	flag.Parse()

	if *stderrText != "" {
		fmt.Fprintln(os.Stderr, *stderrText)
	}
	if *behavior == "sigterm" && *trap == 0 {
		*trap = 42
	}
	if *trap != 0 {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
		go func() {
			s := <-sigs
			fmt.Fprintf(os.Stderr, "fakeagent: got %v\n", s)
			os.Exit(*trap)
		}()
	}
	var in io.Reader = os.Stdin
	if *record != "" {
		f, err := os.OpenFile(*record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			os.Exit(111)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	a := &agent{in: bufio.NewReaderSize(in, 1<<20), out: bufio.NewWriterSize(os.Stdout, 1<<20), sid: "s1", version: *version}
	for {
		m, ok := a.read()
		if !ok {
			break
		}
		a.handle(m, *behavior, *bigSize)
	}
	a.out.Flush()
	time.Sleep(linger)
	os.Exit(*exit)
}

// linger, manySessions and flood are the -linger, -sessions and -flood
// flags.
var (
	flood        int
	linger       time.Duration
	manySessions bool
	sessions     int
)

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// read returns the next message; malformed lines are reported and skipped.
func (a *agent) read() (message, bool) {
	for {
		line, err := a.in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if m, ok := decode(line); ok {
				return m, true
			}
			fmt.Fprintf(os.Stderr, "fakeagent: malformed line of %d bytes\n", len(line))
		}
		if err != nil {
			return message{}, false
		}
	}
}

// decode reads a message. A huge one (a 64 MiB prompt) is read only up to
// its params, which is all the fake needs and keeps the test fast.
func decode(line []byte) (message, bool) {
	var m message
	if len(line) < 1<<20 {
		return m, json.Unmarshal(line, &m) == nil
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return m, false
		}
		switch t {
		case "id":
			err = dec.Decode(&m.ID)
		case "method":
			err = dec.Decode(&m.Method)
		case "params":
			return m, m.Method != ""
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return m, false
		}
	}
	return m, true
}

func (a *agent) handle(m message, behavior string, bigSize int) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion int `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		v := a.version
		if v == 0 {
			v = p.ProtocolVersion
		}
		if v == 2 {
			// v2 answers with info and capabilities; the official v2 client
			// rejects an initialize result without info.
			a.respond(m.ID, `{"protocolVersion":2,"info":{"name":"fakeagent","version":"1.0.0"},"capabilities":{}}`)
			return
		}
		a.respond(m.ID, fmt.Sprintf(`{"protocolVersion":%d,"agentCapabilities":{"loadSession":true}}`, v))
	case "session/new":
		if manySessions {
			sessions++
			a.sid = fmt.Sprintf("s%d", sessions)
		}
		a.respond(m.ID, fmt.Sprintf(`{"sessionId":%q}`, a.sid))
	case "session/cancel":
		a.cancelled = true
	case "session/prompt":
		if manySessions {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			a.sid = p.SessionID
		}
		a.cancelled = false
		a.prompt(m.ID, behavior, bigSize)
	case "":
		// a response to one of our requests; we send none
	default:
		if len(m.ID) > 0 {
			a.respond(m.ID, `{}`)
		}
	}
}

func (a *agent) write(line string) {
	a.out.WriteString(line)
	a.out.WriteByte('\n')
	a.out.Flush()
}

func (a *agent) respond(id json.RawMessage, result string) {
	a.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func (a *agent) update(u string) {
	a.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, a.sid, u))
}

// bigUpdate writes, without flushing, one session/update line of exactly
// size bytes, terminator excluded (or its frame alone, if longer): head is
// the update up to the opening quote of a text, tail closes that text and
// the update, and the text between is the letters a to z over and over.
func (a *agent) bigUpdate(size int, head, tail string) {
	head = fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":`, a.sid) + head
	tail += "}}"
	fill := max(size-len(head)-len(tail), 0)
	a.out.WriteString(head)
	for i := 0; i < fill; i++ {
		a.out.WriteByte('a' + byte(i%26))
	}
	a.out.WriteString(tail)
	a.out.WriteByte('\n')
}

func (a *agent) text(s string) {
	b, _ := json.Marshal(s)
	a.update(fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%s}}`, b))
}

// waitCancel reads until the client cancels, as a busy agent would.
func (a *agent) waitCancel() {
	for !a.cancelled {
		m, ok := a.read()
		if !ok {
			a.out.Flush()
			time.Sleep(linger)
			os.Exit(0)
		}
		if m.Method == "session/cancel" {
			a.cancelled = true
		}
	}
}

func (a *agent) end(id json.RawMessage) {
	reason := "end_turn"
	if a.cancelled {
		reason = "cancelled"
	}
	a.respond(id, fmt.Sprintf(`{"stopReason":%q}`, reason))
}

func (a *agent) prompt(id json.RawMessage, behavior string, bigSize int) {
	a.prompts++
	switch behavior {
	case "flood-held-ids", "flood-held-chunks":
		// The first turn ends, then the agent goes on reporting
		// compactions for a session nobody prompts: what a proxy holds
		// for the next turn grows with them unless it is bounded.
		if a.prompts > 1 {
			a.text("Hello.")
			break
		}
		a.end(id)
		if behavior == "flood-held-ids" {
			for i := range flood {
				a.update(fmt.Sprintf(`{"sessionUpdate":"compaction_update","compactionId":"cmp_f%d","status":"in_progress"}`, i))
			}
		} else {
			chunk, _ := json.Marshal(strings.Repeat("s", bigSize))
			a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_big","status":"in_progress"}`)
			for range flood {
				a.update(fmt.Sprintf(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_big","content":{"type":"text","text":%s}}`, chunk))
			}
			a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_big","status":"completed"}`)
		}
		a.text("flood done")
		return
	case "plain", "sigterm":
		a.text("Hello.")
	case "claude-text":
		a.text("Compacting...")
		a.text("\n\nCompacting completed.")
		a.text("Done.")
	case "claude-text-failed":
		a.text("Compacting...")
		a.text("\n\nCompacting failed: provider overloaded")
	case "claude-text-open":
		a.text("Compacting...")
	case "toolcall":
		a.update(`{"sessionUpdate":"tool_call","toolCallId":"toolu_1","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`)
		a.update(`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"completed"}`)
	case "toolcall-failed":
		a.update(`{"sessionUpdate":"tool_call","toolCallId":"toolu_2","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`)
		a.update(`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_2","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: context window still exceeded"}}]}`)
	case "toolcall-cancel":
		// Claude's and codex's defect: the tool call stays in_progress.
		a.update(`{"sessionUpdate":"tool_call","toolCallId":"toolu_3","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`)
		a.waitCancel()
	case "opencode-marker":
		a.update(`{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"started","messageId":"msg_c1","reason":"auto"}}}`)
		a.update(`{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"completed","messageId":"msg_c1","reason":"auto"}}}`)
	case "opencode-abort":
		a.update(`{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"started","messageId":"msg_c2","reason":"manual"}}}`)
		a.waitCancel()
		a.update(`{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"failed","messageId":"msg_c2","reason":"manual","error":{"type":"aborted","message":"The operation was aborted."}}}}`)
	case "codex-text":
		// codex-acp 0.16's signal: the text, then its warning at once.
		a.text("Context compacted\n")
		a.text("Heads up: Long threads and multiple compactions can cause the model to be less accurate. Start a new thread when possible to keep threads small and targeted.")
		a.text("Continuing.")
	case "codex-notice":
		a.update(`{"sessionUpdate":"notice","severity":"info","title":"Context compacted"}`)
		a.text("*Context compacted to fit the model's context window.*\n\n")
	case "ignore-gate":
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_g1","status":"in_progress"}`)
		a.update(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_g1","content":{"type":"text","text":"## Retained"}}`)
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_g1","status":"completed","summary":[{"type":"text","text":"## Retained\n\nThe user is fixing the proxy."}]}`)
	case "crash":
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_c1","status":"in_progress"}`)
		a.out.Flush()
		fmt.Fprintln(os.Stderr, "fakeagent: panic: provider connection reset")
		os.Exit(3)
	case "open-standard":
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_o1","status":"in_progress"}`)
		a.update(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_o1","content":{"type":"text","text":"## Partial"}}`)
		a.end(id)
		// Too late: the turn is over and the proxy has settled it.
		a.update(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_o1","content":{"type":"text","text":" more"}}`)
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_o1","status":"completed"}`)
		a.text("After.")
		return
	case "v2-open":
		a.respond(id, `{}`)
		a.update(`{"sessionUpdate":"state_update","state":"running"}`)
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_v1","status":"in_progress"}`)
		a.update(`{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}`)
		return
	case "big":
		// One agent_message_chunk line of exactly bigSize bytes.
		a.bigUpdate(bigSize, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, `"}}`)
		a.out.Flush()
		a.text("after the big line")
	case "lenient-lines":
		// Lines the official TypeScript SDK reads although they are framed
		// or nested unusually (issue 18): a BOM, a form feed, a line
		// separator, a no-break space around them, a _meta nested 10,001
		// deep; the answer too.
		line := func(u string) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, a.sid, u)
		}
		deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
		a.write("\ufeff" + line(`{"sessionUpdate":"compaction_update","compactionId":"cmp_l1","status":"in_progress"}`))
		a.write("\f" + line(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_l1","content":{"type":"text","text":"## Retained"}}`))
		a.write("\u2028" + line(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"between"}}`))
		a.write(line(`{"sessionUpdate":"compaction_update","compactionId":"cmp_l2","status":"in_progress","_meta":{"d":`+deep+`}}`) + "\u00a0")
		a.write("\ufeff" + fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, id) + "\u00a0")
		return
	case "big-chunk-then-summary":
		// A compaction with two lines of exactly bigSize bytes (terminator
		// excluded) one after the other: a summary chunk, then the
		// completed update with the final summary.
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_b1","status":"in_progress"}`)
		a.bigUpdate(bigSize, `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_b1","content":{"type":"text","text":"`, `"}}`)
		a.bigUpdate(bigSize, `{"sessionUpdate":"compaction_update","compactionId":"cmp_b1","status":"completed","summary":[{"type":"text","text":"`, `"}]}`)
		a.out.Flush()
	case "big-compaction", "big-summary-chunk":
		// A compaction whose completed update (or whose one summary chunk,
		// before a completed update) carries a summary text that makes
		// the line exactly bigSize bytes, terminator excluded.
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_b1","status":"in_progress"}`)
		head, tail := `{"sessionUpdate":"compaction_update","compactionId":"cmp_b1","status":"completed","summary":[{"type":"text","text":"`, `"}]}`
		if behavior == "big-summary-chunk" {
			head, tail = `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_b1","content":{"type":"text","text":"`, `"}}`
		}
		a.bigUpdate(bigSize, head, tail)
		a.out.Flush()
		if behavior == "big-summary-chunk" {
			a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_b1","status":"completed"}`)
		}
	case "standard-wait":
		// Opens a standard compaction and works on it until the client
		// cancels (or its input ends: exit 0).
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_w1","status":"in_progress"}`)
		a.waitCancel()
	case "close-stdout":
		// Opens a compaction, then closes its output and stays alive until
		// a signal (see -trap) or a minute has passed.
		a.update(`{"sessionUpdate":"compaction_update","compactionId":"cmp_s1","status":"in_progress"}`)
		a.out.Flush()
		os.Stdout.Close()
		fmt.Fprintln(os.Stderr, "fakeagent: closed stdout")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "malformed":
		a.write(`this is not JSON {`)
		a.write(`{"jsonrpc":"2.0","method":"session/update","params":`)
		a.text("after the malformed lines")
	default:
		fmt.Fprintf(os.Stderr, "fakeagent: unknown behavior %q\n", behavior)
		os.Exit(112)
	}
	a.end(id)
}
