package tap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests pin the output queue's guarantees on the wire (see out.go):
// the order of the calls, notifications batched while a write is in
// progress, a response written behind everything before it by the time its
// Send returns, a bounded buffer, a sticky write error. None depends on
// timing: a write that must be in progress is held until the test lets it
// go.

// sink is a transport that records each Write and can hold the next one.
type sink struct {
	mu      sync.Mutex
	writes  [][]byte
	hold    chan struct{} // when set, the next Write waits for it to close
	entered chan struct{} // closed when a held Write has begun
	err     error
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	hold, entered := s.hold, s.entered
	s.hold, s.entered = nil, nil
	s.mu.Unlock()
	if hold != nil {
		close(entered)
		<-hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.writes = append(s.writes, bytes.Clone(p))
	return len(p), nil
}

// holdNext makes the next Write wait until the returned release is called;
// entered is closed once that Write has begun.
func (s *sink) holdNext() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold, in := make(chan struct{}), make(chan struct{})
	s.hold, s.entered = hold, in
	return in, func() { close(hold) }
}

func (s *sink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, w := range s.writes {
		for _, l := range strings.SplitAfter(string(w), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

func (s *sink) rounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes)
}

func quietConfig() Config { return Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler)} }

func note(i int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i)
}

func response(id int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{}}`, id)
}

func TestNotificationsQueuedDuringAWriteLeaveInOneWrite(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	entered, release := s.holdNext()
	require.NoError(t, tp.Send(note(0)))
	<-entered // the first notification's write is in progress
	for i := 1; i <= 9; i++ {
		require.NoError(t, tp.Send(note(i))) // returns without waiting
	}
	release()
	require.NoError(t, tp.Flush())
	assert.Equal(t, 2, s.rounds(), "writes: the first, then the nine queued behind it")
	lines := s.lines()
	require.Len(t, lines, 10, "lines on the wire")
	for i, l := range lines {
		assert.Equal(t, string(note(i))+"\n", l, "line %d", i)
	}
	tp.Close(emitter.ErrConnectionClosed)
}

func TestResponseIsOnTheWireBehindEveryEarlierMessageWhenSendReturns(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	entered, release := s.holdNext()
	require.NoError(t, tp.Send(note(0)))
	<-entered
	for i := 1; i < 100; i++ {
		require.NoError(t, tp.Send(note(i)))
	}
	done := make(chan error, 1)
	go func() { done <- tp.Send(response(7)) }()
	release()
	require.NoError(t, <-done)
	// No Flush: the response's Send returning is the guarantee.
	lines := s.lines()
	require.Len(t, lines, 101, "lines on the wire when the response's Send returned")
	for i := range 100 {
		assert.Equal(t, string(note(i))+"\n", lines[i], "line %d", i)
	}
	assert.Equal(t, string(response(7))+"\n", lines[100], "the last line: the response")
	tp.Close(emitter.ErrConnectionClosed)
}

func TestPerMessageTransportSeesEachMessageWholeAndInOrder(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	tp := New(quietConfig(), func(msg []byte) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(msg))
		return nil
	})
	for i := range 50 {
		require.NoError(t, tp.Send(note(i)))
	}
	require.NoError(t, tp.Send(response(1)))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 51, "messages")
	require.Equal(t, string(response(1)), got[50], "the last message")
	for i := range 50 {
		assert.Equal(t, string(note(i)), got[i], "message %d", i)
	}
}

// Concurrent writers: each one's messages keep their order, nothing is
// lost or split, and each response follows its writer's notifications.
func TestConcurrentWritersKeepTheirOrder(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	const writers, each = 4, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"x/n","params":{"w":%d,"i":%d}}`, w, i)
				if i%50 == 49 {
					msg = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"%d-%d","result":{"w":%d,"i":%d}}`, w, i, w, i)
				}
				if err := tp.Send(msg); !assert.NoError(t, err) { // a writer's goroutine: assert
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, tp.Flush())
	next := make([]int, writers)
	for _, l := range s.lines() {
		var m struct {
			Params, Result *struct{ W, I int }
		}
		require.NoError(t, json.Unmarshal([]byte(l), &m), "line split or merged: %q", l)
		p := m.Params
		if p == nil {
			p = m.Result
		}
		require.Equal(t, next[p.W], p.I, "writer %d: the message after %d", p.W, next[p.W]-1)
		next[p.W]++
	}
	for w, n := range next {
		assert.Equal(t, each, n, "writer %d: messages on the wire", w)
	}
	tp.Close(emitter.ErrConnectionClosed)
}

// A producer that runs ahead of the client waits: no write ever carries
// more than the bound plus the message that reached it.
func TestBufferIsBounded(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	big := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"x/n","params":{"pad":"%s"}}`, strings.Repeat("x", 1000))
	entered, release := s.holdNext()
	done := make(chan error, 1)
	go func() {
		for range 500 { // about 500 KiB, far beyond the bound
			if err := tp.Send(big); err != nil {
				done <- err
				return
			}
		}
		done <- tp.Flush()
	}()
	<-entered
	release()
	require.NoError(t, <-done)
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, w := range s.writes {
		assert.LessOrEqual(t, len(w), maxPending+len(big)+1, "the bytes of a write")
		total += len(w)
	}
	assert.Equal(t, 500*(len(big)+1), total, "bytes written")
	tp.Close(emitter.ErrConnectionClosed)
}

