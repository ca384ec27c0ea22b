package agentkit_test

// This file is docs/agentkit.md's integration on sourcegraph/jsonrpc2, as a
// whole-file example; TestReadmeSnippets keeps the two the same. Its client
// (clientPeer) and model stand-in are in example_peer_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// prompt runs one turn of session s. Here the model compacts its context
// first and streams the summary.
func prompt(ctx context.Context, s *agentkit.Session) (any, error) {
	// UserDisplayable: this summary is fit to show the user, so the
	// client gets it; without it every block is withheld.
	c, err := s.Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	if c == nil {
		return nil, err
	} // a handle with an error (emitter.ErrUndeliverable): open all the same
	for delta := range model.Summarize(ctx) {
		if err := c.Chunk(ctx, protocol.Text(delta)); errors.Is(err, emitter.ErrWithheld) {
			log.Print("summary withheld: start the compaction with emitter.UserDisplayable()")
		}
	}
	if errors.Is(context.Cause(ctx), emitter.ErrCancelled) {
		// session/cancel: just return; the kit settles it `cancelled`.
		return map[string]any{"stopReason": "cancelled"}, nil
	}
	if err := c.Complete(ctx); err != nil {
		return nil, err
	}
	// ... the model answers the prompt ...
	return map[string]any{"stopReason": "end_turn"}, nil
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

// stdio is the agent's stdin and stdout as one stream.
type stdio struct {
	io.Reader
	io.WriteCloser
}

// docs/agentkit.md's integration on sourcegraph/jsonrpc2, run against a client
// (clientPeer) on in-process pipes that prompts twice, cancels the second
// prompt after its first summary chunk, and prints what it sent (->) and
// received (<-).
func Example_summaryAndCancel() {
	stdin, stdout := clientPeer() // os.Stdin and os.Stdout in an agent

	// A v1 client without the capability sees a tool call; every final
	// record goes to keepRecord.
	kit := agentkit.New(agentkit.WithEmitterOptions(emitter.OnFinalRecord(keepRecord)))
	handler := jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/new":
			return map[string]any{"sessionId": "sess_1"}, nil
		case "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if err := json.Unmarshal(*req.Params, &p); err != nil {
				return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: err.Error()}
			}
			return prompt(ctx, agentkit.SessionFrom(ctx, p.SessionID)) // the session on this connection
		case "session/cancel":
			return nil, nil // the kit has cancelled the prompt's context
		}
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: req.Method}
	})
	conn := kit.NewConn(context.Background(), agentkit.NewStream(stdio{stdin, stdout}), agentkit.AsyncHandler(handler))
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-conn.DisconnectNotify(): // the client hung up
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
