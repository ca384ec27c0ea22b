package proxy

import (
	"log/slog"
	"sync"

	"github.com/acpcompact/acpcompact/test/conformance"
)

// checkState feeds the configured Checker. Both pumps observe, so calls are
// serialized here; seq numbers every observed message of both directions in
// the order the proxy saw them, which is the checker's notion of a line.
type checkState struct {
	mu     sync.Mutex
	ch     Checker
	which  Checked
	log    *slog.Logger
	seq    int
	closed bool
}

// A nil *checkState means no checker; its methods are then no-ops, which
// keeps the call sites free of conditionals.

func (k *checkState) agentSide() bool  { return k != nil && k.which == CheckAgent }
func (k *checkState) clientSide() bool { return k != nil && k.which == CheckClient }

// observe feeds one message. side and line locate it for the log (line 0
// for messages the proxy wrote itself, which have no input line).
func (k *checkState) observe(dir conformance.Direction, side string, line int, msg []byte) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.seq++
	for _, v := range k.ch.Observe(dir, k.seq, msg) {
		k.report(v, side, line)
	}
}

func (k *checkState) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	for _, v := range k.ch.Close() {
		k.report(v, "", 0)
	}
}

func (k *checkState) report(v conformance.Violation, side string, line int) {
	attrs := []any{"rule", string(v.Rule), "seq", v.Line, "checked", k.which.String()}
	if side != "" {
		attrs = append(attrs, "side", side)
	}
	if line > 0 {
		attrs = append(attrs, "line", line)
	}
	k.log.Warn("conformance: "+v.Message, attrs...)
}
