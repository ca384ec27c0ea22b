package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Session update discriminators: the `sessionUpdate` values of the two
// compaction updates, of the usage_update that may follow a compaction, and
// of the ACP v2 state_update that reports an agent's turn state.
const (
	KindUpdate       = "compaction_update"
	KindSummaryChunk = "compaction_summary_chunk"
	KindUsageUpdate  = "usage_update"
	// KindStateUpdate is the v2 turn-state update ("state": "running" or
	// "idle"); an idle one, with its stopReason, ends the turn it reports
	// on. This package has no encoder for it: the hosts only recognise it.
	KindStateUpdate = "state_update"
)

// Errors of the encoders and the decoder; every returned error that stems
// from one of these wraps it, so callers branch with errors.Is.
var (
	// ErrInvalidID: an empty compaction ID; ACP requires compactionId to be
	// a non-empty string.
	ErrInvalidID = errors.New("protocol: compaction ID must be a non-empty string")
	// ErrNotCompaction: a session update that is not a compaction update.
	ErrNotCompaction = errors.New("protocol: not a compaction session update")
)

// ID is an opaque, agent-owned compaction ID, unique within its session.
type ID string

// Status is a compaction's lifecycle status. The type is open: values the
// protocol may add later and `_`-prefixed extension values round-trip
// unchanged and are never treated as terminal.
type Status string

// The statuses ACP defines today.
const (
	InProgress Status = "in_progress"
	Completed  Status = "completed"
	Failed     Status = "failed"
	Cancelled  Status = "cancelled"
)

// Terminal reports whether s ends a compaction: completed, failed or
// cancelled. Unknown statuses are not terminal, so a client presents them as
// opaque states without inferring the end of the lifecycle.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Extension reports whether s is an implementation-specific status (one
// that begins with "_").
func (s Status) Extension() bool { return len(s) > 0 && s[0] == '_' }

// Trigger says why a compaction ran.
type Trigger string

// Triggers the project knows; others are allowed.
const (
	Manual Trigger = "manual" // the user asked (e.g. /compact)
	Auto   Trigger = "auto"   // the runtime hit its context budget
	Idle   Trigger = "idle"   // housekeeping while the session was idle
)

// Meta is an ACP `_meta` object, kept as raw JSON values so unknown keys and
// nested shapes survive untouched.
type Meta map[string]json.RawMessage

type patchState uint8

const (
	omitted patchState = iota
	null
	value
)

// Patch is a tri-state JSON field with ACP's patch semantics: omitted (the
// zero value; leaves the stored value unchanged), null (clears it), or a
// concrete value (replaces it). Use it with the `omitzero` struct tag so the
// omitted state leaves the key out of the JSON object.
type Patch[T any] struct {
	state patchState
	v     T
}

// Set returns a patch that replaces the stored value with v.
func Set[T any](v T) Patch[T] { return Patch[T]{state: value, v: v} }

// Null returns a patch that clears the stored value.
func Null[T any]() Patch[T] { return Patch[T]{state: null} }

// IsZero reports whether the patch is omitted; encoding/json's omitzero
// uses it.
func (p Patch[T]) IsZero() bool { return p.state == omitted }

// IsNull reports whether the patch clears the field.
func (p Patch[T]) IsNull() bool { return p.state == null }

// Get returns the concrete value and true, or the zero value and false when
// the patch is omitted or null.
func (p Patch[T]) Get() (T, bool) { return p.v, p.state == value }

// String renders the state for logs and test failures.
func (p Patch[T]) String() string {
	switch p.state {
	case omitted:
		return "<omitted>"
	case null:
		return "null"
	}
	return fmt.Sprint(p.v)
}

// MarshalJSON writes null or the value. The omitted state must be handled
// by the `omitzero` tag of the enclosing struct; marshalled alone it writes
// null, which is the closest meaning JSON has.
func (p Patch[T]) MarshalJSON() ([]byte, error) {
	if p.state != value {
		return []byte("null"), nil
	}
	return json.Marshal(p.v)
}

// UnmarshalJSON reads null as the null state and anything else as a value.
// encoding/json does not call it for an absent key, which stays omitted.
func (p *Patch[T]) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		var zero T
		*p = Patch[T]{state: null, v: zero}
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Patch[T]{state: value, v: v}
	return nil
}

