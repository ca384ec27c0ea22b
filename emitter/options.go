package emitter

import (
	"context"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/protocol"
)

// Option configures an Emitter.
type Option func(*config)

type config struct {
	negotiation   capability.Negotiation
	policy        capability.Policy
	fallback      Renderer
	observers     []Observer
	audit         func(ctx context.Context, info Info, summary []protocol.ContentBlock) []Loss
	newID         func() protocol.ID
	maxDuration   time.Duration
	heartbeat     time.Duration
	omitRedundant bool
	errorText     func(error) string
	summaryPolicy SummaryPolicy
	recordKey     string
	usageUpdates  bool
	// inTurn and outside are WithTurns'.
	inTurn  func(sessionID string) bool
	outside OutsideTurn
	// gate is WithGate's.
	gate func(ctx context.Context, sessionID string) (release func(), err error)
	// onFinal are OnFinalRecord's sinks; with any, the streamed blocks of
	// open compactions are kept for their final records.
	onFinal []func(ctx context.Context, sessionID string, rec Record)
}

// settleTimeout bounds how long a terminal update may take to send on its
// detached context.
const settleTimeout = 5 * time.Second

func defaults() config {
	return config{
		negotiation:   capability.Negotiation{Version: capability.V1},
		policy:        capability.DefaultPolicy,
		newID:         randomID,
		errorText:     defaultErrorText("Compaction failed"),
		summaryPolicy: DisplayableOnly,
	}
}

// WithNegotiation sets what the connection's initialize established. Without
// it the emitter assumes a v1 client without the capability, the safe
// reading.
func WithNegotiation(n capability.Negotiation) Option {
	return func(c *config) {
		c.negotiation = n
		if c.negotiation.Version == 0 {
			c.negotiation.Version = capability.V1
		}
	}
}

// OutsideTurn says what Start does in a session with no turn running
// (WithTurns).
type OutsideTurn uint8

const (
	// RefuseOutsideTurn: Start is refused with ErrOutsideTurn unless the
	// compaction is started with Background. The agent kits use it: a
	// runtime that reports from a goroutine that outlived its prompt learns
	// so, rather than reaching a client that is not waiting for anything.
	RefuseOutsideTurn OutsideTurn = iota
	// HoldOutsideTurn: the compaction opens, but nothing about it is sent
	// until the session's next turn begins (Session.Deliver). The proxy
	// uses it: the agent it carries has already started the compaction,
	// and nothing it reports may be lost. What a session holds is bounded
	// (see ErrHoldLimit): past the bound a start is refused, and a summary
	// is let go whole rather than shown in part.
	HoldOutsideTurn
)

// WithTurns ties the emitter to the host's prompt turns: inTurn reports
// whether session sessionID has a turn running. Between turns nothing
// about compaction is sent: a start is refused or held (outside), the
// events of a held compaction are kept, and the host calls Session.Deliver
// when the session's next turn begins, which sends them (see Background
// for a compaction that may outlive its turn). inTurn is called with the
// session's lock held; it must not call back into the emitter. Without
// WithTurns every session counts as being in a turn, as suits a runtime
// that drives the transport itself.
func WithTurns(inTurn func(sessionID string) bool, outside OutsideTurn) Option {
	return func(c *config) { c.inTurn, c.outside = inTurn, outside }
}

// WithGate makes every reporting call of a runtime pass gate first: a
// Session's Start, Chunk, Complete, Cancel and Fail, and a Compaction's
// Chunk, Complete, Cancel and Fail, so that calls by handle and by ID are
// judged alike. gate gets the call's context and session ID; an error
// refuses the call, which returns it and opens or sends nothing; otherwise
// the call runs, and release is called once it has returned. What the
// host drives itself does not pass it: SettleAll, CloseSession, Deliver,
// Replay, the watchdog and the heartbeat. The agent kits install their
// turn guard with it, so that nothing opens or changes between a turn's
// settlement and the message that ends the turn. gate must not call into
// the emitter.
func WithGate(gate func(ctx context.Context, sessionID string) (release func(), err error)) Option {
	return func(c *config) { c.gate = gate }
}

