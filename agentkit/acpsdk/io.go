package acpsdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
)

// reader hands the SDK its input one line at a time, each line inspected by
// the tap first, so the tap's view of the connection is never behind the
// SDK's. Like any io.Reader it is meant for one reading goroutine.
type reader struct {
	t    *tap.Tap
	src  *bufio.Reader
	next []byte // what the SDK has yet to receive of the current line
	err  error
}

func newReader(t *tap.Tap, r io.Reader) *reader {
	return &reader{t: t, src: bufio.NewReader(r)}
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.next) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.src.ReadBytes('\n')
		if len(line) > 0 {
			r.next = r.inspect(line)
		}
		if err != nil {
			// Settle before the SDK learns the input ended, while the
			// output may still carry the terminal updates.
			r.t.Close(emitter.ErrConnectionClosed)
			r.err = err
		}
	}
	n := copy(p, r.next)
	r.next = r.next[n:]
	return n, nil
}

// inspect shows line to the tap and returns what the SDK should read: the
// line, preceded by a `$/cancel_request` for each prompt a session/cancel
// cancels. The SDK applies that request in its read loop, before it reads
// on, to the prompt it registered when it read the prompt's line; its own
// session/cancel handling runs later on another goroutine and may find no
// prompt context yet.
func (r *reader) inspect(line []byte) []byte {
	ids := r.t.Receive(line)
	if len(ids) == 0 {
		return line
	}
	var out []byte
	for _, id := range ids {
		req, err := json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			Params  struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}{JSONRPC: "2.0", Method: "$/cancel_request", Params: struct {
			RequestID json.RawMessage `json:"requestId"`
		}{id}})
		if err != nil {
			continue
		}
		out = append(append(out, req...), '\n')
	}
	return append(out, line...)
}

// writer receives the SDK's output. The SDK writes one whole line per
// Write; the writer still splits on newlines, so a message is always
// inspected whole.
type writer struct {
	t   *tap.Tap
	mu  sync.Mutex
	buf []byte
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.buf[:i]
		rest := w.buf[i+1:]
		var err error
		if len(bytes.TrimSpace(line)) > 0 {
			err = w.t.Send(line)
		}
		w.buf = append(w.buf[:0], rest...)
		if err != nil {
			return 0, err
		}
	}
}