// ContentBlock is an ACP content block. Text blocks are first-class; every
// other field, and every block type this package does not model (image,
// audio, resource_link, resource, future types), is kept verbatim in Extra
// so that nothing the runtime produced is lost on the way to the client.
type ContentBlock struct {
	// Type is the block's discriminator: "text", "image", ...
	Type string
	// Text is the payload of a "text" block.
	Text string
	// Extra holds every other field of the block, verbatim.
	Extra map[string]json.RawMessage
}

// Text returns a text content block; Markdown is allowed.
func Text(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// MarshalJSON writes the block with "type" first and other keys sorted, so
// golden files are stable.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	return b.appendJSON(make([]byte, 0, len(b.Text)+32))
}

// plain reports whether the block has no Extra fields, so that appendJSON
// writes exactly what json.Marshal would (Extra values are copied verbatim
// and only json.Marshal's final pass compacts them).
func (b ContentBlock) plain() bool { return len(b.Extra) == 0 && b.Type != "" }

// AppendBlocks appends blocks as a JSON array, each block as its
// MarshalJSON writes it, without reflection: a summary of tens of
// thousands of streamed blocks costs one pass, not a call and a copy a
// block. What it writes is byte for byte what json.Marshal writes for the
// slice.
func AppendBlocks(buf []byte, blocks []ContentBlock) ([]byte, error) {
	buf = append(buf, '[')
	for i, b := range blocks {
		if i > 0 {
			buf = append(buf, ',')
		}
		if b.plain() {
			buf, _ = b.appendJSON(buf) // plain: cannot fail
			continue
		}
		// Extra values are copied verbatim by appendJSON; json.Marshal's
		// pass compacts and escapes them as it would in the slice.
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		buf = append(buf, raw...)
	}
	return append(buf, ']'), nil
}

// AppendJSONString appends s as a JSON string, as encoding/json writes it
// (HTML characters escaped, invalid UTF-8 as U+FFFD).
func AppendJSONString(buf []byte, s string) []byte { return appendJSONString(buf, s) }

func (b ContentBlock) appendJSON(buf []byte) ([]byte, error) {
	if b.Type == "" {
		return nil, errors.New("protocol: content block has no type")
	}
	buf = append(buf, `{"type":`...)
	buf = appendJSONString(buf, b.Type)
	if b.Type == "text" {
		buf = append(buf, `,"text":`...)
		buf = appendJSONString(buf, b.Text)
	}
	if len(b.Extra) > 0 {
		keys := make([]string, 0, len(b.Extra))
		for k := range b.Extra {
			if k == "type" || (k == "text" && b.Type == "text") {
				continue
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			buf = append(buf, ',')
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			v := b.Extra[k]
			if !json.Valid(v) {
				return nil, fmt.Errorf("protocol: content block field %q is not valid JSON", k)
			}
			buf = append(buf, v...)
		}
	}
	return append(buf, '}'), nil
}

// UnmarshalJSON reads any content block, keeping unknown fields.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("protocol: content block: %w", err)
	}
	if m == nil {
		return errors.New("protocol: content block is null")
	}
	var out ContentBlock
	rawType, ok := m["type"]
	if !ok {
		return errors.New(`protocol: content block has no "type"`)
	}
	if err := json.Unmarshal(rawType, &out.Type); err != nil || out.Type == "" {
		return errors.New(`protocol: content block "type" is not a non-empty string`)
	}
	delete(m, "type")
	if out.Type == "text" {
		rawText, ok := m["text"]
		if !ok {
			return errors.New(`protocol: text content block has no "text"`)
		}
		if err := json.Unmarshal(rawText, &out.Text); err != nil {
			return errors.New(`protocol: text content block "text" is not a string`)
		}
		delete(m, "text")
	}
	if len(m) > 0 {
		out.Extra = m
	}
	*b = out
	return nil
}

