package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/semver"

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
// nothing about compaction outside a turn) and no text matching, unless
// translators are named with WithTranslators.
type Profile struct {
	// Name identifies the profile (WithProfile, --profile).
	Name string
	// Agent is the agentInfo.name the profile applies to.
	Agent string
	// Range is the range of agentInfo.version the profile covers, stated
	// once and read once: "all", ">= A", "< B" or ">= A, < B", half-open,
	// compared as semantic versions ("0.78" is 0.78.0, and a pre-release
	// sorts before its release). One agent's profiles cover every version
	// between them, without a gap or an overlap.
	Range string
	// Seen lists the releases whose recorded wire lines (test/peers) it
	// was built from and is replayed against, oldest first; none for one
	// built from release notes only.
	Seen []string
	// Sends says what those releases send about compaction.
	Sends string
	// Gets says what the client gets through the proxy.
	Gets string
	// Translators are the signals the profile reads.
	Translators []Translator

	quirks quirk
}

// quirk is an agent behaviour a profile knows about beyond its signals.
type quirk uint8

const (
	// quirkRawOutput: after the compaction tool call's completed update,
	// one more tool_call_update carries rawOutput {trigger, preTokens,
	// postTokens, durationMs} (Claude ACP 0.75 and later): the completion
	// waits for it, briefly, to carry its facts.
	quirkRawOutput quirk = 1 << iota
	// quirkErrorText: while its compaction tool call is open, a message
	// chunk without a messageId is the provider's error text (codex-acp
	// TypeScript leaves the tool call open on failure and says why in
	// text): a failure the proxy settles carries it.
	quirkErrorText
)

const (
	agentClaude    = "@agentclientprotocol/claude-agent-acp"
	agentClaudeOld = "@zed-industries/claude-code-acp"
	agentCodexTS   = "@agentclientprotocol/codex-acp"
	agentCodexRS   = "codex-acp"
	agentOpencode  = "OpenCode"
	agentQwen      = "qwen-code"
	agentGemini    = "gemini-cli"
	agentKimi      = "Kimi Code CLI"
	agentCopilot   = "Copilot"
)

