package agents

import (
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/mod/semver"
)

// Profile is what the releases of one agent send about compaction, and so
// which of its signals the proxy reads. The proxy picks the profile from
// the agentInfo (name and version) of the agent's initialize answer (see
// Match): it applies only that profile's signals, since a text that is a
// signal in one agent's stream is model prose in another's. An agent
// without a profile gets only the proxy's universal rules.
type Profile struct {
	// Name identifies the profile (the proxy's WithProfile, --profile).
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
	// Quirks are the agent's behaviours the proxy knows about beyond its
	// signals.
	Quirks Quirk

	r versionRange
}

// Quirk is an agent behaviour a profile knows about beyond its signals.
type Quirk uint8

const (
	// RawOutputFollows: after the compaction tool call's completed update,
	// one more tool_call_update carries rawOutput {trigger, preTokens,
	// postTokens, durationMs} (Claude ACP 0.75 and later): the completion
	// waits for it, briefly, to carry its facts.
	RawOutputFollows Quirk = 1 << iota
	// ErrorText: while its compaction tool call is open, a message chunk
	// without a messageId is the provider's error text (codex-acp
	// TypeScript leaves the tool call open on failure and says why in
	// text): a failure the proxy settles then carries it.
	ErrorText
	// ProseAfterEmptyChunk: the model's text always begins with an empty
	// agent_message_chunk, and the agent's own text forms never follow
	// one (the @zed-industries/claude-agent-acp releases): a text form
	// right after an empty chunk of its session is the model's prose.
	ProseAfterEmptyChunk
)

// Profiles returns every profile, each agent's oldest first.
func Profiles() []Profile { return append([]Profile(nil), registry.profiles...) }

// ByName finds a profile by its Name, ignoring case.
func ByName(name string) (*Profile, bool) {
	for i := range registry.profiles {
		if strings.EqualFold(registry.profiles[i].Name, name) {
			return &registry.profiles[i], true
		}
	}
	return nil, false
}

// Names lists the profiles' names, comma-separated, for messages.
func Names() string {
	names := make([]string, 0, len(registry.profiles))
	for _, p := range registry.profiles {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// AgentInfo reads the agent's name and version from its initialize
// result: agentInfo in v1, info in v2.
func AgentInfo(result []byte) (name, version string, ok bool) {
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

// Match picks the profile of an agent from its agentInfo; nil for an agent
// no profile names. note says how, for the log, when the choice was not an
// exact fit: a release newer than the last one observed, or outside every
// range, gets its agent's newest profile.
func Match(name, version string) (p *Profile, note string) {
	var mine []int
	for i := range registry.profiles {
		if registry.profiles[i].Agent == name {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 {
		for i := range registry.profiles {
			if strings.EqualFold(registry.profiles[i].Agent, name) {
				mine = append(mine, i)
			}
		}
	}
	if len(mine) == 0 {
		return nil, ""
	}
	newest := &registry.profiles[mine[len(mine)-1]]
	v, ok := canonicalVersion(version)
	if !ok {
		return newest, fmt.Sprintf("version %q is not a semantic version; using the newest profile", version)
	}
	for _, i := range mine {
		p := &registry.profiles[i]
		if !p.r.covers(v) {
			continue
		}
		if seen := p.Seen; p == newest && len(seen) > 0 {
			if last, _ := canonicalVersion(seen[len(seen)-1]); semver.Compare(v, last) > 0 {
				note = fmt.Sprintf("release %s is newer than the last one observed (%s); using the newest profile", version, seen[len(seen)-1])
			}
		}
		return p, note
	}
	return newest, fmt.Sprintf("release %s is outside every profile's range; using the newest profile", version)
}

// versionRange is a Profile's Range, read: min <= v < below, in
// golang.org/x/mod/semver's canonical form ("v0.78.0"); "" is unbounded.
type versionRange struct{ min, below string }

func (r versionRange) covers(v string) bool {
	return (r.min == "" || semver.Compare(v, r.min) >= 0) && (r.below == "" || semver.Compare(v, r.below) < 0)
}

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
