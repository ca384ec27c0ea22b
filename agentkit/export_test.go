package agentkit

import "github.com/sourcegraph/jsonrpc2"

// OnLimiterWait has f called each time a message of conn waits for one of
// AsyncHandler's slots (under the limiter's lock: f must not block).
func OnLimiterWait(k *Kit, conn *jsonrpc2.Conn, f func()) {
	k.mu.Lock()
	b := k.conns[conn]
	k.mu.Unlock()
	b.lim.mu.Lock()
	b.lim.onWait = f
	b.lim.mu.Unlock()
}
