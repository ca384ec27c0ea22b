package emitter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

// printer is a Notifier that prints each session/update line, as an agent
// would write it to stdout.
type printer struct{}

func (printer) Notify(_ context.Context, sessionID string, update any) error {
	line, err := wiretest.Line(sessionID, update)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, string(line))
	return nil
}

func Example() {
	ctx := context.Background()
	// The client advertised clientCapabilities.session.compaction: {}.
	n := capability.Parse([]byte(`{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`), []byte(`{"protocolVersion":1}`))
	em := emitter.New(printer{}, emitter.WithNegotiation(n))

	c, _ := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_001"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	_ = c.Chunk(ctx, protocol.Text("## Retained context\n\n"))
	_ = c.Complete(ctx, emitter.Summary(protocol.Text("## Retained context\n\nThe user is updating the ACP schema.")))

	// A compaction the runtime forgot: the turn's end settles it.
	_, _ = em.Session("sess_1").Start(ctx, emitter.WithID("cmp_002"))
	_, _ = em.Session("sess_1").SettleAll(ctx, emitter.ErrTurnEnded)
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"in_progress"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":{"type":"text","text":"## Retained context\n\n"}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"completed","summary":[{"type":"text","text":"## Retained context\n\nThe user is updating the ACP schema."}]}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_002","status":"in_progress"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_002","status":"failed","error":"the turn ended before the compaction finished"}}}
}

func ExampleErrWithheld() {
	ctx := context.Background()
	em := emitter.New(printer{}, emitter.WithNegotiation(capability.Negotiation{Version: 2}))
	s := em.Session("s")

	// Without UserDisplayable the default policy withholds the summary:
	// nothing of it is sent, and Chunk says so.
	c, _ := s.Start(ctx, emitter.WithID("cmp_1"))
	if err := c.Chunk(ctx, protocol.Text("## Retained context")); errors.Is(err, emitter.ErrWithheld) {
		fmt.Println("withheld: start the compaction with emitter.UserDisplayable() to show it")
	}
	_ = c.Complete(ctx)

	// The runtime states that its summary is the user-displayable projection.
	c, _ = s.Start(ctx, emitter.WithID("cmp_2"), emitter.UserDisplayable())
	_ = c.Chunk(ctx, protocol.Text("## Retained context"))
	_ = c.Complete(ctx)
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"in_progress"}}}
	// withheld: start the compaction with emitter.UserDisplayable() to show it
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_2","status":"in_progress"}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_2","content":{"type":"text","text":"## Retained context"}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_2","status":"completed"}}}
}

func ExampleOnFinalRecord() {
	ctx := context.Background()
	v2 := emitter.WithNegotiation(capability.Negotiation{Version: 2})
	quiet := emitter.NotifierFunc(func(context.Context, string, any) error { return nil })

	// The runtime's store: one JSON record a line, per session.
	var store bytes.Buffer
	em := emitter.New(quiet, v2, emitter.OnFinalRecord(func(_ context.Context, sessionID string, rec emitter.Record) {
		line, err := json.Marshal(rec)
		if err != nil {
			return
		}
		store.Write(append(line, '\n'))
	}))
	s := em.Session("sess_1")
	c, _ := s.Start(ctx, emitter.WithID("cmp_001"), emitter.UserDisplayable(), emitter.After("msg_41"))
	_ = c.Chunk(ctx, protocol.Text("## Retained context"))
	_ = c.Complete(ctx) // keeps what was streamed: so does the record
	c, _ = s.Start(ctx, emitter.WithID("cmp_002"))
	_ = c.Fail(ctx, errors.New("summary request failed"))
	fmt.Print(store.String())

	// session/load on a new connection: each stored record, in its place
	// among the runtime's own messages (rec.After).
	replay := emitter.New(printer{}, v2).Session("sess_1")
	dec := json.NewDecoder(&store)
	for dec.More() {
		var rec emitter.Record
		if err := dec.Decode(&rec); err != nil {
			fmt.Println(err)
			return
		}
		_ = replay.Replay(ctx, rec)
	}
	// Output:
	// {"v":1,"compactionId":"cmp_001","status":"completed","trigger":"manual","after":"msg_41","userDisplayable":true,"summary":[{"type":"text","text":"## Retained context"}]}
	// {"v":1,"compactionId":"cmp_002","status":"failed","trigger":"manual","error":"summary request failed"}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"completed","summary":[{"type":"text","text":"## Retained context"}],"error":null}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_002","status":"failed","summary":null,"error":"summary request failed"}}}
}
