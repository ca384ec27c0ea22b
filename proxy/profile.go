package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// ErrUnknownProfile: a profile name that Profiles does not list (nor
// "auto" or "none").
var ErrUnknownProfile = errors.New("proxy: unknown profile")

// DefaultHeartbeat is the heartbeat interval unless WithHeartbeat says
// otherwise.
const DefaultHeartbeat = 10 * time.Second

// Profile is what the releases of one agent send about compaction, and so
// which of its signals the proxy reads. The proxy picks the profile from
// the agentInfo (name and version) of the agent's initialize answer: it
// applies only that profile's signals, since a text that is a signal in one
// agent's stream is model prose in another's. An agent without a profile
// gets only the universal rules (the capability gate, the settlement of
// the standard updates it saw start, one terminal update per compaction,
// nothing about compaction after the turn) and no text matching, unless
// translators are named with WithTranslators.
type Profile struct {
	// Name identifies the profile (WithProfile, --profile).
	Name string
	// Agent is the agentInfo.name the profile applies to.
	Agent string
	// Versions is the range of agentInfo.version it covers.
	Versions string
	// Seen names the releases whose wire lines it was built from; "" for
	// one built from release notes only.
	Seen string
	// Sends says what those releases send about compaction.
	Sends string
	// Gets says what the client gets through the proxy.
	Gets string
	// Translators are the signals the profile reads.
	Translators []Translator

	min, below semver // min <= version < below; zero: unbounded
	quirks     quirk
}

// quirk is an agent behaviour a profile knows about beyond its signals.
type quirk uint8

const (
	// quirkRawOutput: after the compaction tool call's completed update,
	// one more tool_call_update carries rawOutput {trigger, preTokens,
	// postTokens, durationMs} (Claude ACP 0.101): the completion waits for
	// it, briefly, to carry its facts.
	quirkRawOutput quirk = 1 << iota
	// quirkErrorText: while its compaction tool call is open, a message
	// chunk without a messageId is the provider's error text (codex-acp
	// TypeScript leaves the tool call open on failure and says why in
	// text): a failure the proxy settles carries it.
	quirkErrorText
)

const (
	agentClaude   = "@agentclientprotocol/claude-agent-acp"
	agentCodexTS  = "@agentclientprotocol/codex-acp"
	agentCodexRS  = "codex-acp"
	agentOpencode = "OpenCode"
	agentQwen     = "qwen-code"
	agentGemini   = "gemini-cli"
)

