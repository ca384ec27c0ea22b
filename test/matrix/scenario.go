// Package matrix turns the "Preview validation" list of the Session
// Compaction RFD into a scenario matrix: every bullet of the list is a set of
// named scenarios, and every scenario runs against targets that report
// compaction in different ways:
//
//   - EmitterTarget drives package emitter directly and records what it
//     sends (wiretest.Recorder), inside a transcript of the exchange an
//     agent would have around it;
//   - KitTarget runs a tiny agent on sourcegraph/jsonrpc2 behind package
//     agentkit, over a net.Pipe, with a jsonrpc2 client peer;
//   - AcpsdkTarget runs the same tiny agent on coder/acp-go-sdk behind
//     agentkit/acpsdk, with the same client peer;
//   - AgentTarget runs the scenario agent binary (examples/scenario-agent)
//     over stdio with a line-oriented client;
//   - ProxyTarget runs the scenario agent behind `acpcompact proxy`, with
//     AgentTarget's client and wants: the proxy is transparent for a
//     correct agent.
//
// A target plays a Scenario and returns a Run: the transcript of every
// connection ("client <json>" / "agent <json>"). Verify then judges it the
// same way for every target: the conformance Checker reports no violation,
// every agent session/update is valid against the official schema of the
// negotiated version, and the timeline the conformance Reducer builds from
// the agent's updates is the one the scenario expects.
//
// A target asked for a history (the History field of each target) then
// replays the runtime's records of every compaction it reported, by
// session/load to a client that holds nothing, and VerifyLiveReplay checks
// that each compaction the live client held is the one that client holds:
// live and replay agree.
//
// Scenarios are data, so other test suites (a client's, a proxy's) can play
// them too: Scenarios returns them all, By returns one bullet's.
package matrix

