package proxy

import (
	"context"

	"github.com/acpcompact/acpcompact/emitter"
)

const sourceStandard = "standard"

// standard handles a compaction_update or compaction_summary_chunk the
// agent sent itself. A capable client gets it unchanged while the proxy
// follows its ID, so that one left open can be settled; a v1 client without
// the capability must never receive it, so it is rewritten into the
// fallback. Callers hold emu.
func (c *conn) standard(ctx context.Context, n int, sid, kind string, raw []byte, env *envelope) action {
	if c.capable {
		// Forwarded as is, so only the ID and status are read (parseAgent
		// picked them): decoding a summary the proxy does not touch would
		// be wasted work.
		id, _ := stringValue(env.compactionID)
		status, _ := stringValue(env.status)
		if id == "" || (kind == emitter.KindUpdate && status == "") {
			c.log.Warn("malformed compaction update; forwarded as is", "session", sid, "side", sideAgent, "line", n)
			return forward
		}
		return c.passStandard(ctx, n, sid, emitter.ID(id), kind == emitter.KindUpdate, emitter.Status(status))
	}
	u, err := emitter.UnmarshalUpdate(raw)
	if err != nil {
		c.log.Warn("malformed compaction update dropped: the client lacks the capability and it cannot be rewritten",
			"session", sid, "side", sideAgent, "line", n, "error", err)
		return drop
	}
	return c.gateStandard(ctx, n, sid, u)
}

func updateID(u any) emitter.ID {
	switch u := u.(type) {
	case *emitter.CompactionUpdate:
		return u.CompactionID
	case *emitter.CompactionSummaryChunk:
		return u.CompactionID
	}
	return ""
}

func (c *conn) replaying(sid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.flags[sid]
	return ok && f.replaying > 0
}

// passStandard forwards the agent's own update to a capable client.
func (c *conn) passStandard(ctx context.Context, n int, sid string, id emitter.ID, isUpdate bool, status emitter.Status) action {
	if c.replaying(sid) {
		return forward // replayed history is settled by definition
	}
	k := trackKey{sid, id}
	open, settledByProxy := c.router.state(k)
	if settledByProxy {
		// The client already holds this compaction's one terminal
		// update; a later one would contradict it or read as a new turn.
		c.log.Info("dropped the agent's update of a compaction the proxy already settled",
			"session", sid, "side", sideAgent, "line", n, "compaction", string(id))
		return drop
	}
	switch {
	case open && isUpdate && status.Terminal():
		// The agent settles it itself; the emitter only forgets it.
		c.settle(ctx, k, status, "")
	case open, isUpdate && status.Terminal():
		// Progress of an open compaction, or a terminal-first update (or
		// the agent's repeat of one) that leaves nothing open.
	default:
		// First sight of an ID (an update or a chunk) opens the entity
		// on the client; follow it. An ID the agent settled before is
		// refused by the emitter and simply not followed again.
		_ = c.open(ctx, k, sourceStandard, false, emitter.Standard{}, true, "", false, nil)
	}
	return forward
}

// gateRenderer is the fallback for standard updates a v1 client without
// the capability must not receive.
func (c *conn) gateRenderer() emitter.Renderer {
	if c.p.cfg.fallback != nil {
		return c.p.cfg.fallback
	}
	return c.p.cfg.gateFallback
}

// gateStandard rewrites the agent's update into the fallback.
func (c *conn) gateStandard(ctx context.Context, n int, sid string, u any) action {
	log := c.log.With("session", sid, "side", sideAgent, "line", n)
	id := updateID(u)
	k := trackKey{sid, id}
	r := c.gateRenderer()
	if c.replaying(sid) {
		if up, ok := u.(*emitter.CompactionUpdate); ok && up.Status.Terminal() {
			undo := c.router.addTemp(k, &track{source: sourceStandard, r: r})
			rec := emitter.Record{ID: id, Status: up.Status, Displayable: true, Summary: summaryOf(up)}
			if e, ok := up.Error.Get(); ok {
				rec.Error = e
			}
			if m, ok := up.Meta.Get(); ok {
				rec.Meta = m
			}
			if err := c.em.Session(sid).Replay(ctx, rec); err != nil {
				log.Debug("replay failed", "compaction", string(id), "error", err)
			}
			undo()
		}
		// A replay is terminal-first: anything else in it has no
		// fallback form.
		return drop
	}
	open, settledByProxy := c.router.state(k)
	if settledByProxy {
		log.Info("dropped the agent's update of a compaction the proxy already settled", "compaction", string(id))
		return drop
	}
	if !open {
		var meta emitter.Meta
		if up, ok := u.(*emitter.CompactionUpdate); ok && !up.Status.Terminal() {
			meta, _ = up.Meta.Get()
		}
		if err := c.open(ctx, k, sourceStandard, false, r, false, "", true, meta); err != nil {
			log.Info("dropped a compaction update that cannot be rewritten", "compaction", string(id), "error", err)
			return drop
		}
	}
	switch u := u.(type) {
	case *emitter.CompactionSummaryChunk:
		if err := c.em.Session(sid).Chunk(ctx, id, u.Content); err != nil {
			log.Debug("chunk not rewritten", "compaction", string(id), "error", err)
		}
	case *emitter.CompactionUpdate:
		if !u.Status.Terminal() {
			return drop // still in progress, or a status the fallback has no form for
		}
		var opts []emitter.SettleOption
		if blocks, ok := u.Summary.Get(); ok {
			opts = append(opts, emitter.Summary(blocks...))
		} else if u.Summary.IsNull() {
			opts = append(opts, emitter.ClearSummary())
		}
		if m, ok := u.Meta.Get(); ok {
			opts = append(opts, emitter.WithSettleMeta(m))
		}
		reason, _ := u.Error.Get()
		c.settle(ctx, k, u.Status, reason, opts...)
	}
	return drop
}

// summaryOf is an update's summary, or nil when it leaves it out.
func summaryOf(u *emitter.CompactionUpdate) []emitter.ContentBlock {
	blocks, _ := u.Summary.Get()
	return blocks
}