// profiles lists every profile, each agent's oldest first. The ranges of
// one agent's profiles are contiguous and cover every version.
var profiles = []Profile{
	{
		Name: "claude-acp-text", Agent: agentClaude, Versions: "<= 0.74",
		Sends: "agent_message_chunk texts: \"Compacting...\", then \"\\n\\nCompacting completed.\" or \"\\n\\nCompacting failed: <err>\"",
		Gets:  "one compaction entity per compaction instead of the texts; a fallback form without the capability",
		// Recorded from 0.74.0: it also sends the continuation message on
		// session/load, as 0.101 does.
		Translators: []Translator{ClaudeText, ClaudeContinuation},
		below:       semver{0, 75, 0, ""}, Seen: "0.74.0",
	},
	{
		Name: "claude-acp-toolcall", Agent: agentClaude, Versions: "0.75 - 0.100",
		Sends: "a \"Compact conversation\" tool call, left in_progress on cancel; standard updates to a capable client (0.78+)",
		Gets:  "standard updates instead of the tool call; the tool call settled when the agent leaves it open",
		// Recorded from 0.100.0: on the wire as 0.101 (the rawOutput update,
		// the continuation message on session/load).
		Translators: []Translator{ToolCall, ClaudeContinuation},
		min:         semver{0, 75, 0, ""}, below: semver{0, 101, 0, ""}, Seen: "0.100.0",
		quirks: quirkRawOutput,
	},
	{
		Name: "claude-acp", Agent: agentClaude, Versions: ">= 0.101", Seen: "0.101.0",
		Sends: "capable client: compaction_update in_progress, completed with summary, then a second field-less completed; failed with the provider's error; cancelled on cancel. " +
			"Otherwise: the \"Compact conversation\" tool call, completed, then a tool_call_update with rawOutput {trigger, preTokens, postTokens, durationMs}; left in_progress on cancel, and a terminal-first failed tool call after the cancelled turn. " +
			"session/load replays no compaction, only the \"This session is being continued…\" user message with the summary and model-facing instructions",
		Gets: "exactly one terminal update per compaction; trigger, tokens and duration in the record (_meta[\"acpcompact/record\"]); the cancelled tool call settled before the response and the late one dropped; " +
			"on session/load, the continuation message as one completed compaction (capable client; summary only with --summaries=all); heartbeats during its silent retries",
		Translators: []Translator{ToolCall, ClaudeContinuation},
		min:         semver{0, 101, 0, ""},
		quirks:      quirkRawOutput,
	},
	{
		Name: "codex-acp", Agent: agentCodexTS, Versions: "all", Seen: "2.6.0",
		Sends: "capable client: compaction_update in_progress then completed (never a summary), failed with the provider's error, cancelled; replays completed ones terminal-first. " +
			"Otherwise: the \"Compact conversation\" tool call, left in_progress on failure, cancel or a dropped stream; the error as a message chunk",
		Gets:        "standard updates instead of the tool call; the tool call settled (failed with the provider's error text, or cancelled) before the turn ends",
		Translators: []Translator{ToolCall},
		quirks:      quirkErrorText,
	},
	{
		Name: "codex-acp-rs", Agent: agentCodexRS, Versions: "all", Seen: "0.16.0",
		Sends:       "ignores the capability; after the fact, agent_message_chunk \"Context compacted\\n\" then \"Heads up: Long threads and multiple compactions…\"; nothing on failure (a prompt error), cancel or replay",
		Gets:        "a completed compaction in place of the \"Context compacted\" text (the warning kept); the same reply from the model stays prose",
		Translators: []Translator{CodexText},
	},
	{
		Name: "opencode-1.18", Agent: agentOpencode, Versions: "<= 1.18.33", Seen: "1.18.33",
		Sends:       "nothing about compaction: the /compact summary streams as ordinary agent text, failures and cancels are invisible",
		Gets:        "the universal rules only; its model text, which carries a messageId, is never read as a signal",
		Translators: nil,
		below:       semver{1, 18, 34, ""},
	},
	{
		Name: "opencode", Agent: agentOpencode, Versions: "> 1.18.33",
		Sends:       "standard updates to a capable client; otherwise the _meta[\"opencode/compaction\"] marker (opencode-acp-compaction-pr)",
		Gets:        "standard updates instead of the marker; a marker left open settled",
		Translators: []Translator{OpencodeMarker},
		min:         semver{1, 18, 34, ""},
	},
	{
		Name: "qwen-code", Agent: agentQwen, Versions: "all", Seen: "0.24.4",
		Sends: "ignores the capability; /compress: agent_message_chunk \"Compressing context...\" with _meta.contextCompression.phase \"progress\", then \"done\" (token counts) or \"noop\"; " +
			"on failure no closing update, a prompt error with data.details; automatic: \"IMPORTANT: This conversation approached the input token limit…\" after the fact; session/load replays completed manual ones (phase \"done\" with _meta.qwenTranscript)",
		Gets:        "one compaction entity per compression with its token counts in the record; failed with the error's details; automatic ones too",
		Translators: []Translator{Qwen},
	},
	{
		Name: "gemini-cli", Agent: agentGemini, Versions: "all", Seen: "0.61.0",
		Sends:       "nothing about compression (automatic compression is silent; failures surface only as a prompt error)",
		Gets:        "the universal rules only",
		Translators: nil,
	},
}

// Profiles returns every profile, each agent's oldest first.
func Profiles() []Profile {
	out := make([]Profile, len(profiles))
	copy(out, profiles)
	return out
}

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

// profileByName finds a profile by its Name.
func profileByName(name string) (*Profile, bool) {
	for i := range profiles {
		if strings.EqualFold(profiles[i].Name, name) {
			return &profiles[i], true
		}
	}
	return nil, false
}