// OnFinalRecord hands f the final Record of every compaction, exactly once,
// once it has settled: whoever settles it (the runtime's Complete, Fail or
// Cancel; a SettleAll at the turn's end,
// after a cancel or a caught panic; the watchdog; Emitter.SettleAll when
// the connection closes; CloseSession). The record holds everything
// Session.Replay needs to leave a client holding what the live client
// held, the summary streamed by a completion that kept it included: with
// OnFinalRecord set, the emitter keeps the streamed blocks of each open
// compaction until it settles (memory follows what is live, within the
// session's hold: past 8 MiB a record goes without its streamed summary,
// see ErrHoldLimit; without OnFinalRecord none are kept and memory per
// open compaction stays constant). A replay of an open compaction's ID
// settles it (Session.Replay), and its record is handed over too. It is the
// runtime's sink for history: store each record, in order, and replay the
// stored records on session/load.
//
// f runs after the terminal update was handed to the Notifier (delivered
// or not: the compaction is settled either way, and a later replay is the
// client's next chance to see it). A compaction that settles unseen
// between turns (WithTurns), whose terminal update goes out only when the
// session's next turn begins, is handed over at settlement all the same:
// the replay must hold it even if the client never comes back.
//
// f is called without the emitter's locks held, one call at a time per
// session, in settlement order, so it may call the emitter (a record that
// a call from f settles is handed over once f returns). A panic in f does
// not cost the other records: they are handed over all the same, then the
// first panic goes on to the settling call. The host's settlements
// (SettleAll, CloseSession, Emitter.SettleAll) send every terminal update
// first and hand the records over after; they wait for f up to their
// context's deadline, if it has one, and return an error wrapping
// context.DeadlineExceeded when f was still running then (it goes on, on
// a goroutine of its own). Otherwise the call that settled a compaction
// returns after f has run for it; when another
// goroutine is handing over a record of the same session at that moment,
// that goroutine hands this one over next, and the settling call may
// return first. ctx carries the values of the settling call's context
// (trace context) but not its cancellation or deadline: a cancelled turn's
// records must still be kept. rec shares its summary, _meta and details
// with the compaction's own Record: treat them as read-only.
//
// Sinks add up, as observers do: each OnFinalRecord adds one, and every
// record reaches each in the order given (a kit's store and a runtime's own
// sink, say). A nil f adds none.
func OnFinalRecord(f func(ctx context.Context, sessionID string, rec Record)) Option {
	return func(c *config) {
		if f != nil {
			c.onFinal = append(c.onFinal, f)
		}
	}
}

// keepsStreamed says whether a record needs each open compaction's
// streamed blocks: a final record is handed over, or audited.
func (c *config) keepsStreamed() bool { return len(c.onFinal) > 0 || c.audit != nil }

// WithAudit has f audit the summary of every completed compaction against
// the history it replaced; what f returns joins the record's KnownLoss
// (package audit's Follower.Audit is such an f, over the history a host
// saw on the wire). f gets the summary the client is left holding; for
// that the emitter keeps each open compaction's streamed blocks, within the
// session's hold, as it does for OnFinalRecord. What f finds goes where the
// record goes, and nowhere else: under the record key of the terminal
// update's _meta with WithRecords, to OnFinalRecord's sink, and in the
// settled Event's Details for a host that sends records of its own. Off by
// default: a client that did not ask for records never gets an audit. f is
// called with the session's lock held, so it must not call the emitter.
func WithAudit(f func(ctx context.Context, info Info, summary []protocol.ContentBlock) []Loss) Option {
	return func(c *config) { c.audit = f }
}

// WithPolicy overrides capability.DefaultPolicy.
func WithPolicy(p capability.Policy) Option {
	return func(c *config) {
		if p != nil {
			c.policy = p
		}
	}
}

// WithFallback sets the renderer used for clients without the capability
// (see package fallback). Without one such clients get nothing.
func WithFallback(r Renderer) Option { return func(c *config) { c.fallback = r } }

// WithObserver adds observers of every lifecycle event (see Observer).
// Observers add up: each WithObserver appends to the ones before it, and
// every event reaches them all, in the order given; nil ones are skipped.
func WithObserver(obs ...Observer) Option {
	return func(c *config) {
		for _, o := range obs {
			if o != nil {
				c.observers = append(c.observers, o)
			}
		}
	}
}

// WithMaxDuration arms a watchdog per compaction: one still open after d is
// settled as failed (ErrTimeout). Zero, the default, disables it.
func WithMaxDuration(d time.Duration) Option { return func(c *config) { c.maxDuration = d } }

// WithHeartbeat re-sends a field-less in_progress update for a compaction
// that has sent nothing for d, so client watchdogs see life during long
// compactions: the silence is looked at every d/4, so the first heartbeat
// goes out between d and 1.25 d after the last chunk, and one follows every
// d while the silence lasts. Only a compaction the client saw start, in a
// turn, gets one. Zero, the default, disables it.
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithOmitRedundantSummary omits a completion's summary when it equals what
// was streamed, saving a second copy on the wire. The comparison uses a
// running hash, so memory stays constant whatever the summary's length.
func WithOmitRedundantSummary() Option { return func(c *config) { c.omitRedundant = true } }

// WithGenericError sets the text a failure shows when its error is not
// fit for the user (multi-line, a stack trace, empty). Default "Compaction
// failed".
func WithGenericError(text string) Option {
	return func(c *config) { c.errorText = defaultErrorText(text) }
}

