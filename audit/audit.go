package audit

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/acpcompact/acpcompact/protocol"
)

// Role says who produced a history item.
type Role string

// The roles of history items.
const (
	// User is a message the user sent (a prompt, or a replayed user
	// message).
	User Role = "user"
	// Agent is a message the agent sent.
	Agent Role = "agent"
	// Tool is a tool call: its title, locations, rawInput and output.
	Tool Role = "tool"
	// Summary is an earlier compaction's summary, which a later compaction
	// replaces along with what followed it. It is read for references only.
	Summary Role = "summary"
)

// Kind names what a Loss is.
type Kind string

// The kinds of loss; the package documentation gives each one's grammar and
// survival rule.
const (
	KindPath       Kind = "path"
	KindURL        Kind = "url"
	KindCommit     Kind = "commit"
	KindChecksum   Kind = "checksum"
	KindVersion    Kind = "version"
	KindIssue      Kind = "issue"
	KindIdentifier Kind = "identifier"
	KindErrorCode  Kind = "error-code"
	KindRequest    Kind = "open-request"
	KindPromise    Kind = "open-promise"
	KindCorrection Kind = "correction"
)

// Kinds lists every Kind in the order the documentation gives them.
func Kinds() []Kind {
	return []Kind{KindPath, KindURL, KindCommit, KindChecksum, KindVersion, KindIssue,
		KindIdentifier, KindErrorCode, KindRequest, KindPromise, KindCorrection}
}

// Item is one item of the history a compaction replaces.
type Item struct {
	// Role says who produced it.
	Role Role
	// Text is the item's text: a message's text, or a tool call's title
	// and output.
	Text string
	// Locations are a tool call's locations[].path, read as paths.
	Locations []string
	// RawInput is a tool call's rawInput, read for path members and a
	// command (see the package documentation).
	RawInput json.RawMessage
	// Where names the item's place in the history, for a Loss: a message
	// ID, a tool call ID, "line 12".
	Where string
	// EndsTurn marks the last item of a prompt turn, as Auditor.EndTurn
	// does.
	EndsTurn bool
}

// Loss is one thing the history held that the summary does not.
type Loss struct {
	// Kind is what was lost.
	Kind Kind `json:"kind"`
	// Value is the reference as first written in the history or, for an
	// open item, its sentence (at most MaxValueBytes).
	Value string `json:"value"`
	// Where is the Item.Where of its first appearance.
	Where string `json:"where,omitempty"`
	// Role is who wrote it first.
	Role Role `json:"role,omitempty"`
	// Count is how many times the history held it (references only).
	Count int `json:"count,omitempty"`
}

// MaxValueBytes bounds a Loss's Value; a longer sentence is cut at a rune
// boundary and ends in "…".
const MaxValueBytes = 200

// DefaultMaxReferences is the number of distinct references an Auditor
// keeps unless WithMaxReferences says otherwise.
const DefaultMaxReferences = 1 << 16

// maxOpen bounds each list of open items; the oldest give way.
const maxOpen = 64

// Option configures an Auditor or Check.
type Option func(*config)

type config struct {
	kinds   map[Kind]bool // nil: all
	maxRefs int
}

// WithKinds restricts the audit to the given kinds.
func WithKinds(kinds ...Kind) Option {
	return func(c *config) {
		c.kinds = map[Kind]bool{}
		for _, k := range kinds {
			c.kinds[k] = true
		}
	}
}

// WithMaxReferences bounds the distinct references an Auditor keeps, and so
// its memory; references past the bound are not kept (Dropped counts them).
// n <= 0 means DefaultMaxReferences.
func WithMaxReferences(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = DefaultMaxReferences
		}
		c.maxRefs = n
	}
}

func (c *config) wants(k Kind) bool { return c.kinds == nil || c.kinds[k] }

// Check audits summary against the history it replaced, in one call.
func Check(history []Item, summary []protocol.ContentBlock, opts ...Option) []Loss {
	a := NewAuditor(opts...)
	for _, it := range history {
		a.Add(it)
	}
	return a.Check(summary)
}

// Auditor accumulates a history as it arrives and audits summaries against
// it. Its memory is bounded by the distinct references it keeps and a fixed
// number of open items, not by the history's size. An Auditor is not safe for
// concurrent use.
type Auditor struct {
	cfg     config
	refs    map[string]*ref
	order   []*ref
	seq     int
	dropped int

	requests []*openItem // user requests no agent text has followed yet
	promises []*openItem
	// pending are future-tense sentences of the latest agent message that
	// become promises if the turn ends on that message.
	pending    []*openItem
	correction *openItem
	// corrections before each Mark, so CheckUntil sees the latest one
	// before its mark: (seq, item) pairs, newest last, bounded.
	corrections []*openItem
}

