package agentkit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// counted is how many running handlers the semaphore limiter counts
// against the limit.
func (l *semLimiter) counted(max int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sem == nil {
		return 0
	}
	free := 0
	for l.sem.TryAcquire(1) {
		free++
	}
	if free > 0 {
		l.sem.Release(int64(free))
	}
	return max - free + int(l.debt)
}

// The semaphore limiter counts as the cond limiter does, through random
// runs of handlers that start, ask the client, get answers and return.
func TestSemaphoreLimiterCountsAsTheCondLimiter(t *testing.T) {
	const max = 3
	for seed := range 200 {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		c, s := newLimiter(), newSemLimiter()
		type run struct{ cs, ss *slot }
		var running []run
		var asked []*jsonrpc2.Request
		for step := range 300 {
			sid := fmt.Sprintf("s%d", rng.IntN(3))
			switch op := rng.IntN(4); {
			case op == 0:
				a, e, _ := c.counts()
				if a-e >= max {
					continue
				}
				m := limitMsg([]string{"session/prompt", "session/set_mode"}[rng.IntN(2)], `{"sessionId":"`+sid+`"}`, false)
				running = append(running, run{c.acquire(max, m), s.acquire(max, m)})
			case op == 1 && len(running) > 0:
				i := rng.IntN(len(running))
				c.release(running[i].cs)
				s.release(running[i].ss)
				running = append(running[:i], running[i+1:]...)
			case op == 2:
				r := limitMsg("fs/read_text_file", `{"sessionId":"`+sid+`"}`, false)
				c.sent(r)
				s.sent(r)
				asked = append(asked, r)
			case op == 3 && len(asked) > 0:
				i := rng.IntN(len(asked))
				c.answered(asked[i])
				s.answered(asked[i])
				asked = append(asked[:i], asked[i+1:]...)
			}
			a, e, _ := c.counts()
			if got := s.counted(max); got != a-e {
				t.Fatalf("seed %d, step %d: the semaphore limiter counts %d, the cond limiter %d", seed, step, got, a-e)
			}
		}
	}
}