// WithSummaryPolicy decides what of each summary leaves the process. The
// default, DisplayableOnly, passes summaries of compactions the runtime
// started with UserDisplayable and nothing else. A withheld chunk is not
// sent and Chunk returns ErrWithheld.
func WithSummaryPolicy(p SummaryPolicy) Option {
	return func(c *config) {
		if p != nil {
			c.summaryPolicy = p
		}
	}
}

// Info identifies a compaction to policies and renderers.
type Info struct {
	SessionID string
	ID        protocol.ID
	Trigger   protocol.Trigger
	// Displayable is the runtime's statement that the summary is the
	// user-displayable projection, safe to show (see UserDisplayable).
	Displayable bool
}

// SummaryPolicy is called for every summary block before it leaves the
// process (streamed chunks, final and replayed summaries). It returns the
// block to send, possibly redacted, or false to withhold it.
type SummaryPolicy func(info Info, block protocol.ContentBlock) (protocol.ContentBlock, bool)

// DisplayableOnly is the default SummaryPolicy: the RFD says a summary that
// could reveal context the user has not seen must be omitted, so only
// summaries the runtime marked user-displayable pass. The emitter cannot
// tell a user-displayable projection from internal history (retained user
// messages, developer instructions, provider data), so the safe default
// shows nothing until the runtime opts in per compaction with
// UserDisplayable; until then Chunk returns ErrWithheld.
func DisplayableOnly(info Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) {
	return b, info.Displayable
}

// AllSummaries is a SummaryPolicy for runtimes whose summaries are always
// shown to their users anyway (opencode's case).
func AllSummaries(_ Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) { return b, true }

// StartOption configures one compaction.
type StartOption func(*startOptions)

type startOptions struct {
	background  bool
	id          protocol.ID
	idSet       bool
	trigger     protocol.Trigger
	displayable bool
	meta        protocol.Meta
	after       string
}

// WithID uses the runtime's own ID (a message UUID, an item ID) instead of
// minting one. Using the runtime's ID keeps it the same live and on replay.
func WithID(id protocol.ID) StartOption { return func(o *startOptions) { o.id, o.idSet = id, true } }

// WithTrigger records why the compaction runs (default protocol.Manual).
func WithTrigger(t protocol.Trigger) StartOption { return func(o *startOptions) { o.trigger = t } }

// UserDisplayable marks the compaction's summary as the user-displayable
// projection of its result, which the default SummaryPolicy requires.
//
// Summaries are withheld by default because the RFD asks that a summary be
// unencrypted, user-displayable content that excludes internal prompt
// framing and never reveals context that was not otherwise visible to the
// user; only the runtime knows whether its summary is that. Without this
// option every chunk returns ErrWithheld and nothing of the summary is
// sent, live or on replay (Record.Displayable carries the mark).
func UserDisplayable() StartOption { return func(o *startOptions) { o.displayable = true } }

// Background starts a compaction that may outlive its turn, as a runtime
// that compacts on its own goroutine does (Kimi Code answers /compact with
// "it runs in the background" and ends the turn). The client sees it only
// when it settles: its terminal update, with the summary its chunks
// streamed, is the first update the client gets, in the turn running then
// or, when it settles between turns, at the start of the session's next
// turn. It is never shown half-way, so the end of a turn does not settle
// it, and it never holds up a turn's end; the connection's end and the
// session's close do settle it. It may be started outside a turn (see
// WithTurns).
func Background() StartOption { return func(o *startOptions) { o.background = true } }

// After records the runtime's position in its history: the ID of the
// message (or other history entry) this compaction follows. The emitter
// does not read it; it is Record.After, so that a runtime replaying its
// history (session/load) can put each record back between its own
// messages where the compaction happened.
func After(position string) StartOption { return func(o *startOptions) { o.after = position } }

// WithStartMeta sends m as the _meta of the in_progress update.
func WithStartMeta(m protocol.Meta) StartOption { return func(o *startOptions) { o.meta = m } }

// SettleOption configures a terminal update.
type SettleOption func(*settleOptions)

type summaryMode uint8

const (
	summaryKeep summaryMode = iota
	summarySet
	summaryClear
)

type settleOptions struct {
	byHost  bool
	summary summaryMode
	blocks  []protocol.ContentBlock
	meta    protocol.Meta
	details *Details
}

func collect(opts []SettleOption) settleOptions {
	var so settleOptions
	for _, o := range opts {
		o(&so)
	}
	return so
}

// Summary sends blocks as the authoritative, complete summary, replacing
// whatever was streamed. Summary() with no blocks clears it on the client
// (summary: null), for a result with no user-displayable projection.
func Summary(blocks ...protocol.ContentBlock) SettleOption {
	return func(o *settleOptions) {
		if len(blocks) == 0 {
			o.summary, o.blocks = summaryClear, nil
			return
		}
		o.summary, o.blocks = summarySet, blocks
	}
}

// WithSettleMeta sends m as the terminal update's _meta.
func WithSettleMeta(m protocol.Meta) SettleOption { return func(o *settleOptions) { o.meta = m } }
