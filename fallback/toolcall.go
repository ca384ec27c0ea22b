package fallback

import (
	"context"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// ToolCallWording is the text of the ToolCall renderer. An empty field
// takes its default (see DefaultToolCallWording).
type ToolCallWording struct {
	// Title names the tool call.
	Title string
	// Failed is the content of a failed compaction; {error} stands for
	// the user-facing error text.
	Failed string
	// FailedBare is the content of a failure whose error text is missing
	// or only repeats that compaction failed.
	FailedBare string
	// Cancelled is the content of a cancelled compaction.
	Cancelled string
}

// DefaultToolCallWording returns the peers' wording ("Compact conversation",
// "Compaction failed: <err>") plus a cancelled text they lack.
func DefaultToolCallWording() ToolCallWording {
	return ToolCallWording{
		Title:      "Compact conversation",
		Failed:     "Compaction failed: {error}",
		FailedBare: "Compaction failed",
		Cancelled:  "Compaction cancelled",
	}
}

func (w ToolCallWording) orDefaults() ToolCallWording {
	d := DefaultToolCallWording()
	w.Title = orDefault(w.Title, d.Title)
	w.Failed = orDefault(w.Failed, d.Failed)
	w.FailedBare = orDefault(w.FailedBare, d.FailedBare)
	w.Cancelled = orDefault(w.Cancelled, d.Cancelled)
	return w
}

func (w ToolCallWording) reason(ev emitter.Event) string {
	if ev.Status == protocol.Cancelled {
		return w.Cancelled
	}
	return failureText(ev, w.Failed, w.FailedBare)
}

// ToolCallOption configures ToolCall.
type ToolCallOption func(*toolCallRenderer)

// WithToolCallWording replaces the default title and failure texts; empty
// fields keep their default.
func WithToolCallWording(w ToolCallWording) ToolCallOption {
	return func(t *toolCallRenderer) { t.w = w.orDefaults() }
}

// WithSummaryContent shows the summary as the tool call's content: each
// streamed chunk updates it, and a completion sets the final summary. It is
// off by default, like the peers' tool call. ACP v1 tool call content can
// only be replaced, not appended to, so every chunk re-sends the summary so
// far: keep it for summaries of modest size.
func WithSummaryContent() ToolCallOption { return func(t *toolCallRenderer) { t.content = true } }

// ToolCall renders compaction as a tool call, as Claude's and codex's ACP
// adapters do: a tool_call titled "Compact conversation", kind "think",
// in_progress, with ID "compact-<compaction ID>" ("compact-<child session
// ID>:<compaction ID>" for a child's compaction, whose IDs may collide with
// another child's on the parent's stream), then one tool_call_update.
//
// Unlike the peers' it always settles: completed, or failed with the reason
// as text content. A cancel is failed too ("Compaction cancelled"), since ACP
// tool calls have no cancelled status and a tool call left in_progress
// leaves the client's spinner running. A replayed compaction is a single
// tool_call already in its terminal status. Safe for concurrent use; see
// Text on the state that WithSummaryContent keeps.
func ToolCall(opts ...ToolCallOption) emitter.Renderer {
	return configure(&toolCallRenderer{w: DefaultToolCallWording()}, opts)
}

type toolCallRenderer struct {
	w        ToolCallWording
	content  bool
	streamed streams
}

// ToolCallIDPrefix begins the toolCallId of every tool call ToolCall
// renders; see ToolCallID.
const ToolCallIDPrefix = "compact-"

// ToolCallID is the toolCallId ToolCall gives compaction id:
// "compact-<id>". A host that rewrites or recognises the fallback's tool
// call (the proxy, the test matrix) derives the ID here rather than
// spelling the scheme out.
func ToolCallID(id protocol.ID) string { return ToolCallIDPrefix + string(id) }

func toolCallID(ev emitter.Event) string { return ToolCallID(ev.ID) }

// Render implements emitter.Renderer.
func (t *toolCallRenderer) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	id := toolCallID(ev)
	switch ev.Kind {
	case emitter.EventStarted:
		return n.Notify(ctx, ev.SessionID, &toolCall{
			SessionUpdate: "tool_call", ToolCallID: id, Title: t.w.Title, Kind: "think",
			Status: toolInProgress, Meta: copyMeta(ev.Meta),
		})
	case emitter.EventHeartbeat:
		return n.Notify(ctx, ev.SessionID, &toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: id, Status: toolInProgress})
	case emitter.EventChunk:
		if !t.content {
			return nil
		}
		all := t.streamed.add(ev, ev.Content, true)
		return n.Notify(ctx, ev.SessionID, &toolCallUpdate{
			SessionUpdate: "tool_call_update", ToolCallID: id, Content: protocol.Set(contentOf(all)),
		})
	case emitter.EventSettled:
		if ev.Unseen {
			// The client never saw the tool call start: it gets it whole,
			// in its terminal status, as a replay shows it.
			return t.firstSight(ctx, ev, id, n)
		}
		u := &toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: id, Status: toolCompleted, Meta: copyMeta(ev.Meta)}
		if t.content {
			t.streamed.take(ev)
		}
		if ev.Status != protocol.Completed {
			u.Status = toolFailed
			u.Content = protocol.Set(contentOf([]protocol.ContentBlock{protocol.Text(t.w.reason(ev))}))
		} else if t.content && !ev.Summary.IsZero() {
			// An omitted summary keeps the streamed content the client
			// already shows; a concrete or null one replaces or clears it.
			u.Content = protocol.Set(contentOf(summaryOf(ev, nil)))
		}
		return n.Notify(ctx, ev.SessionID, u)
	case emitter.EventReplayed:
		return t.firstSight(ctx, ev, id, n)
	}
	return nil
}

// firstSight renders a settled compaction the client has not seen start
// (a replay, or one held between turns) as one tool call in its terminal
// status.
func (t *toolCallRenderer) firstSight(ctx context.Context, ev emitter.Event, id string, n emitter.Notifier) error {
	c := &toolCall{
		SessionUpdate: "tool_call", ToolCallID: id, Title: t.w.Title, Kind: "think",
		Status: toolCompleted, Meta: copyMeta(ev.Meta),
	}
	if ev.Status != protocol.Completed {
		c.Status = toolFailed
		c.Content = contentOf([]protocol.ContentBlock{protocol.Text(t.w.reason(ev))})
	} else if t.content {
		c.Content = contentOf(summaryOf(ev, nil))
	}
	return n.Notify(ctx, ev.SessionID, c)
}

func contentOf(bs []protocol.ContentBlock) []toolCallContent {
	out := make([]toolCallContent, 0, len(bs))
	for _, b := range bs {
		out = append(out, toolCallContent{Type: "content", Content: b})
	}
	return out
}