func TestWriteErrorIsReturnedByTheNextWritesAndTheResponse(t *testing.T) {
	s := sink{err: errors.New("broken pipe")}
	tp := NewWriter(quietConfig(), &s)
	require.NoError(t, tp.Send(note(0)), "a notification returns before its write")
	assert.EqualError(t, tp.Send(response(1)), "broken pipe", "response after a failed write")
	assert.Error(t, tp.Send(note(1)), "a write after the failure succeeded")
	assert.Error(t, tp.Flush(), "Flush hid the failure")
	tp.Close(emitter.ErrConnectionClosed)
}

// The end of a turn on the buffered path: the streamed chunks, then the
// settlement, then the response, all on the wire when Send returns.
func TestTurnEndIsOrderedOnTheBufferedWire(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)))
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	c, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_1"), emitter.UserDisplayable())
	require.NoError(t, err)
	for i := range 200 {
		require.NoError(t, c.Chunk(context.Background(), protocol.Text(fmt.Sprint(i))))
		require.NoError(t, tp.Send(note(i)))
	}
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)))
	lines := s.lines()
	want := 1 + 1 + 400 + 1 + 1 // initialize answer, in_progress, chunks and notes, failed, response
	require.Len(t, lines, want, "lines on the wire when the response's Send returned")
	assert.Contains(t, lines[1], `"status":"in_progress"`, "line 1")
	for i := range 200 {
		assert.Contains(t, lines[2+2*i], `"compaction_summary_chunk"`, "line %d", 2+2*i)
		assert.Contains(t, lines[2+2*i], fmt.Sprintf(`"text":"%d"}}`, i), "line %d", 2+2*i)
		assert.Equal(t, string(note(i))+"\n", lines[3+2*i], "line %d", 3+2*i)
	}
	assert.Contains(t, lines[want-2], `"status":"failed"`, "the settlement")
	assert.Contains(t, lines[want-1], `"stopReason":"end_turn"`, "the last line")
	tp.Close(emitter.ErrConnectionClosed)
}

func TestCloseFlushesWhatIsQueued(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	entered, release := s.holdNext()
	require.NoError(t, tp.Send(note(0)))
	<-entered
	for i := 1; i < 20; i++ {
		require.NoError(t, tp.Send(note(i)))
	}
	release()
	tp.Close(emitter.ErrConnectionClosed)
	assert.Len(t, s.lines(), 20, "lines on the wire after Close")
}

