package agents

import (
	"encoding/json"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/jsonedit"
	"github.com/acpcompact/acpcompact/protocol"
)

// opencode: 1.18.33 says nothing about compaction; later releases carry
// the _meta marker of opencode-acp-compaction-pr (described, not
// observed).

// OpencodeMarker: a session_info_update whose _meta carries
// "opencode/compaction" (opencode).
const OpencodeMarker Translator = "opencode-marker"

const (
	opencodeMarkerKey = "opencode/compaction"
	agentOpencode     = "OpenCode"
)

func init() {
	register([]Def{{
		Name: OpencodeMarker, Kinds: []string{"session_info_update"},
		Update: opencodeSignal, Synth: fallback.OpencodeMarker(),
	}},
		Profile{
			Name: "opencode-1.18", Agent: agentOpencode, Range: "< 1.18.34", Seen: []string{"1.18.33"},
			Sends:       "nothing about compaction: the `/compact` summary streams as ordinary agent text with a `messageId`; failures and cancels are invisible; it never reads the capability",
			Gets:        "the universal rules only: there is nothing to translate, and its model text, which carries a `messageId`, is never read as a signal",
			Translators: nil,
		},
		Profile{
			Name: "opencode", Agent: agentOpencode, Range: ">= 1.18.34",
			Sends:       "described, not observed (`opencode-acp-compaction-pr`): standard updates to a capable client; otherwise the `_meta[\"opencode/compaction\"]` marker",
			Gets:        "standard updates instead of the marker; a marker left open settled",
			Translators: []Translator{OpencodeMarker},
		},
	)
}

// opencodeSignal reads the marker, params.update._meta's
// "opencode/compaction".
func opencodeSignal(_ State, u *Update) (Signal, Verdict) {
	if u.Marker == nil {
		return Signal{}, NotMine
	}
	var m struct {
		Status    string `json:"status"`
		MessageID string `json:"messageId"`
		Reason    string `json:"reason"`
		Error     *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(u.Marker, &m) != nil || m.MessageID == "" {
		return Signal{}, NotMine
	}
	sig := Signal{ID: protocol.ID(m.MessageID)}
	switch m.Reason {
	case "auto":
		sig.Trigger = protocol.Auto
	case "manual":
		sig.Trigger = protocol.Manual
	}
	switch m.Status {
	case "started":
		sig.Kind = Start
	case "completed":
		sig.Kind = Completed
	case "failed":
		sig.Kind = Failed
		if m.Error != nil {
			sig.Reason = m.Error.Message
			if m.Error.Type == "aborted" || m.Error.Type == "compaction.interrupted" {
				sig.Kind = Aborted
			}
		}
	default:
		return Signal{}, NotMine
	}
	sig.Rest = withoutMetaKey(u.Msg, opencodeMarkerKey)
	return sig, Found
}

// withoutMetaKey returns msg with key removed from params.update._meta, or
// nil when the update carries nothing else (the peers' marker is an update
// of its own, but the key may ride on a real session_info_update).
func withoutMetaKey(msg []byte, key string) []byte {
	return jsonedit.Update(msg, func(upd map[string]json.RawMessage) bool {
		var meta map[string]json.RawMessage
		if json.Unmarshal(upd["_meta"], &meta) != nil {
			return false
		}
		delete(meta, key)
		if len(meta) == 0 {
			delete(upd, "_meta")
		} else {
			upd["_meta"] = jsonedit.Marshal(meta)
		}
		return len(upd) > 1
	})
}
