// Package bench holds the whole-agent throughput benchmark and the program
// that runs every benchmark of the module and prints the ratios (see
// docs/performance.md and `make bench`).
//
// The flood benchmark spawns an ACP agent process, plays a v1 client that
// advertises the compaction capability, and times `/compact flood N`: from
// writing the session/prompt request to reading its response. The client is
// a bare pipe reader: it splits lines and counts compaction_summary_chunk
// updates, and decodes only the responses, so what is measured is the
// agent.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Agent is one agent process and the bare client on its stdio.
type Agent struct {
	Name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
	nextID int
}

// StartAgent starts argv as an ACP agent on stdin/stdout and initializes it
// as a v1 client with the compaction capability.
func StartAgent(ctx context.Context, name string, argv []string, dir string) (*Agent, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	a := &Agent{Name: name, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}}
	var err error
	if a.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = a.stderr
	a.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if _, err := a.Request("initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false,"session":{"compaction":{}}}}`); err != nil {
		a.Close()
		return nil, fmt.Errorf("%s: initialize: %w%s", name, err, a.stderrTail())
	}
	return a, nil
}

// Request sends a request and reads until its response, ignoring
// notifications. It returns the result.
func (a *Agent) Request(method, params string) (json.RawMessage, error) {
	id := a.nextID
	a.nextID++
	if _, err := fmt.Fprintf(a.stdin, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
		return nil, err
	}
	res, _, err := a.readUntilResponse(id)
	return res, err
}

// NewSession opens a session and returns its ID.
func (a *Agent) NewSession() (string, error) {
	res, err := a.Request("session/new", `{"cwd":"/tmp","mcpServers":[]}`)
	if err != nil {
		return "", err
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("session/new answered %s", res)
	}
	return r.SessionID, nil
}

// Flood sends `/compact flood n` in session sid and reads until the
// prompt's response. It returns the compaction_summary_chunk updates read
// and the time from writing the request to reading the response.
func (a *Agent) Flood(sid string, n int) (chunks int, elapsed time.Duration, err error) {
	id := a.nextID
	a.nextID++
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/compact flood %d"}]}}`+"\n", id, sid, n)
	start := time.Now()
	if _, err := io.WriteString(a.stdin, req); err != nil {
		return 0, 0, err
	}
	res, chunks, err := a.readUntilResponse(id)
	elapsed = time.Since(start)
	if err != nil {
		return chunks, elapsed, err
	}
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if json.Unmarshal(res, &r) != nil || r.StopReason != "end_turn" {
		return chunks, elapsed, fmt.Errorf("prompt answered %s", res)
	}
	return chunks, elapsed, nil
}

var (
	updateMark = []byte(`"method":"session/update"`)
	chunkMark  = []byte(`"compaction_summary_chunk"`)
)

// readUntilResponse reads lines until the response to id, counting summary
// chunks on the way. Only lines that are not session/update notifications
// are decoded.
func (a *Agent) readUntilResponse(id int) (json.RawMessage, int, error) {
	chunks := 0
	for {
		line, err := a.out.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read the rest of it.
			rest, err2 := a.out.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), err2
		}
		if err != nil {
			return nil, chunks, fmt.Errorf("%s: reading: %w%s", a.Name, err, a.stderrTail())
		}
		if bytes.Contains(line, updateMark) {
			if bytes.Contains(line, chunkMark) {
				chunks++
			}
			continue
		}
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil || m.Method != "" || m.ID == nil || *m.ID != id {
			continue
		}
		if len(m.Error) > 0 && string(m.Error) != "null" {
			return nil, chunks, fmt.Errorf("%s: error response %s", a.Name, m.Error)
		}
		return m.Result, chunks, nil
	}
}

// Close hangs up and waits for the process.
func (a *Agent) Close() {
	_ = a.stdin.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, a.out)
		close(done)
	}()
	waited := make(chan error, 1)
	go func() { waited <- a.cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-waited
	}
	<-done
}

func (a *Agent) stderrTail() string {
	if s := strings.TrimSpace(a.stderr.String()); s != "" {
		return "\nstderr:\n" + s
	}
	return ""
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// ModuleRoot returns the directory of the module's go.mod, searching up
// from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