// UpdateLine returns the session/update notification carrying update, as
// Tap.notify and outQueue.writeUpdate encode it: protocol.MarshalUpdate's
// encoding of update in protocol.AppendNotification's envelope.
func UpdateLine(sessionID string, update any) ([]byte, error) {
	u, err := protocol.MarshalUpdate(update)
	if err != nil {
		return nil, err
	}
	return protocol.AppendNotification(nil, sessionID, u), nil
}

// UpdateLine writes exactly what the generic encoding writes.
func TestUpdateLineMatchesGenericEncoding(t *testing.T) {
	generic := func(sessionID string, update any) ([]byte, error) {
		type params struct {
			SessionID string `json:"sessionId"`
			Update    any    `json:"update"`
		}
		return json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			Params  params `json:"params"`
		}{"2.0", turn.MethodUpdate, params{sessionID, update}})
	}
	image := protocol.ContentBlock{Type: "image", Extra: map[string]json.RawMessage{"data": json.RawMessage(` "<x>" `)}}
	updates := []any{
		&protocol.CompactionSummaryChunk{CompactionID: "cmp_1", Content: protocol.Text("## a <b> & \u2028 \xff\n")},
		protocol.CompactionSummaryChunk{CompactionID: "cmp_1", Content: image},
		&protocol.CompactionSummaryChunk{CompactionID: "cmp_1", Content: protocol.Text("x"), Meta: protocol.Set(protocol.Meta{"k": json.RawMessage(`1`)})},
		&protocol.CompactionUpdate{CompactionID: "cmp_1", Status: protocol.InProgress},
		protocol.CompactionUpdate{CompactionID: "cmp_1", Status: protocol.Failed, Error: protocol.Set("boom <")},
		&protocol.CompactionUpdate{CompactionID: "cmp_1", Status: protocol.Completed, Summary: protocol.Set([]protocol.ContentBlock{image})},
		protocol.UsageUpdate{Used: 10, Size: 100},
		map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "<&>"}},
	}
	for _, sid := range []string{"sess_1", "", "s<1>", "s\"\\", "sé", "s\x7f"} {
		for _, u := range updates {
			got, err := UpdateLine(sid, u)
			require.NoError(t, err)
			want, err := generic(sid, u)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "%q %T", sid, u)
		}
	}
}

// On a message transport, objects passed through and raw messages keep
// the order of the calls, and the objects reach the transport unmarshalled.
func TestPassedObjectsKeepTheirPlace(t *testing.T) {
	type obj struct{ N int }
	var (
		mu  sync.Mutex
		got []string
	)
	tp := NewObjects(quietConfig(), func(v any) error {
		mu.Lock()
		defer mu.Unlock()
		switch v := v.(type) {
		case json.RawMessage:
			got = append(got, string(v))
		case *obj:
			got = append(got, fmt.Sprintf("obj %d", v.N))
		default:
			assert.Failf(t, "the transport got an unexpected type", "%T", v)
		}
		return nil
	})
	var want []string
	for i := range 100 {
		if i%3 == 0 {
			require.NoError(t, tp.Pass(&obj{i}))
			want = append(want, fmt.Sprintf("obj %d", i))
			continue
		}
		require.NoError(t, tp.Send(note(i)))
		want = append(want, string(note(i)))
	}
	require.NoError(t, tp.Send(response(1)))
	want = append(want, string(response(1)))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, got, "messages written when the response's Send returned")
}

func TestMessageQueueIsBounded(t *testing.T) {
	var tp *Tap
	hold := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	tp = NewObjects(quietConfig(), func(any) error {
		once.Do(func() {
			close(entered)
			<-hold
		})
		tp.out.mu.Lock()
		n := len(tp.out.items)
		tp.out.mu.Unlock()
		assert.LessOrEqual(t, n, maxPendingItems, "messages pending")
		return nil
	})
	done := make(chan error, 1)
	go func() {
		for i := range 5 * maxPendingItems {
			if err := tp.Pass(i); err != nil {
				done <- err
				return
			}
		}
		done <- tp.Flush()
	}()
	<-entered
	close(hold)
	require.NoError(t, <-done)
	tp.Close(emitter.ErrConnectionClosed)
}
