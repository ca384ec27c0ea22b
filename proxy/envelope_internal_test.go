package proxy

import (
	"fmt"
	"testing"
)

// maySpell finds every spelling of the kinds it stands guard for: as is,
// and with any one of their characters escaped; an ordinary line is not
// read twice.
func TestMaySpellFindsEverySpellingOfTheKinds(t *testing.T) {
	for _, kind := range []string{"compaction_update", "compaction_summary_chunk", "state_update"} {
		for i := -1; i < len(kind); i++ {
			s := kind
			if i >= 0 {
				s = kind[:i] + fmt.Sprintf(`\u%04x`, kind[i]) + kind[i+1:]
			}
			msg := []byte(`{"params":{"update":{"sessionUpdate":"` + s + `"}}}`)
			if !maySpell(msg) {
				t.Errorf("maySpell missed %s", msg)
			}
			if kind != "state_update" && !mayCarryCompaction(msg) {
				t.Errorf("mayCarryCompaction missed %s", msg)
			}
		}
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\\u0063 \n state compaction"}}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`,
	} {
		if maySpell([]byte(msg)) {
			t.Errorf("maySpell says %s may spell a kind", msg)
		}
	}
}

// A prompt's slash command is the name after the "/" that begins its first
// text block, however the JSON spells it; anything else runs none.
func TestSlashCommand(t *testing.T) {
	for prompt, want := range map[string]string{
		`[{"type":"text","text":"/compact"}]`:                                "compact",
		`[{"type":"text","text":"  /compact keep the tests\nand more"}]`:     "compact",
		`[{"type":"text","text":"\/compact"}]`:                               "compact",
		`[{"type":"text","text":"\u002fcompress"}]`:                          "compress",
		`[{"type":"image","data":"x"},{"type":"text","text":"/compact"}]`:    "compact",
		`[{"type":"text","text":"please /compact"}]`:                         "",
		`[{"type":"text","text":"go on"},{"type":"text","text":"/compact"}]`: "",
		`[{"type":"text","text":"/"}]`:                                       "",
		`[{"type":"text","text":"/compact"`:                                  "",
		`"/compact"`:                                                         "",
		``:                                                                   "",
	} {
		if got := slashCommand([]byte(prompt)); got != want {
			t.Errorf("slashCommand(%s) = %q, want %q", prompt, got, want)
		}
	}
	long := `[{"type":"text","text":"/compact ` + string(make([]byte, maxCommandPrompt)) + `"}]`
	if got := slashCommand([]byte(long)); got != "" {
		t.Errorf("a prompt longer than %d bytes was read: %q", maxCommandPrompt, got)
	}
}
