package proxy

import (
	"log/slog"
	"sync"

	"github.com/acpcompact/acpcompact/conformance"
)

// checkState feeds the configured Checker. Both pumps observe, so calls are
// serialized here.
//
// Each message is numbered as the log numbers it: by its side's own line
// (side=client line=3 is the client's third line, side=agent line=16 the
// agent's sixteenth), and a line the proxy made by the agent line it was
// made for. The checker's violations, and the lines their messages name
// ("first seen at line 12"), are then in the log's numbering: compaction
// updates and the messages that end turns all come from the agent's side.
type checkState struct {
	mu     sync.Mutex
	ch     Checker
	which  Checked
	log    *slog.Logger
	closed bool
}

// A nil *checkState means no checker; its methods are then no-ops, which
// keeps the call sites free of conditionals.

func (k *checkState) agentSide() bool  { return k != nil && k.which == CheckAgent }
func (k *checkState) clientSide() bool { return k != nil && k.which == CheckClient }

// observe feeds one message, line being its position on side.
func (k *checkState) observe(dir conformance.Direction, side string, line int, msg []byte) {
	k.locked(func() {
		for _, v := range k.ch.Observe(dir, line, msg) {
			k.report(v, side, line)
		}
	})
}

func (k *checkState) close() {
	k.locked(func() {
		k.closed = true
		for _, v := range k.ch.Close() {
			k.report(v, sideAgent, 0)
		}
	})
}

// locked runs f holding the lock, unless there is no checker or it has
// closed.
func (k *checkState) locked(f func()) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.closed {
		f()
	}
}

// report logs a violation found while observing line of side. A violation
// about another line (an unsettled compaction at the end, for one) is
// about an agent line.
func (k *checkState) report(v conformance.Violation, side string, line int) {
	if v.Line != line {
		side = sideAgent
	}
	attrs := []any{"rule", string(v.Rule), "checked", k.which.String(), "side", side}
	if v.Line > 0 {
		attrs = append(attrs, "line", v.Line)
	}
	k.log.Warn("conformance: "+v.Message, attrs...)
}