// CompactionUpdate is the `compaction_update` session update: it creates the
// compaction entity on first sight and patches it afterwards.
type CompactionUpdate struct {
	// CompactionID is required and never empty.
	CompactionID ID `json:"compactionId"`
	// Status is required on every update.
	Status Status `json:"status"`
	// Summary replaces the accumulated summary; null or [] clear it.
	Summary Patch[[]ContentBlock] `json:"summary,omitzero"`
	// Error is a human-readable failure description.
	Error Patch[string] `json:"error,omitzero"`
	// Meta replaces (v1) or patches by top-level key (v2) the entity's _meta.
	Meta Patch[Meta] `json:"_meta,omitzero"`
}

// CompactionSummaryChunk is the `compaction_summary_chunk` session update:
// one content block appended to the compaction's summary.
type CompactionSummaryChunk struct {
	// CompactionID is required and never empty.
	CompactionID ID `json:"compactionId"`
	// Content is appended to the summary.
	Content ContentBlock `json:"content"`
	// Meta is scoped to this chunk; omitted and null both mean none.
	Meta Patch[Meta] `json:"_meta,omitzero"`
}

// UsageUpdate is the `usage_update` session update: the context window's
// use after a compaction, so the client's context gauge drops at the
// boundary.
type UsageUpdate struct {
	// Used is the context in use, in tokens.
	Used int64 `json:"used"`
	// Size is the context window, in tokens.
	Size int64 `json:"size"`
}

// MarshalJSON writes the update with its "sessionUpdate" discriminator.
func (u UsageUpdate) MarshalJSON() ([]byte, error) {
	type fields UsageUpdate
	return json.Marshal(struct {
		Kind string `json:"sessionUpdate"`
		fields
	}{KindUsageUpdate, fields(u)})
}

type updateFields CompactionUpdate
type chunkFields CompactionSummaryChunk

// MarshalJSON writes the update with its "sessionUpdate" discriminator.
func (u CompactionUpdate) MarshalJSON() ([]byte, error) {
	if u.CompactionID == "" {
		return nil, ErrInvalidID
	}
	if u.Status == "" {
		return nil, errors.New("protocol: compaction_update needs a status")
	}
	if buf, ok := u.appendPlain(); ok {
		return buf, nil
	}
	return json.Marshal(struct {
		Kind string `json:"sessionUpdate"`
		updateFields
	}{KindUpdate, updateFields(u)})
}