type ref struct {
	kind  Kind
	value string
	where string
	role  Role
	seq   int
	count int
}

type openItem struct {
	kind    Kind
	value   string
	where   string
	role    Role
	seq     int
	anchors []string // normal forms, lower case
}

// NewAuditor returns an empty Auditor.
func NewAuditor(opts ...Option) *Auditor {
	a := &Auditor{cfg: config{maxRefs: DefaultMaxReferences}, refs: map[string]*ref{}}
	for _, o := range opts {
		if o != nil {
			o(&a.cfg)
		}
	}
	return a
}

// Mark is a point in an Auditor's history, for CheckUntil.
type Mark int

// Mark returns the current end of the history.
func (a *Auditor) Mark() Mark { return Mark(a.seq) }

// Dropped reports how many distinct references were not kept because of
// WithMaxReferences.
func (a *Auditor) Dropped() int { return a.dropped }

// Len reports how many distinct references the Auditor holds.
func (a *Auditor) Len() int { return len(a.order) }

// Reset empties the Auditor, as after a compaction whose summary now stands
// for the history (add it back as a Summary item).
func (a *Auditor) Reset() {
	cfg := a.cfg
	*a = Auditor{cfg: cfg, refs: map[string]*ref{}}
}

// Add appends one item to the history.
func (a *Auditor) Add(it Item) {
	a.seq++
	seq := a.seq
	var found []extracted
	emit := func(e extracted) {
		found = append(found, e)
		if !a.cfg.wants(e.kind) {
			return
		}
		k := string(e.kind) + "\x00" + e.key
		if r, ok := a.refs[k]; ok {
			r.count++
			return
		}
		if len(a.order) >= a.cfg.maxRefs {
			a.dropped++
			return
		}
		r := &ref{kind: e.kind, value: e.value, where: it.Where, role: it.Role, seq: seq, count: 1}
		a.refs[k] = r
		a.order = append(a.order, r)
	}
	extractText(it.Text, emit)
	for _, p := range it.Locations {
		if e, ok := structuredPath(p); ok {
			emit(e)
		}
	}
	if len(it.RawInput) > 0 {
		extractRawInput(it.RawInput, emit)
	}
	switch it.Role {
	case User:
		a.addUser(it, seq)
	case Agent:
		a.addAgent(it, seq, found)
	case Tool:
		a.pending = nil // the agent acted after its message: narration, not a promise
	}
	if it.EndsTurn {
		a.EndTurn()
	}
}

// EndTurn marks the end of a prompt turn: future-tense sentences of the
// agent's last message, with no tool call after them, become promises.
func (a *Auditor) EndTurn() {
	for _, p := range a.pending {
		a.promises = pushBounded(a.promises, p)
	}
	a.pending = nil
}

func pushBounded(list []*openItem, it *openItem) []*openItem {
	if len(list) >= maxOpen {
		list = slices.Delete(list, 0, 1)
	}
	return append(list, it)
}

func (a *Auditor) addUser(it Item, seq int) {
	text := strings.TrimSpace(it.Text)
	if text == "" {
		return
	}
	if a.cfg.wants(KindRequest) && !isCommand(text) && !isContinuation(text) {
		if anchors := anchorsOf(text); len(anchors) > 0 {
			a.requests = pushBounded(a.requests, &openItem{kind: KindRequest, value: clip(firstSentence(text)),
				where: it.Where, role: User, seq: seq, anchors: anchors})
		}
	}
	if a.cfg.wants(KindCorrection) && !isContinuation(text) {
		for s := range sentences(text) {
			if isUserCorrection(s) {
				a.setCorrection(&openItem{kind: KindCorrection, value: clip(s), where: it.Where, role: User, seq: seq, anchors: anchorsOf(s)})
			}
		}
	}
}

func (a *Auditor) addAgent(it Item, seq int, found []extracted) {
	text := strings.TrimSpace(it.Text)
	if text == "" {
		return
	}
	// Any agent text answers the requests before it (conservative: a
	// partial answer still counts).
	a.requests = a.requests[:0]
	if len(a.promises) > 0 {
		words := wordSet(text)
		keys := map[string]bool{}
		for _, e := range found {
			for _, f := range forms(e.kind, e.value) {
				keys[f] = true
			}
		}
		a.promises = slices.DeleteFunc(a.promises, func(p *openItem) bool {
			for _, an := range p.anchors {
				if words[an] || keys[an] {
					return true
				}
			}
			return false
		})
	}
	a.pending = nil
	for s := range sentences(text) {
		if a.cfg.wants(KindCorrection) && isAgentCorrection(s) {
			a.setCorrection(&openItem{kind: KindCorrection, value: clip(s), where: it.Where, role: Agent, seq: seq, anchors: anchorsOf(s)})
		}
		if !a.cfg.wants(KindPromise) {
			continue
		}
		future, deferred := promiseSentence(s)
		if !future {
			continue
		}
		anchors := anchorsOf(s)
		if len(anchors) == 0 {
			continue
		}
		p := &openItem{kind: KindPromise, value: clip(s), where: it.Where, role: Agent, seq: seq, anchors: anchors}
		if deferred {
			a.promises = pushBounded(a.promises, p)
		} else {
			a.pending = append(a.pending, p)
			if len(a.pending) > maxOpen {
				a.pending = a.pending[1:]
			}
		}
	}
}