import (
	"encoding/json"
	"errors"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Bullet is one item of the RFD's "Preview validation" list.
type Bullet string

// The bullets of the "Preview validation" list, in its order.
const (
	// BulletCapability: V1 capability enforcement for both live updates and
	// replay, including Clients that omit the capability or send null.
	BulletCapability Bullet = "V1 capability enforcement for both live updates and replay"
	// BulletLifecycle: lifecycle transitions to completed, failed, and
	// cancelled, including runtimes that only expose completed compactions.
	BulletLifecycle Bullet = "Lifecycle transitions to completed, failed, and cancelled"
	// BulletSummary: summary chunk ordering and first-seen ID
	// initialization, authoritative replacement and clearing, completion
	// with an omitted summary, chunks after terminal updates, and failure or
	// cancellation after partial output.
	BulletSummary Bullet = "Summary chunk ordering, replacement, clearing and partial output"
	// BulletReplay: history replay without duplicating accumulated summary
	// content after reconnecting, including v1 message chunks without IDs on
	// either side of a compaction boundary.
	BulletReplay Bullet = "History replay without duplicating accumulated summary content"
	// BulletUnknownV2: unknown statuses and v2 updates.
	BulletUnknownV2 Bullet = "Unknown statuses and v2 updates"
	// BulletSafeOmission: safe omission of summaries that cannot be exposed
	// to the user (the second half of the list's last bullet).
	BulletSafeOmission Bullet = "Safe omission of summaries that cannot be exposed to the user"
)

// Bullets returns the bullets in the list's order.
func Bullets() []Bullet {
	return []Bullet{BulletCapability, BulletLifecycle, BulletSummary, BulletReplay, BulletUnknownV2, BulletSafeOmission}
}

// Client is the client a scenario connects with.
type Client struct {
	// Version is the protocolVersion the client asks for: 1 or 2.
	Version int
	// Caps is the raw clientCapabilities of a v1 initialize; nil omits the
	// key. Ignored for v2, which needs no capability.
	Caps json.RawMessage
}

// Capable reports whether the client may receive compaction updates: v2, or
// a v1 client whose clientCapabilities.session.compaction is an object.
func (c Client) Capable() bool {
	if c.Version == 2 {
		return true
	}
	var caps struct {
		Session *struct {
			Compaction json.RawMessage `json:"compaction"`
		} `json:"session"`
	}
	if json.Unmarshal(c.Caps, &caps) != nil || caps.Session == nil {
		return false
	}
	raw := caps.Session.Compaction
	return len(raw) > 0 && raw[0] == '{'
}

// InitializeParams returns the params of the client's initialize request.
func (c Client) InitializeParams() json.RawMessage {
	if c.Version == 2 {
		return json.RawMessage(`{"protocolVersion":2,"info":{"name":"matrix-client","version":"1.0.0"},"capabilities":{}}`)
	}
	if c.Caps == nil {
		return json.RawMessage(`{"protocolVersion":1,"clientInfo":{"name":"matrix-client","version":"1.0.0"}}`)
	}
	return json.RawMessage(`{"protocolVersion":1,"clientCapabilities":` + string(c.Caps) + `,"clientInfo":{"name":"matrix-client","version":"1.0.0"}}`)
}

// The clients the scenarios use. Only V1Capable and V2 may receive
// compaction updates; the others are the RFD's ways of not advertising the
// capability and the peers' known misreadings of it.
var (
	V1Capable      = Client{Version: 1, Caps: json.RawMessage(`{"session":{"compaction":{}}}`)}
	V1NoCaps       = Client{Version: 1}
	V1NoSession    = Client{Version: 1, Caps: json.RawMessage(`{"fs":{"readTextFile":true}}`)}
	V1SessionNull  = Client{Version: 1, Caps: json.RawMessage(`{"session":null}`)}
	V1NoCompaction = Client{Version: 1, Caps: json.RawMessage(`{"session":{}}`)}
	V1Null         = Client{Version: 1, Caps: json.RawMessage(`{"session":{"compaction":null}}`)}
	V1False        = Client{Version: 1, Caps: json.RawMessage(`{"session":{"compaction":false}}`)}
	V1True         = Client{Version: 1, Caps: json.RawMessage(`{"session":{"compaction":true}}`)}
	V2             = Client{Version: 2}
)

// TurnKind says what the client does to start a turn.
type TurnKind int

const (
	// Prompt sends session/prompt; the turn ends with its response (v1) or
	// the idle state_update (v2).
	Prompt TurnKind = iota + 1
	// Load replays the session's history: session/load (v1) or
	// session/resume with replayFrom {"type":"start"} (v2).
	Load
	// Reconnect closes the connection and opens a new one to the same
	// agent (initialize again); the client keeps the timeline it holds.
	Reconnect
)

// Op is what a step does.
type Op int

// Step operations. The runtime's calls (Start, Chunk, Complete, Fail,
// Cancel, Replay) go through the emitter, or through agentkit's Session for
// KitTarget; Message and Raw are the agent's own updates.
const (
	// OpStart opens compaction ID (emitter.WithID; UserDisplayable when
	// Displayable; Meta as its start _meta).
	OpStart Op = iota + 1
	// OpChunk streams Text as a summary chunk of ID.
	OpChunk
	// OpComplete settles ID as completed; Summary decides the summary
	// patch.
	OpComplete
	// OpFail reports the failure of ID with Err as the cause; a runtime
	// holding no handle of ID starts it first (a failure before any start).
	OpFail
	// OpCancel settles ID as cancelled: the runtime's report of a user
	// cancel. Scenarios put an OpUserCancel before it.
	OpCancel
	// OpUserCancel is the client sending session/cancel; the runtime sees
	// its prompt's context end before the next step.
	OpUserCancel
	// OpMessage sends an agent_message_chunk without a messageId.
	OpMessage
	// OpRaw sends Raw as a session/update's update, verbatim (an update
	// the emitter does not produce, such as an extension status).
	OpRaw
	// OpReplay replays Record (emitter.Session.Replay).
	OpReplay
	// OpExpect checks the client's timeline at this point against Rows.
	OpExpect
)

// SummaryMode is the summary patch of an OpComplete or OpFail.
type SummaryMode int

// Summary patches.
const (
	// KeepSummary omits the summary: the client keeps what was streamed.
	KeepSummary SummaryMode = iota
	// SetSummary sends Texts as the authoritative summary.
	SetSummary
	// ClearSummary sends summary: null.
	ClearSummary
	// EmptySummary sends Summary() with no blocks, which clears too.
	EmptySummary
)

// Step is one action of a turn.
type Step struct {
	Op Op
	ID protocol.ID
	// Text is a chunk's or a message's text.
	Text string
	// Texts are the summary blocks of SetSummary.
	Texts []string
	// Summary is the summary patch of OpComplete and OpFail.
	Summary SummaryMode
	// Displayable marks an OpStart's summary as user-displayable.
	Displayable bool
	// Meta is an OpStart's _meta, or an OpComplete's settle _meta.
	Meta protocol.Meta
	// Err is an OpFail's cause.
	Err string
	// Raw is an OpRaw's update.
	Raw json.RawMessage
	// Record is an OpReplay's record.
	Record emitter.Record
	// Rows is what OpExpect wants the client's timeline to be.
	Rows []string
	// WantErr, when set, is the error the call must return (errors.Is);
	// otherwise it must succeed.
	WantErr error
}

// Turn is one exchange the client starts.
type Turn struct {
	Kind  TurnKind
	Steps []Step
}

// AgentTurn is one exchange with the scenario agent binary.
type AgentTurn struct {
	// Prompt is the prompt text; empty for a load.
	Prompt string
	// Load replays the session (session/load; v2 session/resume).
	Load bool
	// Cancel sends session/cancel once the turn's script is under way: at
	// its first compaction update, fallback form or agent message.
	Cancel bool
	// CancelEarly sends session/cancel right behind the prompt, before the
	// agent can have started anything.
	CancelEarly bool
}

// AgentScript is how the scenario agent binary expresses a scenario.
type AgentScript struct {
	// Flags are the agent's command-line flags.
	Flags []string
	Turns []AgentTurn
	// Want is the final timeline (rows as Scenario.Want) with compaction
	// IDs renamed c1, c2, ... in order of first appearance and _meta left
	// out; "*" in a row matches any text.
	Want []string
	// WantReplay, when set, is the timeline of a client that rebuilds its
	// view from the last replay alone, in the same form.
	WantReplay []string
	// KnownDefect, when set, describes a defect of the project that makes
	// this script fail today; the tests skip it unless
	// MATRIX_KNOWN_DEFECTS=1.
	KnownDefect string
}

// Scenario is one named case of one bullet.
type Scenario struct {
	// Name is unique within its bullet.
	Name   string
	Bullet Bullet
	// Doc says what the scenario shows.
	Doc    string
	Client Client
	// Fallback names the renderer (fallback.ByName) for a v1 client
	// without the capability; empty for none.
	Fallback string
	// Turns are played in order by EmitterTarget and KitTarget. A session
	// (sess_1) is created first.
	Turns []Turn
	// Want is the client's final timeline, one row per item as
	// conformance.Reducer.Render writes it. When nil, it is not checked.
	Want []string
	// WantCompactions, when set, is the final timeline's compaction rows
	// alone, for scenarios whose message rows a v1 client cannot keep
	// straight across a reload.
	WantCompactions []string
	// WantReplay, when set, is the timeline of a client that rebuilds its
	// view from the last Load turn alone.
	WantReplay []string
	// NoKit, when set, is why KitTarget cannot express the scenario.
	NoKit string
	// Agent is the scenario for the scenario agent binary; nil when it
	// cannot express it, with the reason in NoAgent.
	Agent   *AgentScript
	NoAgent string
}

// ErrNotExpressible is returned (wrapped) by a target that cannot play a
// scenario; the reason follows it.
var ErrNotExpressible = errors.New("matrix: the target cannot express this scenario")

// By returns the scenarios of one bullet.
func By(b Bullet) []Scenario {
	var out []Scenario
	for _, s := range Scenarios() {
		if s.Bullet == b {
			out = append(out, s)
		}
	}
	return out
}
