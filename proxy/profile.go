package proxy

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

// ErrUnknownProfile: a profile name that Profiles does not list (nor
// "auto" or "none").
var ErrUnknownProfile = errors.New("proxy: unknown profile")

// DefaultHeartbeat is the heartbeat interval unless WithHeartbeat says
// otherwise.
const DefaultHeartbeat = 10 * time.Second

// Profile is what the releases of one agent send about compaction, and so
// which of its signals the proxy reads (see agents.Profile). The proxy picks
// the profile from the agentInfo (name and version) of the agent's
// initialize answer: it applies only that profile's signals, since a text
// that is a signal in one agent's stream is model prose in another's. An
// agent without a profile gets only the universal rules (the capability
// gate, the settlement of the standard updates it saw start, one terminal
// update per compaction, nothing about compaction outside a turn) and no
// text matching, unless translators are named with WithTranslators.
type Profile = agents.Profile

// Profiles returns every profile, each agent's oldest first.
func Profiles() []Profile { return agents.Profiles() }

// WithProfile fixes the profile instead of picking it from the agent's
// agentInfo: "auto" (the default) picks it, "none" applies the universal
// rules only, any other value is the Name of a profile (ErrUnknownProfile
// from New otherwise).
func WithProfile(name string) Option { return func(c *config) { c.profile = name } }

// WithHeartbeat sets how long a compaction the client sees may stay silent
// before the proxy re-sends its progress: a field-less in_progress
// compaction_update to a capable client, the fallback's own progress form
// (a tool_call_update in_progress, a repeated started marker) to one
// without the capability, so that client watchdogs see life while an agent
// retries a failing summary. The default is DefaultHeartbeat; zero or a
// negative value disables it.
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithSummaryPolicy decides what of a summary the proxy derives from the
// agent's text (Claude ACP's continuation message on session/load) may
// reach the client. The default, emitter.DisplayableOnly, sends none: that
// text was written for the model. Summaries the agent sent as summaries
// pass unchanged.
func WithSummaryPolicy(p emitter.SummaryPolicy) Option {
	return func(c *config) {
		if p != nil {
			c.summaryPolicy = p
		}
	}
}

// chooseProfile picks the connection's profile from the agent's
// initialize result and logs the choice. Callers hold emu.
func (c *conn) chooseProfile(result []byte) {
	cfg := &c.p.cfg
	name, version, _ := agents.AgentInfo(result)
	var p *Profile
	var note string
	switch strings.ToLower(cfg.profile) {
	case "", "auto":
		p, note = agents.Match(name, version)
	case "none":
	default:
		p, _ = agents.ByName(cfg.profile)
		note = "profile set by configuration"
	}
	c.tl = agents.NewSet(p, func(t Translator) bool {
		if on, set := cfg.translators[t]; set {
			return on
		}
		return p != nil && slices.Contains(p.Translators, t)
	})
	var names []string
	for _, d := range c.tl.On() {
		names = append(names, string(d.Name))
	}
	args := []any{"agent", name, "version", version, "translators", strings.Join(names, ",")}
	switch {
	case p != nil:
		args = append(args, "profile", p.Name)
		if note != "" {
			args = append(args, "note", note)
		}
		c.log.Info("agent profile", args...)
	case strings.EqualFold(cfg.profile, "none"):
		c.log.Info("no agent profile (configured): only the universal rules apply", args...)
	default:
		c.log.Info("no profile for this agent: only the universal rules apply (name translators with --translate to read its legacy signals)", args...)
	}
}

// summaryPolicy is the emitter's: a summary the agent sent passes (it is
// started or replayed displayable); one the proxy derived from the agent's
// text goes through WithSummaryPolicy.
func (c *conn) summaryPolicy(info emitter.Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) {
	if info.Displayable {
		return b, true
	}
	return c.p.cfg.summaryPolicy(info, b)
}
