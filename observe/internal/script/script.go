// Package script drives emitters through one fixed compaction run, so the
// observe and otelobs tests assert the same scenario against their own
// backends and the expected numbers are written down once.
package script

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

// Expected results of Run, by compaction (session/ID, trigger, outcome):
//
//	s1/c1  auto    completed; chunks "Hello, " + "world", summary "Hello, world"
//	               then a late chunk and a second Complete, both dropped
//	s1/c2  manual  failed "provider returned 500"; its chunk withheld
//	s1/c3  manual  cancelled by the runtime
//	s1/c1  -       Start with a reused ID, dropped
//	s1/c4  auto    failed by Emitter.SettleAll(ErrConnectionClosed): abandoned
//	s2/c5  auto    cancelled by Session.SettleAll(ErrCancelled): abandoned (cancel_unreported)
//	s1/c6  manual  failed by Session.SettleAll(nil), i.e. ErrTurnEnded: abandoned
//	s1/c7  manual  failed right after its start with ErrAgentCrashed: abandoned
//	s3/old auto    replayed completed; s3/run (in progress) skipped
//	u/u1   auto    completed, both updates undeliverable
//	w/w1   idle    failed by the watchdog (ErrTimeout): abandoned
const (
	SummaryBytes = int64(len("Hello, ") + len("world") + len("Hello, world"))
	ProviderErr  = "provider returned 500"
)

// Negotiation is a capable v1 connection, so the standard renderer runs.
var Negotiation = capability.Negotiation{Version: 1, Compaction: true}

func nop(context.Context, string, any) error { return nil }

// Run plays the scenario against obs, making every runtime call with ctx.
// It returns once the watchdog has settled w/w1.
func Run(t testing.TB, ctx context.Context, obs emitter.Observer) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		require.NoError(t, err, "a step of the scripted run")
	}
	mustFail := func(err error, target error) {
		t.Helper()
		require.ErrorIs(t, err, target, "a step of the scripted run that must be refused")
	}

	em := emitter.New(emitter.NotifierFunc(nop), emitter.WithNegotiation(Negotiation), emitter.WithObserver(obs))
	s1, s2, s3 := em.Session("s1"), em.Session("s2"), em.Session("s3")

	c1, err := s1.Start(ctx, emitter.WithID("c1"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	must(err)
	must(c1.Chunk(ctx, protocol.Text("Hello, ")))
	must(c1.Chunk(ctx, protocol.Text("world")))
	must(c1.Complete(ctx, emitter.Summary(protocol.Text("Hello, world"))))
	mustFail(c1.Chunk(ctx, protocol.Text("late")), emitter.ErrSettled)
	mustFail(c1.Complete(ctx), emitter.ErrSettled)

	c2, err := s1.Start(ctx, emitter.WithID("c2"))
	must(err)
	mustFail(c2.Chunk(ctx, protocol.Text("not displayable")), emitter.ErrWithheld)
	must(c2.Fail(ctx, errors.New(ProviderErr)))

	c3, err := s1.Start(ctx, emitter.WithID("c3"))
	must(err)
	must(c3.Cancel(ctx))

	_, err = s1.Start(ctx, emitter.WithID("c1"))
	mustFail(err, emitter.ErrIDReused)

	_, err = s1.Start(ctx, emitter.WithID("c4"), emitter.WithTrigger(protocol.Auto))
	must(err)
	_, err = s2.Start(ctx, emitter.WithID("c5"), emitter.WithTrigger(protocol.Auto))
	must(err)
	n, err := s2.SettleAll(ctx, emitter.ErrCancelled)
	require.NoError(t, err, "s2.SettleAll")
	require.Equal(t, 1, n, "s2.SettleAll settled")
	n, err = em.SettleAll(ctx, emitter.ErrConnectionClosed)
	require.NoError(t, err, "em.SettleAll")
	require.Equal(t, 1, n, "em.SettleAll settled")

	_, err = s1.Start(ctx, emitter.WithID("c6"))
	must(err)
	n, err = s1.SettleAll(ctx, nil)
	require.NoError(t, err, "s1.SettleAll")
	require.Equal(t, 1, n, "s1.SettleAll settled")

	c7, err := s1.Start(ctx, emitter.WithID("c7"))
	must(err)
	must(c7.Fail(ctx, emitter.ErrAgentCrashed))

	must(s3.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed, Trigger: protocol.Auto, Summary: []protocol.ContentBlock{protocol.Text("x")}, Displayable: true}))
	must(s3.Replay(ctx, emitter.Record{ID: "run", Status: protocol.InProgress}))

	failing := emitter.NotifierFunc(func(context.Context, string, any) error { return errors.New("pipe closed") })
	eu := emitter.New(failing, emitter.WithNegotiation(Negotiation), emitter.WithObserver(obs))
	u1, err := eu.Session("u").Start(ctx, emitter.WithID("u1"), emitter.WithTrigger(protocol.Auto))
	mustFail(err, emitter.ErrUndeliverable)
	mustFail(u1.Complete(ctx), emitter.ErrUndeliverable)

	RunWatchdog(t, ctx, obs)
}

// RunWatchdog starts w/w1 on an emitter with a tiny maximum duration and
// waits until the watchdog has settled it. It waits on the event itself, so
// the test never depends on how fast the machine is.
func RunWatchdog(t testing.TB, ctx context.Context, obs emitter.Observer) {
	t.Helper()
	done := make(chan struct{})
	var once sync.Once
	signal := emitter.ObserverFunc(func(_ context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled && ev.ID == "w1" {
			once.Do(func() { close(done) })
		}
	})
	ew := emitter.New(emitter.NotifierFunc(nop), emitter.WithNegotiation(Negotiation),
		emitter.WithObserver(obs, signal), emitter.WithMaxDuration(time.Millisecond))
	_, err := ew.Session("w").Start(ctx, emitter.WithID("w1"), emitter.WithTrigger(protocol.Idle))
	require.NoError(t, err, "Start w1")
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		require.Fail(t, "the watchdog never settled w1")
	}
}
