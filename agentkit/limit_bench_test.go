package agentkit

import (
	"fmt"
	"testing"
)

// BenchmarkLimiter measures a message's way through AsyncHandler's
// limiter: a slot taken and given back under the limit (free); with a
// request to the client sent and answered in between (exempt); and at the
// limit, the read loop waiting for handlers on other goroutines to return
// (full1, full4: the limit). (Commit 07723c7 ran a semaphore.Weighted
// limiter beside it; see CHANGELOG.md.)
func BenchmarkLimiter(b *testing.B) {
	prompt := limitMsg("session/prompt", `{"sessionId":"sess_1","prompt":[{"type":"text","text":"hi"}]}`, false)
	ask := limitMsg("fs/read_text_file", `{"sessionId":"sess_1","path":"/x"}`, false)
	b.Run("free", func(b *testing.B) {
		l := newLimiter()
		b.ReportAllocs()
		for b.Loop() {
			l.release(l.acquire(256, prompt))
		}
	})
	b.Run("exempt", func(b *testing.B) {
		l := newLimiter()
		b.ReportAllocs()
		for b.Loop() {
			s := l.acquire(256, prompt)
			l.sent(ask)
			l.answered(ask)
			l.release(s)
		}
	})
	for _, max := range []int{1, 4} {
		b.Run(fmt.Sprintf("full%d", max), func(b *testing.B) {
			l := newLimiter()
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
