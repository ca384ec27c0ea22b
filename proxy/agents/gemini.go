package agents

// Gemini CLI says nothing about compaction over ACP: its profile records
// that, so the proxy's table lists it.

func init() {
	register(nil, Profile{
		Name: "gemini-cli", Agent: "gemini-cli", Range: "all", Seen: []string{"0.61.0"},
		Sends:       "nothing about compression: automatic compression is silent (not even a `usage_update`); no manual command in ACP mode; a failure surfaces only as a prompt error",
		Gets:        "the universal rules only: the wire says nothing to translate",
		Translators: nil,
	})
}
