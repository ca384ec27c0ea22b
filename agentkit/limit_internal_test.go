package agentkit

import (
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
)

func limitMsg(method, params string, notif bool) *jsonrpc2.Request {
	r := &jsonrpc2.Request{Method: method, Notif: notif}
	if params != "" {
		raw := json.RawMessage(params)
		r.Params = &raw
	}
	return r
}

func (l *limiter) counts() (active, exempt, calls int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active, l.exempt, len(l.calls)
}

func checkCounts(t *testing.T, l *limiter, step string, active, exempt, calls int) {
	t.Helper()
	a, e, c := l.counts()
	assert.Equal(t, [3]int{active, exempt, calls}, [3]int{a, e, c}, "%s: active, exempt, unanswered", step)
}

// A handler is exempt once however many of its requests are unanswered,
// until the last is answered or it returns; a late answer changes
// nothing.
func TestLimiterExemptsEachHandlerOnce(t *testing.T) {
	l := newLimiter()
	s := l.acquire(1, limitMsg("session/prompt", `{"sessionId":"a"}`, false))
	r1 := limitMsg("fs/read_text_file", `{"sessionId":"a","path":"/x"}`, false)
	r2 := limitMsg("fs/read_text_file", `{"path":"/y","sessionId":"a"}`, false)
	r3 := limitMsg("session/request_permission", `{"SessionId":"a"}`, false) // matched as encoding/json does
	l.sent(r1)
	l.sent(r2)
	l.sent(r3)
	checkCounts(t, l, "three requests sent", 1, 1, 3)
	l.answered(r1)
	l.answered(r1)
	checkCounts(t, l, "one answered (twice)", 1, 1, 2)
	l.answered(r2)
	l.answered(r3)
	checkCounts(t, l, "all answered", 1, 0, 0)

	l.sent(r1)
	l.sent(r2)
	checkCounts(t, l, "two more sent", 1, 1, 2)
	l.release(s)
	checkCounts(t, l, "the handler returned", 0, 0, 0)
	l.answered(r1)
	checkCounts(t, l, "answered after it returned", 0, 0, 0)
}

// A request that names no session, or one no handler runs for, exempts
// nobody and is not kept.
func TestLimiterRequestsOfNoRunningHandler(t *testing.T) {
	l := newLimiter()
	s := l.acquire(2, limitMsg("session/prompt", `{"sessionId":"a"}`, false))
	for _, r := range []*jsonrpc2.Request{
		limitMsg("fs/read_text_file", `{"sessionId":"b"}`, false),
		limitMsg("_x/ask", `{}`, false),
		limitMsg("_x/ask", ``, false),
		limitMsg("_x/ask", `[1]`, false),
		limitMsg("_x/ask", `{"sessionId":7}`, false),
	} {
		l.sent(r)
		l.answered(r)
	}
	checkCounts(t, l, "requests of no running handler", 1, 0, 0)
	l.release(s)
	checkCounts(t, l, "released", 0, 0, 0)
	assert.Empty(t, l.sessions, "sessions left")
}

// Among several handlers of a session, a request counts for its latest
// session/prompt.
func TestLimiterCountsTheSessionsPrompt(t *testing.T) {
	l := newLimiter()
	cancel := l.acquire(8, limitMsg("session/cancel", `{"sessionId":"a"}`, true))
	prompt := l.acquire(8, limitMsg("session/prompt", `{"sessionId":"a"}`, false))
	mode := l.acquire(8, limitMsg("session/set_mode", `{"sessionId":"a"}`, false))
	r := limitMsg("session/request_permission", `{"sessionId":"a"}`, false)
	l.sent(r)
	checkCounts(t, l, "sent", 3, 1, 1)
	l.release(mode)
	l.release(cancel)
	checkCounts(t, l, "the others returned", 1, 1, 1)
	l.release(prompt)
	checkCounts(t, l, "the prompt returned", 0, 0, 0)

	// Without a prompt, the latest handler of the session.
	first := l.acquire(8, limitMsg("session/load", `{"sessionId":"a"}`, false))
	latest := l.acquire(8, limitMsg("session/set_mode", `{"sessionId":"a"}`, false))
	l.sent(r)
	l.release(first)
	checkCounts(t, l, "the earlier handler returned", 1, 1, 1)
	l.release(latest)
	checkCounts(t, l, "the latest returned", 0, 0, 0)
}

// The sequence: handlers that each wait for an answer that never
// comes leave nothing behind once they return.
func TestLimiterBoundOutlivesUnansweredRequests(t *testing.T) {
	l := newLimiter()
	for i := range 6 {
		sid := string(rune('a' + i))
		s := l.acquire(2, limitMsg("session/prompt", `{"sessionId":"`+sid+`"}`, false))
		l.sent(limitMsg("fs/read_text_file", `{"sessionId":"`+sid+`"}`, false))
		defer l.release(s)
	}
	checkCounts(t, l, "six waiting", 6, 6, 6)
	t.Cleanup(func() { checkCounts(t, l, "all returned", 0, 0, 0) })
}
