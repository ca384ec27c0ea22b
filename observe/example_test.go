package observe_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
)

func ExampleCounters() {
	var counters observe.Counters
	discard := emitter.NotifierFunc(func(context.Context, string, any) error { return nil })
	em := emitter.New(discard,
		emitter.WithNegotiation(capability.Negotiation{Version: 1, Compaction: true}),
		emitter.WithObserver(observe.NewObserver(&counters)))
	ctx := context.Background()
	s := em.Session("sess_1")

	c, _ := s.Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	_ = c.Chunk(ctx, protocol.Text("The user is "))
	_ = c.Complete(ctx, emitter.Summary(protocol.Text("The user is updating the ACP schema.")))
	_ = c.Chunk(ctx, protocol.Text("too late")) // dropped: already settled

	_, _ = s.Start(ctx, emitter.WithTrigger(protocol.Manual))
	_, _ = em.SettleAll(ctx, emitter.ErrConnectionClosed) // abandoned

	lost, _ := s.Start(ctx, emitter.WithID("cmp_lost"), emitter.WithTrigger(protocol.Manual))
	err := lost.Fail(ctx, errors.New("provider returned 500"))
	fmt.Println(err)
	fmt.Println(counters.Snapshot())
	// Output:
	// <nil>
	// abandoned{reason="connection_closed"} 1
	// dropped{reason="after_settled"} 1
	// duration_count{status="completed",trigger="auto"} 1
	// duration_count{status="failed",trigger="manual"} 2
	// settled{status="completed",trigger="auto"} 1
	// settled{status="failed",trigger="manual"} 2
	// started{trigger="auto"} 1
	// started{trigger="manual"} 2
	// summary_bytes 48
}
