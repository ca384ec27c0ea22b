package fallback

import (
	"context"
	"encoding/json"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Marker keys.
const (
	// DefaultMarkerKey is the _meta key of Marker unless WithKey says
	// otherwise.
	DefaultMarkerKey = "acpcompact/compaction"
	// OpencodeMarkerKey is the _meta key opencode uses for its marker.
	OpencodeMarkerKey = "opencode/compaction"
)

// MarkerOption configures Marker.
type MarkerOption func(*markerRenderer)

// WithKey sets the _meta key the marker is stored under. ACP reserves
// _meta for extensions, and a namespaced key ("example.com/compaction")
// keeps the marker apart from other extensions' keys. An empty key is
// ignored.
func WithKey(key string) MarkerOption {
	return func(m *markerRenderer) {
		if key != "" {
			m.key = key
		}
	}
}

// Marker renders compaction as a session_info_update carrying only a _meta
// record under one key (DefaultMarkerKey):
//
//	{"status":"started|completed|failed|cancelled","compactionId":"…","trigger":"manual|auto|idle",
//	 "error":"…"}
//
// error appears only for a failure or cancel with user-facing text,
// trigger only when known. Clients that do not know the key ignore the
// update; clients that do can track each compaction by ID without matching
// prose. The summary is never sent. Safe for concurrent use.
func Marker(opts ...MarkerOption) emitter.Renderer {
	return configure(&markerRenderer{key: DefaultMarkerKey, value: acpcompactValue}, opts)
}

// OpencodeMarker renders opencode's own marker, for clients built against
// opencode: key "opencode/compaction", value
//
//	{"status":"started|completed|failed","messageId":"<compaction ID>","reason":"auto|manual",
//	 "error":{"type":"…","message":"…"}}
//
// opencode has no cancelled status: a cancel is failed with error type
// "aborted", and any other failure has type "compaction.failed". opencode
// knows only manual and auto: idle, like any trigger but manual, is reported
// as "auto", and a record without a trigger as "manual", the emitter's
// default. The summary is never sent.
func OpencodeMarker() emitter.Renderer {
	return &markerRenderer{key: OpencodeMarkerKey, value: opencodeValue}
}

type markerRenderer struct {
	key   string
	value func(ev emitter.Event) any
}

// Render implements emitter.Renderer.
func (m *markerRenderer) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	switch ev.Kind {
	case emitter.EventStarted, emitter.EventHeartbeat, emitter.EventSettled, emitter.EventReplayed:
		// A heartbeat repeats the start marker: it is idempotent for a
		// client keyed by ID and shows a watchdog that the agent is alive.
	default:
		return nil
	}
	raw, err := json.Marshal(m.value(ev))
	if err != nil {
		return err
	}
	return n.Notify(ctx, ev.SessionID, &sessionInfoUpdate{SessionUpdate: "session_info_update", Meta: withMeta(ev.Meta, m.key, raw)})
}

func started(ev emitter.Event) bool {
	return ev.Kind == emitter.EventStarted || ev.Kind == emitter.EventHeartbeat
}

type acpcompactMarker struct {
	Status       string           `json:"status"`
	CompactionID protocol.ID      `json:"compactionId"`
	Trigger      protocol.Trigger `json:"trigger,omitempty"`
	Error        string           `json:"error,omitempty"`
}

func acpcompactValue(ev emitter.Event) any {
	v := acpcompactMarker{Status: string(ev.Status), CompactionID: ev.ID, Trigger: ev.Trigger}
	if started(ev) {
		v.Status = "started"
	} else if ev.Status == protocol.Failed || ev.Status == protocol.Cancelled {
		v.Error = errorText(ev)
	}
	return v
}

type opencodeMarker struct {
	Status    string         `json:"status"`
	MessageID protocol.ID    `json:"messageId"`
	Reason    string         `json:"reason"`
	Error     *opencodeError `json:"error,omitempty"`
}

type opencodeError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func opencodeValue(ev emitter.Event) any {
	v := opencodeMarker{Status: "started", MessageID: ev.ID, Reason: "auto"}
	// opencode knows only a user's /compact and its own budget trigger;
	// the emitter's default trigger is manual, so an unknown one is too.
	if ev.Trigger == protocol.Manual || ev.Trigger == "" {
		v.Reason = "manual"
	}
	if started(ev) {
		return v
	}
	switch ev.Status {
	case protocol.Completed:
		v.Status = "completed"
	case protocol.Cancelled:
		v.Status = "failed"
		v.Error = &opencodeError{Type: "aborted", Message: orDefault(errorText(ev), "Compaction cancelled")}
	default:
		v.Status = "failed"
		v.Error = &opencodeError{Type: "compaction.failed", Message: orDefault(errorText(ev), "Compaction failed")}
	}
	return v
}

// configure applies the non-nil options to r, a renderer holding its
// defaults, and returns it. Text, ToolCall and Marker each have an option
// type of their own (the public API), applied alike.
func configure[R any, O ~func(*R)](r *R, opts []O) *R {
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	return r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
