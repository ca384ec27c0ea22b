package proxy

import (
	"context"
	"encoding/json"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/protocol"
)

const sourceStandard = "standard"

// standard handles a compaction_update or compaction_summary_chunk the
// agent sent itself. A capable client gets it unchanged while the proxy
// follows its ID, so that one left open can be settled and a second
// terminal update dropped; a v1 client without the capability must never
// receive it, so it is rewritten into the fallback. Callers hold emu.
func (c *conn) standard(ctx context.Context, n int, sid, kind string, raw []byte, env *envelope, msg []byte) action {
	if c.capable {
		// Forwarded as is, so only the ID and status are read (the line's
		// one pick read them): decoding a summary the proxy does not touch
		// would be wasted work.
		id, _ := skim.String(env.v[aCompactionID])
		status, _ := skim.String(env.v[aStatus])
		if id == "" || (kind == protocol.KindUpdate && status == "") {
			c.log.Warn("malformed compaction update; forwarded as is", "session", sid, "side", sideAgent, "line", n)
			return forward
		}
		isUpdate := kind == protocol.KindUpdate
		if c.replaying(sid) {
			return c.replayStandard(n, sid, protocol.ID(id), isUpdate, protocol.Status(status), env, msg)
		}
		return c.passStandard(ctx, n, sid, protocol.ID(id), isUpdate, protocol.Status(status))
	}
	u, err := decodeUpdate(raw, c.ownAgentLine)
	if err != nil {
		c.log.Warn("malformed compaction update dropped: the client lacks the capability and it cannot be rewritten",
			"session", sid, "side", sideAgent, "line", n, "error", err)
		return drop
	}
	return c.gateStandard(ctx, n, sid, u)
}

func updateID(u any) protocol.ID {
	switch u := u.(type) {
	case *protocol.CompactionUpdate:
		return u.CompactionID
	case *protocol.CompactionSummaryChunk:
		return u.CompactionID
	}
	return ""
}

// replaying reports whether a history replay of the session is in flight.
func (c *conn) replaying(sid string) bool {
	on, _ := c.e.Replaying(sid)
	return on
}

// straggler reports whether a compaction signal for a compaction the client
// never saw start arrives right after a cancelled turn of the session (the
// engine's AfterCancel): an agent reporting what it did while the user
// cancelled. Nothing about compaction may reach the client after its turn
// ended, so it is dropped. Callers hold emu.
func (c *conn) straggler(sid string, id protocol.ID, n int, source string) bool {
	if !c.e.AfterCancel(sid) {
		return false
	}
	c.log.Info("dropped a compaction signal that arrived after the cancelled turn ended, for a compaction the client never saw start",
		"session", sid, "compaction", string(id), "source", source, "side", sideAgent, "line", n)
	return true
}

// passStandard forwards the agent's own update to a capable client.
func (c *conn) passStandard(ctx context.Context, n int, sid string, id protocol.ID, isUpdate bool, status protocol.Status) action {
	k := trackKey{sid, id}
	st := c.router.status(k)
	switch st {
	case trackByProxy:
		// The client already holds this compaction's one terminal
		// update; a later one would contradict it or read as a new turn.
		c.log.Info("dropped the agent's update of a compaction the proxy already settled",
			"session", sid, "side", sideAgent, "line", n, "compaction", string(id))
		return drop
	case trackByAgent:
		// The agent settled it already (Claude ACP 0.101 sends a second,
		// field-less completed): exactly one terminal update per ID.
		c.log.Debug("dropped the agent's update of a compaction it already settled",
			"session", sid, "side", sideAgent, "line", n, "compaction", string(id), "status", string(status))
		return drop
	}
	open := st == trackOpen
	if !open && c.straggler(sid, id, n, sourceStandard) {
		return drop
	}
	switch {
	case open && isUpdate && status.Terminal():
		// The agent settles it itself; the emitter only forgets it.
		c.settle(ctx, k, status, "")
	case open:
		// Progress of an open compaction.
	case isUpdate && status.Terminal():
		// A terminal-first update leaves nothing open, but its ID is
		// settled: a repeat of it is dropped.
		if err := c.open(ctx, k, &track{source: sourceStandard, r: emitter.Standard{}, verbatim: true}, false, nil); err == nil {
			c.settle(ctx, k, status, "")
		}
	default:
		// First sight of an ID (an update or a chunk) opens the entity
		// on the client; follow it. An ID the agent settled before is
		// refused by the emitter and simply not followed again.
		_ = c.open(ctx, k, &track{source: sourceStandard, r: emitter.Standard{}, verbatim: true}, false, nil)
	}
	return forward
}

// replayStandard handles the agent's own update during a history replay
// for a capable client. A replay shows settled compactions: a terminal
// update is forwarded; an in_progress one is a compaction still running
// elsewhere, which no turn of this connection will settle, so it is left
// out, as a client without the capability gets it. Summary chunks wait for
// their terminal update, which gets them as its summary when it leaves the
// summary out. Callers hold emu.
func (c *conn) replayStandard(n int, sid string, id protocol.ID, isUpdate bool, status protocol.Status, env *envelope, msg []byte) action {
	ts := c.transFor(sid)
	on, epoch := c.e.Replaying(sid)
	ts.sync(on, epoch)
	if !isUpdate {
		ts.keepChunk(id, env.v[aContent])
		return drop
	}
	chunks := ts.chunks[id]
	delete(ts.chunks, id)
	if !status.Terminal() {
		c.log.Debug("left out a replayed compaction that is not settled", "session", sid, "compaction", string(id), "side", sideAgent, "line", n)
		return drop
	}
	if len(chunks) == 0 {
		return forward
	}
	var u struct {
		Summary json.RawMessage `json:"summary"`
	}
	if json.Unmarshal(env.v[aUpdate], &u) != nil || u.Summary != nil {
		return forward // it says what its summary is
	}
	out, ok := withSummary(msg, chunks)
	if !ok {
		return forward
	}
	_ = c.writeToClient(out) // a failed write is sticky and ends the pump
	return drop
}

