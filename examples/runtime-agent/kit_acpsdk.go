package main

// The kit on coder/acp-go-sdk (agentkit/acpsdk), keeping the sessions'
// histories in dir: with glue.go, all of this agent's acpcompact-specific
// code on that stack.

import (
	"context"
	"io"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/sessionlog"
)

// serveSDK serves the agent on in and out; it returns the connection's end
// and the kit's Shutdown (settle and write what is open).
func serveSDK(a *agent, dir string, in io.Reader, out io.Writer) (<-chan struct{}, func(context.Context) error, error) {
	st, err := sessionlog.Open(dir)
	kit := acpsdk.New(acpsdk.WithStore(st.History()))
	a.record = kit.Record
	return kit.NewAgentSideConnection(a, out, in).Done(), kit.Shutdown, err
}
