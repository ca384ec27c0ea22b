package emitter_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPropertyRandomLifecyclesKeepTheInvariants drives random sequences of
// lifecycle calls from concurrent goroutines across and within sessions,
// then checks the emitted stream alone: the capability gate, one terminal
// per ID, no chunk outside an open compaction, no ID reuse, and nothing
// left open after SettleAll.
func TestPropertyRandomLifecyclesKeepTheInvariants(t *testing.T) {
	const (
		workers  = 8
		sessions = 40
		ops      = 100_000
	)
	for _, n := range []capability.Negotiation{capable, {Version: 2, Compaction: true}, {Version: 1}} {
		t.Run(fmt.Sprintf("v%d-capability-%v", n.Version, n.Compaction), func(t *testing.T) {
			rec := &wiretest.Recorder{}
			em := emitter.New(rec, emitter.WithNegotiation(n), emitter.WithSummaryPolicy(emitter.AllSummaries))
			ctx := context.Background()
			var (
				mu      sync.Mutex
				handles []*emitter.Compaction
			)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 42))
					pick := func() *emitter.Compaction {
						mu.Lock()
						defer mu.Unlock()
						if len(handles) == 0 {
							return nil
						}
						return handles[r.IntN(len(handles))]
					}
					for i := range ops / workers {
						s := em.Session(fmt.Sprintf("s%d", r.IntN(sessions)))
						switch op := r.IntN(100); {
						case op < 20: // start, sometimes with a colliding runtime ID
							var opts []emitter.StartOption
							if r.IntN(3) == 0 {
								opts = append(opts, emitter.WithID(protocol.ID(fmt.Sprintf("rt-%d", r.IntN(200)))))
							}
							if c, err := s.Start(ctx, opts...); err == nil {
								mu.Lock()
								handles = append(handles, c)
								mu.Unlock()
							} else {
								assert.ErrorIs(t, err, emitter.ErrIDReused, "start")
							}
						case op < 60:
							_ = pick().Chunk(ctx, protocol.Text("x"))
						case op < 70:
							_ = pick().Complete(ctx, emitter.Summary(protocol.Text("sum")))
						case op < 75:
							_ = pick().Complete(ctx)
						case op < 80:
							_ = pick().Fail(ctx, errors.New("boom"))
						case op < 84:
							_ = pick().Cancel(ctx)
						case op < 88: // a failure right after the start
							if c, err := s.Start(ctx, emitter.WithID(protocol.ID(fmt.Sprintf("early-%d-%d", w, i)))); err == nil {
								_ = c.Fail(ctx, errors.New("early"))
							}
						case op < 90:
							_, _ = s.SettleAll(ctx, emitter.ErrTurnEnded)
						case op < 92:
							_, _ = s.SettleAll(ctx, emitter.ErrCancelled)
						case op < 96:
							if c, err := s.Compaction(protocol.ID(fmt.Sprintf("rt-%d", r.IntN(200)))); err == nil {
								_ = c.Chunk(ctx, protocol.Text("y"))
							}
						default:
							st := []protocol.Status{protocol.Completed, protocol.Failed, protocol.Cancelled, protocol.InProgress}[r.IntN(4)]
							_ = s.Replay(ctx, emitter.Record{ID: protocol.ID(fmt.Sprintf("replay-%d-%d", w, i)), Status: st})
						}
					}
				}()
			}
			wg.Wait()
			_, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
			require.NoError(t, err, "Emitter.SettleAll")
			require.Equal(t, 0, emitter.OpenCount(em), "open compactions after SettleAll")

			lines := rec.Lines()
			if !n.Compaction {
				require.Empty(t, lines, "capability gate: lines sent to a client without the capability")
				return
			}
			require.NotEmpty(t, lines, "nothing sent to a client with the capability")
			type state struct{ open, settled bool }
			seen := map[string]*state{}
			for i, l := range lines {
				u := wiretest.Update(l)
				key := u["·session"].(string) + "/" + u["compactionId"].(string)
				st := seen[key]
				kind := u["sessionUpdate"]
				status, _ := u["status"].(string)
				if st != nil {
					require.False(t, st.settled, "line %d: %s after the terminal update of %s (ID reuse or second terminal)", i, kind, key)
				}

				switch {
				case kind == protocol.KindSummaryChunk:
					require.NotNil(t, st, "line %d: chunk outside an open compaction %s", i, key)
					require.True(t, st.open, "line %d: chunk outside an open compaction %s", i, key)
				case status == "in_progress":
					seen[key] = &state{open: true}
				case protocol.Status(status).Terminal():
					if st == nil {
						// Terminal-first is only allowed for replays.
						require.Contains(t, key, "/replay-", "line %d: live terminal update without in_progress for %s", i, key)
						st = &state{}
						seen[key] = st
					}
					st.open, st.settled = false, true
				default:
					require.Fail(t, fmt.Sprintf("line %d: unexpected update %v", i, u))
				}
			}
			for key, st := range seen {
				require.True(t, st.settled, "%s never settled", key)
			}
		})
	}
}
