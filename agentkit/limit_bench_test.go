package agentkit

import (
	"fmt"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// limiterImpl is what AsyncHandler and the stream ask of a limiter.
type limiterImpl interface {
	acquire(max int, req *jsonrpc2.Request) *slot
	release(*slot)
	sent(*jsonrpc2.Request)
	answered(*jsonrpc2.Request)
	close()
}

var limiters = []struct {
	name string
	new  func() limiterImpl
}{
	{"cond", func() limiterImpl { return newLimiter() }},
	{"semaphore", func() limiterImpl { return newSemLimiter() }},
}

// BenchmarkLimiter measures a message's way through the limiter: a slot
// taken and given back (free: under the limit); with a request to the
// client sent and answered in between (exempt); and at the limit, the read
// loop waiting for handlers on other goroutines to return (full).
func BenchmarkLimiter(b *testing.B) {
	prompt := limitMsg("session/prompt", `{"sessionId":"sess_1","prompt":[{"type":"text","text":"hi"}]}`, false)
	ask := limitMsg("fs/read_text_file", `{"sessionId":"sess_1","path":"/x"}`, false)
	for _, lim := range limiters {
		b.Run("free/impl="+lim.name, func(b *testing.B) {
			l := lim.new()
			b.ReportAllocs()
			for b.Loop() {
				l.release(l.acquire(256, prompt))
			}
		})
		b.Run("exempt/impl="+lim.name, func(b *testing.B) {
			l := lim.new()
			b.ReportAllocs()
			for b.Loop() {
				s := l.acquire(256, prompt)
				l.sent(ask)
				l.answered(ask)
				l.release(s)
			}
		})
		for _, max := range []int{1, 4} {
			b.Run(fmt.Sprintf("full%d/impl=%s", max, lim.name), func(b *testing.B) {
				l := lim.new()
				slots := make(chan *slot, max)
				done := make(chan struct{})
				for range max {
					go func() {
						for s := range slots {
							l.release(s)
						}
						done <- struct{}{}
					}()
				}
				b.ReportAllocs()
				for b.Loop() {
					slots <- l.acquire(max, prompt)
				}
				close(slots)
				for range max {
					<-done
				}
			})
		}
	}
}
