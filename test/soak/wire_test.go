package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// msg is one JSON-RPC message read from the agent, with the fields the
// tests look at.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			CompactionID  string `json:"compactionId"`
			Status        string `json:"status"`
			ToolCallID    string `json:"toolCallId"`
			Meta          struct {
				Record struct {
					Status string `json:"status"`
				} `json:"acpcompact/record"`
			} `json:"_meta"`
		} `json:"update"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw []byte
}

// client is a bare ACP client on a pair of pipes: it writes requests as
// lines, matches responses to them by id, and hands every other message to
// onMsg (on the reading goroutine). It is the client side of every test in
// this package, in process or against a binary.
type client struct {
	w   io.Writer
	wmu sync.Mutex

	mu      sync.Mutex
	next    int
	pending map[string]func(*msg) // nil on the agent's end of output
	err     error

	onMsg func(*msg)
	done  chan struct{}
}

// newClient reads r until it ends; onMsg may be nil.
func newClient(r io.Reader, w io.Writer, onMsg func(*msg)) *client {
	c := &client{w: w, pending: map[string]func(*msg){}, onMsg: onMsg, done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *client) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, 1<<16)
	var err error
	for err == nil {
		var line []byte
		line, err = br.ReadBytes('\n')
		if len(line) == 0 {
			continue
		}
		m := &msg{raw: line}
		if jerr := json.Unmarshal(line, m); jerr != nil {
			err = fmt.Errorf("agent wrote a line that is not JSON: %v: %q", jerr, line)
			break
		}
		if m.Method == "" && len(m.ID) > 0 {
			c.mu.Lock()
			f := c.pending[string(m.ID)]
			delete(c.pending, string(m.ID))
			c.mu.Unlock()
			if f != nil {
				f(m)
				continue
			}
		}
		if c.onMsg != nil {
			c.onMsg(m)
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.EOF
	}
	c.mu.Lock()
	c.err = err
	for id, f := range c.pending {
		f(nil)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// line writes one message.
func (c *client) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// start writes a request and returns its id and the channel its response
// arrives on (closed without one when the agent's output ends).
func (c *client) start(method string, params any) (string, <-chan *msg, error) {
	ch := make(chan *msg, 1)
	id, err := c.startFunc(method, params, func(m *msg) {
		if m != nil {
			ch <- m
		}
		close(ch)
	})
	return id, ch, err
}

// startFunc writes a request; f receives its response on the reading
// goroutine (nil when the agent's output ends without one).
func (c *client) startFunc(method string, params any, f func(*msg)) (string, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return "", c.err
	}
	c.next++
	n := c.next
	id := strconv.Itoa(n)
	c.pending[id] = f
	c.mu.Unlock()
	if raw, ok := params.(json.RawMessage); ok {
		// Pre-encoded params: no marshalling per request.
		b := make([]byte, 0, len(raw)+len(method)+48)
		b = fmt.Appendf(b, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":`, n, method)
		b = append(append(b, raw...), "}\n"...)
		c.wmu.Lock()
		defer c.wmu.Unlock()
		_, err := c.w.Write(b)
		return id, err
	}
	return id, c.line(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
}

// call is start, then the wait for the response.
func (c *client) call(ctx context.Context, method string, params any) (*msg, error) {
	_, ch, err := c.start(method, params)
	if err != nil {
		return nil, err
	}
	return await(ctx, method, ch)
}

// await waits for the response on ch.
func await(ctx context.Context, method string, ch <-chan *msg) (*msg, error) {
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: the agent's output ended before its response", method)
		}
		return m, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// notify writes a notification.
func (c *client) notify(method string, params any) error {
	return c.line(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// initialize performs the v1 initialize exchange, advertising the
// compaction capability when capable.
func (c *client) initialize(ctx context.Context, capable bool) error {
	caps := map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false}
	if capable {
		caps["session"] = map[string]any{"compaction": map[string]any{}}
	}
	m, err := c.call(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps})
	if err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("initialize: %s", m.Error.Message)
	}
	return nil
}

// newSession creates a session and returns its id.
func (c *client) newSession(ctx context.Context) (string, error) {
	m, err := c.call(ctx, "session/new", map[string]any{"cwd": "/work", "mcpServers": []any{}})
	if err != nil {
		return "", err
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.SessionID == "" {
		return "", fmt.Errorf("session/new: %s", m.raw)
	}
	return res.SessionID, nil
}

// promptParams are session/prompt's params for one text block.
func promptParams(sessionID, text string) map[string]any {
	return map[string]any{"sessionId": sessionID, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// stopReason returns a prompt response's stopReason, or an error for an
// error response.
func stopReason(m *msg) (string, error) {
	if m.Error != nil {
		return "", fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	var res struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		return "", err
	}
	return res.StopReason, nil
}
