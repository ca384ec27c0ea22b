package agentkit

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// NewStream returns a jsonrpc2.ObjectStream of newline-delimited JSON
// messages over rwc: the framing of jsonrpc2.NewPlainObjectStream, which is
// ACP's stdio transport, and a drop-in replacement for it.
//
// Given to Kit.NewConn, its output is buffered: the kit writes the bytes to
// rwc itself, and notifications that queue up while a write is in progress
// leave together in the next one, instead of one write each. Nothing waits
// for more to come: what is queued is written as soon as the previous write
// returns, and a response, or a request of the agent's, returns from its
// write only once it is on rwc, behind everything sent before it. A
// notification's write error is returned by a later write. Used without a
// kit, it writes each message when it is written, like
// jsonrpc2.NewPlainObjectStream.
func NewStream(rwc io.ReadWriteCloser) jsonrpc2.ObjectStream {
	return &lineStream{rwc: rwc, dec: json.NewDecoder(rwc)}
}

type lineStream struct {
	rwc io.ReadWriteCloser
	dec *json.Decoder
	mu  sync.Mutex
}

// ReadObject reads the next JSON value.
func (s *lineStream) ReadObject(v any) error { return s.dec.Decode(v) }

// WriteObject writes v as one line.
func (s *lineStream) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.rwc.Write(append(b, '\n'))
	return err
}

// Close closes rwc.
func (s *lineStream) Close() error { return s.rwc.Close() }