// agentInfo reads the agent's name and version from its initialize result:
// agentInfo in v1, info in v2.
func agentInfo(result []byte) (name, version string, ok bool) {
	var r struct {
		AgentInfo *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
		Info *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"info"`
	}
	if len(result) == 0 || json.Unmarshal(result, &r) != nil {
		return "", "", false
	}
	switch {
	case r.AgentInfo != nil:
		return r.AgentInfo.Name, r.AgentInfo.Version, true
	case r.Info != nil:
		return r.Info.Name, r.Info.Version, true
	}
	return "", "", false
}

// matchProfile picks the profile of an agent from its agentInfo. note
// says how, for the log, when the choice was not an exact fit: a release
// newer than the last one observed gets its agent's newest profile.
func matchProfile(name, version string) (p *Profile, note string) {
	var mine []*Profile
	for i := range profiles {
		if profiles[i].Agent == name {
			mine = append(mine, &profiles[i])
		}
	}
	if len(mine) == 0 {
		for i := range profiles {
			if strings.EqualFold(profiles[i].Agent, name) {
				mine = append(mine, &profiles[i])
			}
		}
	}
	if len(mine) == 0 {
		return nil, ""
	}
	newest := mine[len(mine)-1]
	v, ok := parseSemver(version)
	if !ok {
		return newest, fmt.Sprintf("version %q is not a semantic version; using the newest profile", version)
	}
	for _, c := range mine {
		if c.covers(v) {
			if c == newest && c.Seen != "" {
				if seen, _ := parseSemver(c.Seen); v.compare(seen) > 0 {
					note = fmt.Sprintf("release %s is newer than the last one observed (%s); using the newest profile", version, c.Seen)
				}
			}
			return c, note
		}
	}
	return newest, fmt.Sprintf("release %s is outside every profile's range; using the newest profile", version)
}

func (p *Profile) covers(v semver) bool {
	if !p.min.zero() && v.compare(p.min) < 0 {
		return false
	}
	return p.below.zero() || v.compare(p.below) < 0
}

// semver is a release version: major.minor.patch and an optional
// pre-release tag (which sorts before the release itself).
type semver struct {
	major, minor, patch int
	pre                 string
}

func (v semver) zero() bool { return v == semver{} }

// parseSemver reads "1.2.3", "v1.2", "1.2.3-beta.1+build"; missing
// components are zero.
func parseSemver(s string) (semver, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	var v semver
	if i := strings.IndexByte(s, '-'); i >= 0 {
		s, v.pre = s[:i], s[i+1:]
	}
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 3 {
		return semver{}, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return semver{}, false
		}
		switch i {
		case 0:
			v.major = n
		case 1:
			v.minor = n
		case 2:
			v.patch = n
		}
	}
	return v, true
}

// compare returns -1, 0 or 1 as v sorts before, with or after w.
func (v semver) compare(w semver) int {
	for _, d := range [...]int{v.major - w.major, v.minor - w.minor, v.patch - w.patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	switch {
	case v.pre == w.pre:
		return 0
	case v.pre == "":
		return 1
	case w.pre == "":
		return -1
	}
	return comparePre(v.pre, w.pre)
}

// comparePre orders pre-release tags by their dot-separated identifiers,
// numeric ones numerically, as semver does.
func comparePre(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, xerr := strconv.Atoi(as[i])
		y, yerr := strconv.Atoi(bs[i])
		switch {
		case xerr == nil && yerr == nil:
			if x != y {
				if x < y {
					return -1
				}
				return 1
			}
		case xerr == nil:
			return -1
		case yerr == nil:
			return 1
		default:
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
		}
	}
	switch {
	case len(as) < len(bs):
		return -1
	case len(as) > len(bs):
		return 1
	}
	return 0
}

func profileList() string {
	names := make([]string, 0, len(profiles))
	for _, p := range profiles {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// chooseProfile picks the connection's profile from the agent's
// initialize result and logs the choice. Callers hold emu.
func (c *conn) chooseProfile(result []byte) {
	cfg := &c.p.cfg
	name, version, _ := agentInfo(result)
	var p *Profile
	var note string
	switch strings.ToLower(cfg.profile) {
	case "", "auto":
		p, note = matchProfile(name, version)
	case "none":
	default:
		p, _ = profileByName(cfg.profile)
		note = "profile set by configuration"
	}
	var on trSet
	if p != nil {
		for _, t := range p.Translators {
			on |= trBit(t)
		}
	}
	for t, enabled := range cfg.translators {
		if enabled {
			on |= trBit(t)
		} else {
			on &^= trBit(t)
		}
	}
	c.tl = newTranslation(p, on)
	var names []string
	for _, t := range Translators() {
		if on.has(t) {
			names = append(names, string(t))
		}
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