// profiles lists every profile, each agent's oldest first. The ranges of
// one agent's profiles are contiguous and cover every version.
var profiles = []Profile{
	{
		Name: "claude-acp-text", Agent: agentClaude, Range: "< 0.75", Seen: []string{"0.74.0"},
		Sends: "whatever the capability, `agent_message_chunk` texts without `messageId`: `Compacting...`, then `\\n\\nCompacting completed.` or `\\n\\nCompacting failed: <err>` " +
			"(then the error again, as a chunk with a `messageId`; one exchange is refused: `Compacting failed: Not enough messages to compact.`); " +
			"after a cancelled turn a late `Compacting failed: API Error: Request was aborted.`; no automatic compaction was seen; " +
			"`session/load`: the continuation message (a user message \"This session is being continued from a previous conversation…\")",
		Gets: "one compaction entity per compaction instead of the texts (`cancelled` at the cancelled response, the late text dropped); " +
			"without the capability the texts, settled in their own form if left open, or the `--fallback` form; " +
			"on `session/load`, the continuation as one terminal-first `completed` compaction (capable client)",
		Translators: []Translator{ClaudeText, ClaudeContinuation},
	},
	{
		Name: "claude-acp-toolcall", Agent: agentClaude, Range: ">= 0.75, < 0.78", Seen: []string{"0.75.0"},
		Sends: "whatever the capability, the `Compact conversation` tool call (`in_progress`; `completed`, then a `tool_call_update` with `rawOutput {trigger, preTokens, postTokens, durationMs}`; " +
			"`failed` with \"Compaction failed: <err>\", also for one exchange: \"Not enough messages to compact.\"), each line with `_meta.contextCompaction`; " +
			"on cancel it stays `in_progress` past the `cancelled` response, then a late `failed` update of the same ID; no automatic compaction was seen; " +
			"`session/load`: the continuation message",
		Gets: "standard updates instead of the tool call, trigger, tokens and duration in the record (`_meta[\"acpcompact/record\"]`); " +
			"a cancel `cancelled` at the response, the late update dropped; without the capability the tool call, settled at the response if left open; " +
			"on `session/load`, the continuation as one `completed` compaction (capable client)",
		Translators: []Translator{ToolCall, ClaudeContinuation},
		quirks:      quirkRawOutput,
	},
	{
		Name: "claude-acp-replay", Agent: agentClaude, Range: ">= 0.78, < 0.97", Seen: []string{"0.78.0", "0.80.0", "0.88.0"},
		Sends: "capable client: `compaction_update` `in_progress`, `completed` with the summary, then a second `completed` " +
			"(0.78–0.87: with trigger and tokens in `_meta.contextCompaction`; 0.88: field-less); on cancel 0.78–0.79 leave it `in_progress` and send `failed` after the turn, 0.80 and later `cancelled`. " +
			"Otherwise: the tool call, as 0.75; after a cancelled turn a late failed update (0.78–0.79: of the same ID; 0.80 and later: a new tool call with another ID). " +
			"`session/load`: to a capable client its own `compaction_update` `completed` with the summary, terminal-first; otherwise the continuation message. " +
			"Automatic compaction was seen from 0.88 only",
		Gets: "exactly one terminal update per compaction (the second `completed` dropped, and with it 0.78–0.87's trigger and tokens: the first already went out); " +
			"a cancel `cancelled` before the response, the late update dropped; without the capability the tool call, settled at the response if left open, trigger, tokens and duration in the record under `--fallback`; " +
			"on `session/load`, its own replayed compaction with its summary (capable client), the continuation message unchanged otherwise",
		Translators: []Translator{ToolCall, ClaudeContinuation},
		quirks:      quirkRawOutput,
	},
	{
		Name: "claude-acp", Agent: agentClaude, Range: ">= 0.97", Seen: []string{"0.97.0", "0.100.0", "0.101.0"},
		Sends: "capable client: `compaction_update` `in_progress`, `completed` with the summary, then a second, field-less `completed`; `failed` with the provider's error (181 s of silence first, with default retries); `cancelled` on cancel. " +
			"Otherwise: the `Compact conversation` tool call, `completed`, then a `tool_call_update` with `rawOutput {trigger, preTokens, postTokens, durationMs}`; " +
			"left `in_progress` on cancel, and a terminal-first failed tool call with another ID after the cancelled turn. " +
			"`session/load` replays no compaction, only the continuation message, a user message \"This session is being continued…\" with the summary, model-facing instructions and the transcript's path",
		Gets: "exactly one terminal update per compaction; trigger, tokens and duration in the record (`_meta[\"acpcompact/record\"]`); the cancelled tool call settled before the response and the late one dropped; heartbeats during the silent retries; " +
			"on `session/load`, the continuation as one terminal-first `completed` compaction at its position for a capable client (no summary unless `--summaries=all`, never the framing), the message unchanged for a client without the capability",
		Translators: []Translator{ToolCall, ClaudeContinuation},
		quirks:      quirkRawOutput,
	},
	{
		Name: "claude-code-acp", Agent: agentClaudeOld, Range: "all", Seen: []string{"0.16.2"},
		Sends: "nothing about compaction live, for a manual, failed, cancelled or automatic one, whatever the capability. " +
			"`session/load` replays, as `user_message_chunk`s without `messageId`, the continuation message, then `<local-command-caveat>…`, the `/compact` command and its result: " +
			"`<local-command-stdout>Compacted …</local-command-stdout>`, or for a failed or cancelled one `<local-command-stderr>Error: …</local-command-stderr>` (`Error during compaction: …`, `Compaction canceled.`)",
		Gets: "live, the universal rules only: the wire says nothing to translate; on `session/load`, for a capable client, one terminal-first compaction per compaction in place of the continuation and the results: " +
			"`completed` (the `Compacted` result folded into the continuation before it), `failed` with the error, or `cancelled`; the caveat and the command stay; a client without the capability gets the lines unchanged",
		Translators: []Translator{ClaudeContinuation, ClaudeLocalCommand},
	},
	{
		Name: "codex-acp", Agent: agentCodexTS, Range: "all", Seen: []string{"2.0.0", "2.4.0", "2.6.0"},
		Sends: "capable client: `compaction_update` `in_progress` then `completed` (never a summary), `failed` with the provider's error, `cancelled`; replays completed ones terminal-first (not failed or cancelled ones). " +
			"Otherwise: the `Compact conversation` tool call, left `in_progress` on failure, cancel or a dropped stream; the error as a message chunk. " +
			"2.0.0 also sends \"Warning: Heads up: Long threads and multiple compactions…\" after every completed compaction",
		Gets:        "standard updates instead of the tool call; the tool call settled (failed with the provider's own error text, or cancelled) before the turn ends; the warning as it came",
		Translators: []Translator{ToolCall},
		quirks:      quirkErrorText,
	},
	{
		Name: "codex-acp-rs", Agent: agentCodexRS, Range: "all", Seen: []string{"0.14.0", "0.16.0"},
		Sends:       "ignores the capability; after the fact, `agent_message_chunk` `Context compacted\\n` then \"Heads up: Long threads and multiple compactions…\"; nothing on failure (a prompt error), cancel or replay",
		Gets:        "a completed compaction in place of the `Context compacted` text (the warning kept); the same reply from the model, not followed by the warning, stays prose; failures, cancels and replays stay invisible: the wire says nothing of them",
		Translators: []Translator{CodexText},
	},
	{
		Name: "opencode-1.18", Agent: agentOpencode, Range: "< 1.18.34", Seen: []string{"1.18.33"},
		Sends:       "nothing about compaction: the `/compact` summary streams as ordinary agent text with a `messageId`; failures and cancels are invisible; it never reads the capability",
		Gets:        "the universal rules only: there is nothing to translate, and its model text, which carries a `messageId`, is never read as a signal",
		Translators: nil,
	},
	{
		Name: "opencode", Agent: agentOpencode, Range: ">= 1.18.34",
		Sends:       "described, not observed (`opencode-acp-compaction-pr`): standard updates to a capable client; otherwise the `_meta[\"opencode/compaction\"]` marker",
		Gets:        "standard updates instead of the marker; a marker left open settled",
		Translators: []Translator{OpencodeMarker},
	},
	{
		Name: "qwen-code-0.24.0", Agent: agentQwen, Range: "< 0.24.2", Seen: []string{"0.23.4", "0.24.0"},
		Sends: "ignores the capability; `/compress`: `agent_message_chunk` `Compressing context...`, then `Context compressed (N -> ~M).`, marked only by `_meta.source: \"slash_command\"` (no `_meta.contextCompression`); " +
			"on failure no closing update, a prompt error with `data.details`; a cancel is ignored; automatic: \"IMPORTANT: This conversation approached the input token limit…\" after the fact; " +
			"`session/load` replays a completed `/compress` as one chunk `Compressing context...  \\nContext compressed (N -> ~M).` with `_meta.qwenTranscript`",
		Gets: "as 0.24.2: one compaction entity per compression, its token counts in the record; `failed` with the error's details (a failed automatic one too); " +
			"replayed terminal-first with an ID stable across loads; the model's prose, which never carries `_meta.source`, stays prose",
		Translators: []Translator{QwenText, Qwen},
	},
	{
		Name: "qwen-code", Agent: agentQwen, Range: ">= 0.24.2", Seen: []string{"0.24.2", "0.24.4"},
		Sends: "ignores the capability; `/compress`: `agent_message_chunk` `Compressing context...` with `_meta.contextCompression.phase` `progress`, then `done` (token counts) or `noop`; " +
			"on failure no closing update, a prompt error with `data.details`; automatic: \"IMPORTANT: This conversation approached the input token limit…\" after the fact; " +
			"`session/load` replays completed manual ones (`done` with `_meta.qwenTranscript`)",
		Gets:        "one compaction entity per compression, its token counts in the record; `failed` with the error's details (a failed automatic one too); replayed terminal-first with an ID stable across loads",
		Translators: []Translator{Qwen},
	},
	{
		Name: "gemini-cli", Agent: agentGemini, Range: "all", Seen: []string{"0.61.0"},
		Sends:       "nothing about compression: automatic compression is silent (not even a `usage_update`); no manual command in ACP mode; a failure surfaces only as a prompt error",
		Gets:        "the universal rules only: the wire says nothing to translate",
		Translators: nil,
	},
	{
		Name: "kimi-code", Agent: agentKimi, Range: "all", Seen: []string{"2.1.0"},
		Sends: "ignores the capability; every form an `agent_message_chunk` without `messageId`. `/compact`: \"Context compaction started — it runs in the background…\", `end_turn`, " +
			"then **after the turn** \"Compaction completed.\\n- Messages compacted: N\\n- Tokens before: A\\n- Tokens after: B\", or, for a failure, \"Compaction cancelled.\" (no error text); a cancel between turns changes nothing. " +
			"Automatic, inside the turn: \"Compacting conversation context…\", \"Compaction is blocked by the current turn; retry when the turn is idle.\", then the outcome (a failed one ends the turn with no reply). " +
			"`session/load`: the user's prompts, the last summary as a user message \"The conversation so far has been compacted…\" and a `<system-reminder>`",
		Gets: "a `/compact` compaction runs in the background: the client sees it once it settled, terminal-first, when the session's next turn begins (or in the turn running then), " +
			"tokens and messages compacted in the record; the started text stays, the only word in its turn that one runs; an automatic one `in_progress`, then its outcome; " +
			"\"Compaction cancelled.\" is `cancelled` only after a user cancel, otherwise `failed` (Kimi Code reports a failure so); " +
			"on `session/load`, the summary as one terminal-first `completed` compaction, its text and the reminder left out (capable client); " +
			"the texts are read only in a `/compact` turn or after Kimi's own start, so the same text from the model stays prose",
		Translators: []Translator{Kimi},
	},
	{
		Name: "copilot-cli", Agent: agentCopilot, Range: "all", Seen: []string{"1.0.102"},
		Sends: "ignores the capability; only `/compact`'s result, after the fact, as `agent_message_chunk` without `messageId`: \"Compacted conversation history and removed N message(s) and M tokens.\" or " +
			"\"Failed to run /compact: Error: <err>\" (also \"…Error: Nothing to compact.\"); a cancelled `/compact` says nothing; " +
			"automatic compaction (in the background) sends nothing, and in the recordings did not even lower `usage_update.used`; `session/load` replays the history with no trace of a compaction",
		Gets: "in a `/compact` turn, an after-the-fact `completed` compaction (the messages removed in the record's `source.count`; the tokens removed have no record key) or a `failed` one with Copilot's error text, in place of the text; " +
			"\"Nothing to compact.\" stays text: nothing ran; cancelled and automatic compactions, and compactions on `session/load`, stay invisible: the wire says nothing of them",
		Translators: []Translator{Copilot},
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
	var mine []int
	for i := range profiles {
		if profiles[i].Agent == name {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 {
		for i := range profiles {
			if strings.EqualFold(profiles[i].Agent, name) {
				mine = append(mine, i)
			}
		}
	}
	if len(mine) == 0 {
		return nil, ""
	}
	newest := mine[len(mine)-1]
	v, ok := canonicalVersion(version)
	if !ok {
		return &profiles[newest], fmt.Sprintf("version %q is not a semantic version; using the newest profile", version)
	}
	for _, i := range mine {
		if !profileRanges[i].covers(v) {
			continue
		}
		if seen := profiles[i].Seen; i == newest && len(seen) > 0 {
			if last, _ := canonicalVersion(seen[len(seen)-1]); semver.Compare(v, last) > 0 {
				note = fmt.Sprintf("release %s is newer than the last one observed (%s); using the newest profile", version, seen[len(seen)-1])
			}
		}
		return &profiles[i], note
	}
	return &profiles[newest], fmt.Sprintf("release %s is outside every profile's range; using the newest profile", version)
}

// versionRange is a Profile's Range, read: min <= v < below, in
// golang.org/x/mod/semver's canonical form ("v0.78.0"); "" is unbounded.
type versionRange struct{ min, below string }

func (r versionRange) covers(v string) bool {
	return (r.min == "" || semver.Compare(v, r.min) >= 0) && (r.below == "" || semver.Compare(v, r.below) < 0)
}

// profileRanges are the profiles' ranges, read once.
var profileRanges = func() []versionRange {
	out := make([]versionRange, len(profiles))
	for i, p := range profiles {
		r, err := parseRange(p.Range)
		if err != nil {
			panic(fmt.Sprintf("proxy: profile %s: %v", p.Name, err))
		}
		out[i] = r
	}
	return out
}()

// parseRange reads a Profile's Range: "all", ">= A", "< B" or
// ">= A, < B".
func parseRange(s string) (versionRange, error) {
	var r versionRange
	if strings.TrimSpace(s) == "all" {
		return r, nil
	}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		op, ver, _ := strings.Cut(part, " ")
		v, ok := canonicalVersion(ver)
		switch {
		case !ok:
			return r, fmt.Errorf("range %q: %q is not a version", s, ver)
		case op == ">=" && i == 0:
			r.min = v
		case op == "<" && r.below == "":
			r.below = v
		default:
			return r, fmt.Errorf("range %q: want \"all\", \">= A\", \"< B\" or \">= A, < B\"", s)
		}
	}
	if r.min != "" && r.below != "" && semver.Compare(r.min, r.below) >= 0 {
		return r, fmt.Errorf("range %q is empty", s)
	}
	return r, nil
}

// canonicalVersion reads a release version ("0.101.0", "v1.2",
// "0.24.0-beta.1+build") as golang.org/x/mod/semver does, which needs the
// "v" that agentInfo versions leave out; missing components are zero.
func canonicalVersion(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "v") {
		s = "v" + s
	}
	if !semver.IsValid(s) {
		return "", false
	}
	return semver.Canonical(s), true
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