// appendPlain writes the common shapes (no _meta, plain summary blocks)
// directly, byte for byte what json.Marshal writes, without its reflection
// and its passes over the bytes; it reports false for any other shape.
func (u CompactionUpdate) appendPlain() ([]byte, bool) {
	if !u.Meta.IsZero() {
		return nil, false
	}
	blocks, _ := u.Summary.Get()
	n := 96 + len(u.CompactionID) + len(u.Status)
	for _, b := range blocks {
		if !b.plain() {
			return nil, false
		}
		n += len(b.Text) + len(b.Type) + 24
	}
	if e, ok := u.Error.Get(); ok {
		n += len(e) + 16
	}
	buf := make([]byte, 0, n)
	buf = append(buf, `{"sessionUpdate":"compaction_update","compactionId":`...)
	buf = appendJSONString(buf, string(u.CompactionID))
	buf = append(buf, `,"status":`...)
	buf = appendJSONString(buf, string(u.Status))
	if !u.Summary.IsZero() {
		buf = append(buf, `,"summary":`...)
		if blocks == nil {
			buf = append(buf, "null"...)
		} else {
			buf, _ = AppendBlocks(buf, blocks) // plain: cannot fail
		}
	}
	if !u.Error.IsZero() {
		buf = append(buf, `,"error":`...)
		if e, ok := u.Error.Get(); ok {
			buf = appendJSONString(buf, e)
		} else {
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}'), true
}

// UnmarshalJSON reads a compaction_update, enforcing the required fields.
func (u *CompactionUpdate) UnmarshalJSON(data []byte) error {
	var w struct {
		Kind *string `json:"sessionUpdate"`
		updateFields
		ID     *json.RawMessage `json:"compactionId"`
		Status *json.RawMessage `json:"status"`
	}
	if err := decodeHead(data, KindUpdate, &w, &w.Kind, &w.ID, &w.CompactionID); err != nil {
		return err
	}
	f := w.updateFields
	if err := requiredString(w.Status, "status", (*string)(&f.Status)); err != nil {
		return err
	}
	*u = CompactionUpdate(f)
	return nil
}

// MarshalJSON writes the chunk with its "sessionUpdate" discriminator.
func (c CompactionSummaryChunk) MarshalJSON() ([]byte, error) {
	if c.CompactionID == "" {
		return nil, ErrInvalidID
	}
	if c.Meta.IsZero() && c.Content.plain() {
		// The streaming hot path: written directly, byte for byte what
		// json.Marshal writes.
		buf := make([]byte, 0, 96+len(c.CompactionID)+len(c.Content.Type)+len(c.Content.Text)+len(c.Content.Text)/8)
		buf = append(buf, `{"sessionUpdate":"compaction_summary_chunk","compactionId":`...)
		buf = appendJSONString(buf, string(c.CompactionID))
		buf = append(buf, `,"content":`...)
		buf, _ = c.Content.appendJSON(buf) // plain: cannot fail
		return append(buf, '}'), nil
	}
	return json.Marshal(struct {
		Kind string `json:"sessionUpdate"`
		chunkFields
	}{KindSummaryChunk, chunkFields(c)})
}

// UnmarshalJSON reads a compaction_summary_chunk, enforcing required fields.
func (c *CompactionSummaryChunk) UnmarshalJSON(data []byte) error {
	var w struct {
		Kind *string `json:"sessionUpdate"`
		chunkFields
		ID      *json.RawMessage `json:"compactionId"`
		Content *json.RawMessage `json:"content"`
	}
	if err := decodeHead(data, KindSummaryChunk, &w, &w.Kind, &w.ID, &w.CompactionID); err != nil {
		return err
	}
	f := w.chunkFields
	if w.Content == nil || string(bytes.TrimSpace(*w.Content)) == "null" {
		return errors.New("protocol: compaction_summary_chunk needs a non-null content block")
	}
	if err := json.Unmarshal(*w.Content, &f.Content); err != nil {
		return err
	}
	*c = CompactionSummaryChunk(f)
	return nil
}

// decodeHead is how every compaction update's UnmarshalJSON begins: it
// decodes data into w, the kind's wire struct, checks that the
// discriminator (*kindField), where present, is kind, and reads the
// required compactionId (*rawID) into id. The three point into w, which
// stays each kind's own anonymous struct: encoding/json's errors name it.
func decodeHead(data []byte, kind string, w any, kindField **string, rawID **json.RawMessage, id *ID) error {
	if err := json.Unmarshal(data, w); err != nil {
		return fmt.Errorf("protocol: %s: %w", kind, err)
	}
	if k := *kindField; k != nil && *k != kind {
		return fmt.Errorf("protocol: sessionUpdate is %q, not %q", *k, kind)
	}
	return requiredString(*rawID, "compactionId", (*string)(id))
}

// UnmarshalUpdate decodes any compaction session update by its
// discriminator, returning *CompactionUpdate or *CompactionSummaryChunk.
// Other discriminators yield ErrNotCompaction. Like encoding/json, it
// matches keys case-insensitively: a lenient reading of sloppy peers.
func UnmarshalUpdate(data []byte) (any, error) {
	var head struct {
		Kind string `json:"sessionUpdate"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("protocol: session update: %w", err)
	}
	switch head.Kind {
	case KindUpdate:
		u := new(CompactionUpdate)
		return u, u.UnmarshalJSON(data)
	case KindSummaryChunk:
		c := new(CompactionSummaryChunk)
		return c, c.UnmarshalJSON(data)
	}
	return nil, fmt.Errorf("%w: %q", ErrNotCompaction, head.Kind)
}

func requiredString(raw *json.RawMessage, name string, dst *string) error {
	if raw == nil || string(bytes.TrimSpace(*raw)) == "null" {
		return fmt.Errorf("protocol: %q is required and non-null", name)
	}
	if err := json.Unmarshal(*raw, dst); err != nil {
		return fmt.Errorf("protocol: %q must be a string", name)
	}
	if *dst == "" {
		if name == "compactionId" {
			return ErrInvalidID
		}
		return fmt.Errorf("protocol: %q must not be empty", name)
	}
	return nil
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it: HTML-safe (<, > and & escaped), U+2028 and U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD. It follows encoding/json's appendString.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
