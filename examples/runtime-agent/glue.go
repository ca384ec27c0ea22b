package main

// The acpcompact-specific code of this agent that both kits share: the
// runtime's events mapped to the session (live reporting, a compaction
// applied after the prompt; a user's cancel needs no code: the kit settles
// the compaction cancelled when the prompt returns), and the replay. With the kit file
// of its stack (kit_acpsdk.go or kit_jsonrpc2.go: the kit and its store)
// it is all of it: TestGlueStaysWithinFiftyLines counts them. The kit
// keeps the history by itself; nothing here writes a record but the one
// for a compaction no client could see.

import (
	"context"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/examples/runtime-agent/runtime"
	"github.com/acpcompact/acpcompact/protocol"
)

// report maps one run's events to the session until the run stops; what a
// run sends past its prompt's end is reported on, with no turn to show it
// in, so a compaction it applies is recorded (Kit.Record) for the next load.
func report(ctx context.Context, record func(context.Context, string, emitter.Record) error, sid string, events <-chan runtime.Event) {
	s := agentkit.SessionFrom(ctx, sid)
	var c *emitter.Compaction
	for ev := range events {
		switch ev.Kind {
		case runtime.AgentChoice:
			_ = s.Send(ctx, map[string]any{"sessionUpdate": "agent_message_chunk", "content": protocol.Text(ev.Text)})
		case runtime.CompactionStarted:
			c, _ = s.Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
		case runtime.CompactionSummary:
			_ = c.Chunk(ctx, protocol.Text(ev.Text))
		case runtime.CompactionFailed:
			_ = c.Fail(ctx, ev.Err)
		case runtime.CompactionCompleted: // from a defer, whatever happened (a cancel: the kit settles it)
			if c == nil && ev.Err == nil { // applied where no client could see it
				_ = record(ctx, sid, emitter.Record{Status: protocol.Completed, Trigger: protocol.Auto, Displayable: true, Summary: []protocol.ContentBlock{protocol.Text(ev.Text)}})
			} else if ev.Err == nil {
				_ = c.Complete(ctx)
			}
		case runtime.StreamStopped: // the prompt is answered; the run may go on
			go report(context.WithoutCancel(ctx), record, sid, events)
			return
		}
	}
}

// load replays the session's history to the client, as it saw it live.
func load(ctx context.Context, sid string) error {
	return agentkit.SessionFrom(ctx, sid).ReplayHistory(ctx, nil)
}
