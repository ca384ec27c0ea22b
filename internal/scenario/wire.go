package scenario

import "encoding/json"

// The ACP shapes the agent writes itself (agentkit writes the compaction
// updates). Field order follows the schemas, which keeps the wire readable.

type implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

type agentCapabilitiesV1 struct {
	LoadSession bool `json:"loadSession"`
}

type initializeV1 struct {
	ProtocolVersion   int                 `json:"protocolVersion"`
	AgentCapabilities agentCapabilitiesV1 `json:"agentCapabilities"`
	AuthMethods       []any               `json:"authMethods"`
	AgentInfo         implementation      `json:"agentInfo"`
}

// agentCapabilitiesV2: session {} is the baseline session methods (new,
// list, resume, close, prompt, cancel, update).
type agentCapabilitiesV2 struct {
	Session struct{} `json:"session"`
}

type initializeV2 struct {
	ProtocolVersion int                 `json:"protocolVersion"`
	Info            implementation      `json:"info"`
	Capabilities    agentCapabilitiesV2 `json:"capabilities"`
}

type newSessionResult struct {
	SessionID         string `json:"sessionId"`
	AvailableCommands []any  `json:"availableCommands,omitempty"` // v2 only
}

type sessionInfo struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title,omitempty"`
	UpdatedAt string `json:"updatedAt,omitempty"`
}

type listSessionsResult struct {
	Sessions []sessionInfo `json:"sessions"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func text(s string) json.RawMessage {
	b, _ := json.Marshal(textBlock{Type: "text", Text: s})
	return b
}

// messageChunk is a user_message_chunk or agent_message_chunk. v1 allows
// and v2 requires a messageId; the agent always sends one, the same live
// and on replay.
type messageChunk struct {
	SessionUpdate string          `json:"sessionUpdate"`
	MessageID     string          `json:"messageId"`
	Content       json.RawMessage `json:"content"`
}

// messageUpsert is a v2 user_message or agent_message: its content replaces
// what the client holds for the message ID.
type messageUpsert struct {
	SessionUpdate string            `json:"sessionUpdate"`
	MessageID     string            `json:"messageId"`
	Content       []json.RawMessage `json:"content"`
}

// stateUpdate is the v2 session state; StopReason and Error only on idle.
type stateUpdate struct {
	SessionUpdate string    `json:"sessionUpdate"`
	State         string    `json:"state"`
	StopReason    string    `json:"stopReason,omitempty"`
	Error         *rpcError `json:"error,omitempty"`
}

type rpcError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

type promptResultV1 struct {
	StopReason string `json:"stopReason"`
}

type promptResultV2 struct {
	MessageID string `json:"messageId"`
}

const (
	compactHint        = "nosummary | fail | failearly | slow | hang | panic | flood N | twice"
	compactDescription = "Compact the conversation, or act out a compaction scenario"
)

type availableCommandsUpdate struct {
	SessionUpdate     string `json:"sessionUpdate"`
	AvailableCommands []any  `json:"availableCommands"`
}

func availableCommandsV1() availableCommandsUpdate {
	type input struct {
		Hint string `json:"hint"`
	}
	type command struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Input       input  `json:"input"`
	}
	return availableCommandsUpdate{
		SessionUpdate:     "available_commands_update",
		AvailableCommands: []any{command{Name: "compact", Description: compactDescription, Input: input{Hint: compactHint}}},
	}
}

func availableCommandsV2() []any {
	type input struct {
		Type string `json:"type"`
		Hint string `json:"hint"`
	}
	type command struct {
		Type        string `json:"type"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Input       input  `json:"input"`
	}
	return []any{command{Type: "command", Name: "compact", Description: compactDescription, Input: input{Type: "text", Hint: compactHint}}}
}
