package acpsdk_test

// This file is docs/agentkit.md's integration on coder/acp-go-sdk, as a
// whole-file example; TestReadmeSnippets (package agentkit) keeps the two
// the same. Its client (clientPeer), model stand-in and otherMethods are in
// example_peer_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	acp "github.com/coder/acp-go-sdk"
)

// myAgent is an acp.Agent; only Prompt is shown.
type myAgent struct {
	otherMethods // Initialize, NewSession, Cancel, ...
}

// Prompt runs one turn. Here the model compacts its context first and
// streams the summary. ctx is the kit's: session/cancel ends it, in wire
// order, with cause emitter.ErrCancelled.
func (a *myAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s := acpsdk.SessionFrom(ctx, string(p.SessionId)) // the session on this connection
	// UserDisplayable: this summary is fit to show the user, so the
	// client gets it; without it every block is withheld.
	c, err := s.Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	if c == nil {
		return acp.PromptResponse{}, err
	} // a handle with an error (emitter.ErrUndeliverable): open all the same
	for delta := range model.Summarize(ctx) {
		if err := c.Chunk(ctx, protocol.Text(delta)); errors.Is(err, emitter.ErrWithheld) {
			log.Print("summary withheld: start the compaction with emitter.UserDisplayable()")
		}
	}
	if errors.Is(context.Cause(ctx), emitter.ErrCancelled) {
		// session/cancel: just return; the kit settles it `cancelled`.
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	if err := c.Complete(ctx); err != nil {
		return acp.PromptResponse{}, err
	}
	// ... the model answers the prompt ...
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// keepRecord keeps each compaction's final record with its session's
// history, whoever settled it (the runtime, the turn's end, a cancel, a
// crash, the connection's end), so that session/load, even in a later
// process, replays it with Session.Replay. Here a log line stands in for
// the store; emitter.Record's JSON form is versioned for keeping.
func keepRecord(_ context.Context, sessionID string, rec emitter.Record) {
	if b, err := json.Marshal(rec); err == nil {
		log.Printf("session %s: keep %s", sessionID, b)
	}
}

// docs/agentkit.md's integration on coder/acp-go-sdk, run against a client
// (clientPeer) on in-process pipes that prompts twice, cancels the second
// prompt after its first summary chunk, and prints what it sent (->) and
// received (<-).
func Example_summaryAndCancel() {
	stdin, stdout := clientPeer() // os.Stdin and os.Stdout in an agent

	// A v1 client without the capability sees a tool call; every final
	// record goes to keepRecord.
	kit := acpsdk.New(acpsdk.WithEmitterOptions(emitter.OnFinalRecord(keepRecord)))
	conn := kit.NewAgentSideConnection(&myAgent{}, stdout, stdin)
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-conn.Done(): // the client hung up
	case <-sig.Done(): // the editor stops the agent
	}
	// Settle what is still open and write it before the process exits.
	if err := kit.Shutdown(context.Background()); err != nil {
		log.Print(err)
	}
	// Output:
	// -> session/prompt "hello"
	// <- compaction 1: in_progress
	// <- compaction 1: chunk "## Retained context\n"
	// <- compaction 1: chunk "- The user is writing a JSON parser in Go.\n"
	// <- compaction 1: completed
	// <- session/prompt: end_turn
	// -> session/prompt "go on"
	// <- compaction 2: in_progress
	// <- compaction 2: chunk "## Retained context\n"
	// -> session/cancel
	// <- compaction 2: cancelled
	// <- session/prompt: cancelled
}
