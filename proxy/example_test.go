package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/acpcompact/acpcompact/proxy"
)

// legacyAgent plays an agent that reports compaction the old way, as
// Claude's adapter did up to 0.74: agent text, no ID, no capability check.
func legacyAgent(stdin io.Reader, stdout io.WriteCloser) {
	defer stdout.Close()
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(sc.Bytes(), &m)
		switch m.Method {
		case "initialize":
			fmt.Fprintf(stdout, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentInfo":{"name":"@agentclientprotocol/claude-agent-acp","version":"0.74.0"}}}`+"\n", m.ID)
		case "session/prompt":
			for _, text := range []string{"Compacting...", "\n\nCompacting completed.", "Done."} {
				t, _ := json.Marshal(text)
				fmt.Fprintf(stdout, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%s}}}}`+"\n", t)
			}
			fmt.Fprintf(stdout, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`+"\n", m.ID)
		}
	}
}

// A client that advertises the compaction capability, in front of an agent
// that only knows the legacy text: the proxy picks the agent's profile from
// its agentInfo, and the client receives standard updates in the text's
// place, and everything else unchanged.
func ExampleProxy_Run() {
	p, err := proxy.New()
	if err != nil {
		panic(err)
	}
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	go legacyAgent(toAgentR, fromAgentW)

	client := strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}` + "\n" +
			`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}` + "\n")
	if err := p.Run(context.Background(), client, os.Stdout, toAgentW, fromAgentR); err != nil {
		panic(err)
	}
	// Output:
	// {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"@agentclientprotocol/claude-agent-acp","version":"0.74.0"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_bb7db2649a726f75fd9a87d8","status":"in_progress"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_bb7db2649a726f75fd9a87d8","status":"completed"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Done."}}}}
	// {"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}
}
