package fallback

import (
	"context"
	"errors"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Wording is the prose the Text renderer writes. An empty field takes its
// default (see DefaultWording), so a Wording that sets only the fields an
// agent cares about is complete.
type Wording struct {
	// Started opens a live compaction. Replays never show it.
	Started string
	// Completed, Failed and Cancelled state the outcome, live and on
	// replay. In Failed, {error} stands for the user-facing error text.
	Completed string
	Failed    string
	Cancelled string
	// FailedBare is the outcome of a failure whose error text is missing
	// or only repeats that compaction failed.
	FailedBare string
	// Separator surrounds every outcome, live and on replay: it precedes
	// the outcome and ends its chunk, and a summary shown after the outcome
	// (WithSummary) is followed by one more. v1 clients join an agent's
	// message chunks into one message, so without it the outcome would run
	// into the text before it, and the agent's next message into the
	// outcome ("Compacting completed.Context compacted: ...", seen in
	// acpx).
	Separator string
	// Heartbeat is appended on every heartbeat (emitter.WithHeartbeat).
	// The default, empty, sends nothing: prose cannot be invisible, so
	// showing life is the agent's explicit choice (e.g. ".").
	Heartbeat string
}

// DefaultWording returns the wording of the peers' agent text fallback,
// which users of existing ACP clients already know.
func DefaultWording() Wording {
	return Wording{
		Started:    "Compacting...",
		Completed:  "Compacting completed.",
		Failed:     "Compacting failed: {error}",
		FailedBare: "Compacting failed.",
		Cancelled:  "Compacting cancelled.",
		Separator:  "\n\n",
	}
}

func (w Wording) orDefaults() Wording {
	d := DefaultWording()
	w.Started = orDefault(w.Started, d.Started)
	w.Completed = orDefault(w.Completed, d.Completed)
	w.Failed = orDefault(w.Failed, d.Failed)
	w.FailedBare = orDefault(w.FailedBare, d.FailedBare)
	w.Cancelled = orDefault(w.Cancelled, d.Cancelled)
	w.Separator = orDefault(w.Separator, d.Separator)
	return w
}

// outcome returns the outcome sentence of a terminal event.
func (w Wording) outcome(ev emitter.Event) string {
	switch ev.Status {
	case protocol.Completed:
		return w.Completed
	case protocol.Cancelled:
		return w.Cancelled
	}
	return failureText(ev, w.Failed, w.FailedBare)
}

// failureText fills a failure template's {error} with the event's
// user-facing error, or returns bare when there is nothing more to say than
// the generic text. Text and ToolCall word failures alike.
func failureText(ev emitter.Event, template, bare string) string {
	if !strings.Contains(template, "{error}") {
		return template
	}
	reason := errorText(ev)
	if isGenericFailure(reason, bare) {
		return bare
	}
	return strings.Replace(template, "{error}", reason, 1)
}

// TextOption configures Text.
type TextOption func(*textRenderer)

// WithWording replaces the default prose; empty fields keep their default.
func WithWording(w Wording) TextOption {
	return func(t *textRenderer) { t.w = w.orDefaults() }
}

// WithSummary shows a completed compaction's summary after the completion
// message. It is off by default because a summary in the conversation reads
// as something the agent said; the emitter's SummaryPolicy has already
// decided what of it may be shown at all. Streamed chunks are never echoed
// as they arrive: the text kept is the final summary, or what was streamed
// when the completion left the summary unchanged.
func WithSummary() TextOption { return func(t *textRenderer) { t.summary = true } }

// Text renders compaction as agent_message_chunk prose: a start line for a
// live compaction and one outcome message for each settled or replayed
// one, a paragraph of its own ("\n\nCompacting completed.\n\n"), so the
// messages on either side stay apart. Chunks are never echoed.
//
// Safe for concurrent use. With WithSummary it keeps each open compaction's
// streamed blocks, keyed by session and compaction ID, until
// its outcome; a session mirrored live to several connections therefore
// needs one renderer per connection.
func Text(opts ...TextOption) emitter.Renderer {
	return configure(&textRenderer{w: DefaultWording()}, opts)
}

type textRenderer struct {
	w        Wording
	summary  bool
	streamed streams
}

// Render implements emitter.Renderer.
func (t *textRenderer) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	switch ev.Kind {
	case emitter.EventStarted:
		return n.Notify(ctx, ev.SessionID, messageChunk(protocol.Text(t.w.Started), copyMeta(ev.Meta)))
	case emitter.EventHeartbeat:
		if t.w.Heartbeat == "" {
			return nil
		}
		return n.Notify(ctx, ev.SessionID, messageChunk(protocol.Text(t.w.Heartbeat), nil))
	case emitter.EventChunk:
		if t.summary {
			t.streamed.add(ev, ev.Content, false)
		}
		return nil
	case emitter.EventSettled, emitter.EventReplayed:
		var summary []protocol.ContentBlock
		if t.summary {
			var streamed []protocol.ContentBlock
			if ev.Kind == emitter.EventSettled {
				streamed = t.streamed.take(ev)
			}
			if ev.Status == protocol.Completed {
				summary = summaryOf(ev, streamed)
			}
		}
		// The outcome is a paragraph of its own, live and replayed alike:
		// the separator before it keeps it off the text before, the one
		// after keeps the next message (or the summary) off it.
		msg := t.w.Separator + t.w.outcome(ev) + t.w.Separator
		err := n.Notify(ctx, ev.SessionID, messageChunk(protocol.Text(msg), copyMeta(ev.Meta)))
		for _, b := range summary {
			err = errors.Join(err, n.Notify(ctx, ev.SessionID, messageChunk(b, nil)))
		}
		if len(summary) > 0 {
			err = errors.Join(err, n.Notify(ctx, ev.SessionID, messageChunk(protocol.Text(t.w.Separator), nil)))
		}
		return err
	}
	return nil
}
