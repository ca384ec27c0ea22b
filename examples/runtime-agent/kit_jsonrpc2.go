package main

// The kit on sourcegraph/jsonrpc2 (agentkit), keeping the sessions'
// histories in dir: with glue.go, all of this agent's acpcompact-specific
// code on that stack.

import (
	"context"
	"io"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/sessionlog"
)

// serveJSONRPC serves the agent on rwc; it returns the connection's end
// and the kit's Shutdown (settle and write what is open).
func serveJSONRPC(a *agent, dir string, rwc io.ReadWriteCloser) (<-chan struct{}, func(context.Context) error, error) {
	st, err := sessionlog.Open(dir)
	kit := agentkit.New(agentkit.WithStore(st.History()))
	a.record = kit.Record
	return kit.NewConn(context.Background(), agentkit.NewStream(rwc), agentkit.AsyncHandler(a.jsonrpc2())).DisconnectNotify(), kit.Shutdown, err
}
