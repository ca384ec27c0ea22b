package agents

// Agents that say nothing about compaction over ACP: their profiles record
// that, so the proxy's table lists them and what their clients get.

func init() {
	const (
		sends = "nothing about compaction, whatever the capability: `/compact` is an ordinary prompt to the model, and a turn reporting a nearly full context changes nothing on the wire"
		gets  = "the universal rules only: the wire says nothing to translate, and every line passes byte for byte"
	)
	register(nil,
		Profile{Name: "auggie", Agent: "auggie", Range: "all", Seen: []string{"0.36.0"}, Sends: sends, Gets: gets},
		Profile{Name: "cline", Agent: "cline", Range: "all", Seen: []string{"3.0.65"}, Sends: sends, Gets: gets},
		Profile{
			Name: "cursor-agent-acp", Agent: "cursor-agent-acp", Range: "all", Seen: []string{"0.7.1"},
			Sends: "nothing about compaction: the adapter has no compaction code (it drives the `cursor-agent` binary, which needs Cursor's own login and did not run offline: only `initialize` and `session/new` were recorded)",
			Gets:  gets,
		},
	)
}
