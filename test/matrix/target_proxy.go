package matrix

import (
	"context"
	"io"
)

// ProxyTarget plays the scenario agent's scripts (AgentTarget) through the
// proxy: `acpcompact proxy [ProxyArgs] -- scenario-agent [flags]`. The
// scenario agent is correct, so the proxy must be transparent for it: the
// client sees what AgentTarget's does, and the wants are the same.
type ProxyTarget struct {
	// Proxy is the acpcompact binary; Agent is the scenario agent binary.
	Proxy, Agent string
	// ProxyArgs are the proxy's flags.
	ProxyArgs []string
	// Stderr receives the proxy's and the agent's stderr (default:
	// discarded).
	Stderr io.Writer
	// History is AgentTarget's.
	History bool
}

// Name implements Target.
func (ProxyTarget) Name() string { return "proxy" }

// Play implements Target.
func (t ProxyTarget) Play(ctx context.Context, sc Scenario) (*Run, error) {
	args := append([]string{"proxy"}, t.ProxyArgs...)
	args = append(args, "--", t.Agent)
	return AgentTarget{Path: t.Proxy, Args: args, Stderr: t.Stderr, History: t.History}.Play(ctx, sc)
}