// keepChunk keeps a replayed summary chunk's content until its
// compaction's terminal update, within a bound.
func (ts *transState) keepChunk(id protocol.ID, content []byte) {
	if content == nil || ts.chunksBytes+len(content) > maxReplayChunks {
		return
	}
	if ts.chunks == nil {
		ts.chunks = map[protocol.ID][]json.RawMessage{}
	}
	ts.chunks[id] = append(ts.chunks[id], json.RawMessage(string(content)))
	ts.chunksBytes += len(content)
}

// withSummary returns msg, a compaction_update, with summary set to blocks.
func withSummary(msg []byte, blocks []json.RawMessage) ([]byte, bool) {
	var top, params, upd map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["params"], &params) != nil || json.Unmarshal(params["update"], &upd) != nil {
		return nil, false
	}
	list := []byte{'['}
	for i, b := range blocks {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, b...)
	}
	upd["summary"] = append(list, ']')
	params["update"] = marshalRaw(upd)
	top["params"] = marshalRaw(params)
	return marshalRaw(top), true
}

// gateRenderer is the fallback for standard updates a v1 client without
// the capability must not receive.
func (c *conn) gateRenderer() emitter.Renderer {
	if c.p.cfg.fallback != nil {
		return c.p.cfg.fallback
	}
	return c.p.cfg.gateFallback
}

// agentRecord is the compaction record the agent put in its _meta itself.
func agentRecord(m protocol.Meta) json.RawMessage {
	if rec, ok := m[emitter.DefaultRecordKey]; ok && len(rec) > 0 && !skim.IsNull(rec) {
		return rec
	}
	return nil
}

// gateStandard rewrites the agent's update into the fallback.
func (c *conn) gateStandard(ctx context.Context, n int, sid string, u any) action {
	log := c.log.With("session", sid, "side", sideAgent, "line", n)
	id := updateID(u)
	k := trackKey{sid, id}
	r := c.gateRenderer()
	if on, epoch := c.e.Replaying(sid); on {
		ts := c.transFor(sid)
		ts.sync(on, epoch)
		switch u := u.(type) {
		case *protocol.CompactionSummaryChunk:
			if b, err := json.Marshal(u.Content); err == nil {
				ts.keepChunk(id, b)
			}
		case *protocol.CompactionUpdate:
			chunks := ts.chunks[id]
			delete(ts.chunks, id)
			if !u.Status.Terminal() {
				break // a replay shows settled compactions only
			}
			t := &track{source: sourceStandard, r: r}
			rec := emitter.Record{ID: id, Status: u.Status, Displayable: true, Summary: summaryOf(u)}
			if u.Summary.IsZero() {
				rec.Summary = blocksOf(chunks)
			}
			if e, ok := u.Error.Get(); ok {
				rec.Error = e
			}
			if m, ok := u.Meta.Get(); ok {
				rec.Meta = m
				t.record = agentRecord(m)
			}
			undo := c.router.addTemp(k, t)
			if err := c.em.Session(sid).Replay(ctx, rec); err != nil {
				log.Debug("replay failed", "compaction", string(id), "error", err)
			}
			undo()
		}
		return drop
	}
	switch c.router.status(k) {
	case trackByProxy:
		log.Info("dropped the agent's update of a compaction the proxy already settled", "compaction", string(id))
		return drop
	case trackByAgent:
		log.Debug("dropped the agent's update of a compaction it already settled", "compaction", string(id))
		return drop
	case trackNone:
		if c.straggler(sid, id, n, sourceStandard) {
			return drop
		}
		var meta protocol.Meta
		if up, ok := u.(*protocol.CompactionUpdate); ok && !up.Status.Terminal() {
			meta, _ = up.Meta.Get()
		}
		if err := c.open(ctx, k, &track{source: sourceStandard, r: r}, true, meta); err != nil {
			log.Info("dropped a compaction update that cannot be rewritten", "compaction", string(id), "error", err)
			return drop
		}
	}
	switch u := u.(type) {
	case *protocol.CompactionSummaryChunk:
		if err := c.em.Session(sid).Chunk(ctx, id, u.Content); err != nil {
			log.Debug("chunk not rewritten", "compaction", string(id), "error", err)
		}
	case *protocol.CompactionUpdate:
		if !u.Status.Terminal() {
			return drop // still in progress, or a status the fallback has no form for
		}
		var opts []emitter.SettleOption
		if blocks, ok := u.Summary.Get(); ok {
			opts = append(opts, emitter.Summary(blocks...))
		} else if u.Summary.IsNull() {
			opts = append(opts, emitter.Summary())
		}
		if m, ok := u.Meta.Get(); ok {
			opts = append(opts, emitter.WithSettleMeta(m))
			if rec := agentRecord(m); rec != nil {
				c.router.keepRecord(k, rec)
			}
		}
		reason, _ := u.Error.Get()
		c.settle(ctx, k, u.Status, reason, opts...)
	}
	return drop
}

// summaryOf is an update's summary, or nil when it leaves it out.
func summaryOf(u *protocol.CompactionUpdate) []protocol.ContentBlock {
	blocks, _ := u.Summary.Get()
	return blocks
}

// blocksOf decodes kept summary chunks.
func blocksOf(chunks []json.RawMessage) []protocol.ContentBlock {
	var out []protocol.ContentBlock
	for _, raw := range chunks {
		var b protocol.ContentBlock
		if json.Unmarshal(raw, &b) == nil {
			out = append(out, b)
		}
	}
	return out
}