func (a *Auditor) setCorrection(c *openItem) {
	if len(c.anchors) == 0 {
		return
	}
	a.correction = c
	a.corrections = pushBounded(a.corrections, c)
}

// Check audits summary against the whole history added so far.
func (a *Auditor) Check(summary []protocol.ContentBlock) []Loss {
	return a.CheckUntil(a.Mark(), summary)
}

// CheckText is Check for a summary that is plain text.
func (a *Auditor) CheckText(summary string) []Loss {
	return a.checkUntil(a.Mark(), summary)
}

// CheckUntil audits summary against the history added before m: a proxy
// marks the start of a prompt turn, so that the prompt a compaction serves
// (which the agent keeps) is not counted as replaced.
func (a *Auditor) CheckUntil(m Mark, summary []protocol.ContentBlock) []Loss {
	return a.checkUntil(m, SummaryText(summary))
}

// SummaryText is the text a summary's blocks hold for the audit: text
// blocks, and the uri and name of resource and resource_link blocks.
func SummaryText(summary []protocol.ContentBlock) string {
	var b strings.Builder
	for _, blk := range summary {
		if blk.Type == "text" {
			b.WriteString(blk.Text)
			b.WriteByte('\n')
			continue
		}
		for _, f := range []string{"uri", "name", "title"} {
			var s string
			if raw, ok := blk.Extra[f]; ok && json.Unmarshal(raw, &s) == nil {
				b.WriteString(s)
				b.WriteByte('\n')
			}
		}
		if raw, ok := blk.Extra["resource"]; ok {
			var r struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			}
			if json.Unmarshal(raw, &r) == nil {
				b.WriteString(r.URI + "\n" + r.Text + "\n")
			}
		}
	}
	return b.String()
}

type candidate struct {
	loss  Loss
	seq   int
	forms []string
}

func (a *Auditor) checkUntil(m Mark, summary string) []Loss {
	var cands []candidate
	for _, r := range a.order {
		if r.seq > int(m) {
			continue
		}
		cands = append(cands, candidate{
			loss:  Loss{Kind: r.kind, Value: clip(r.value), Where: r.where, Role: r.role, Count: r.count},
			seq:   r.seq,
			forms: forms(r.kind, r.value),
		})
	}
	open := func(it *openItem) {
		if it == nil || it.seq > int(m) || !a.cfg.wants(it.kind) {
			return
		}
		cands = append(cands, candidate{loss: Loss{Kind: it.kind, Value: it.value, Where: it.where, Role: it.role},
			seq: it.seq, forms: it.anchors})
	}
	for _, it := range a.requests {
		open(it)
	}
	for _, it := range a.promises {
		open(it)
	}
	var latest *openItem
	for _, c := range a.corrections {
		if c.seq <= int(m) {
			latest = c
		}
	}
	open(latest)

	idx := newIndex(normSummary(summary))
	survived := make([]bool, len(cands))
	for i, c := range cands {
		for _, f := range c.forms {
			if f != "" && idx.contains(f) {
				survived[i] = true
				break
			}
		}
	}
	// First appearance in the history: the order a reader meets them in.
	var lost []int
	for i, c := range cands {
		if !survived[i] && len(c.forms) > 0 {
			lost = append(lost, i)
		}
	}
	slices.SortStableFunc(lost, func(x, y int) int { return cands[x].seq - cands[y].seq })
	out := make([]Loss, 0, len(lost))
	for _, i := range lost {
		out = append(out, cands[i].loss)
	}
	return out
}

// clip bounds a value to MaxValueBytes at a rune boundary.
func clip(s string) string {
	if len(s) <= MaxValueBytes {
		return s
	}
	cut := MaxValueBytes - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// normSummary is the summary as the forms are matched against it: ASCII
// lower case, each run of white space one space.
func normSummary(s string) string {
	b := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isSpace(c) {
			if !space {
				b = append(b, ' ')
			}
			space = true
			continue
		}
		space = false
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}
