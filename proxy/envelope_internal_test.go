package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
			assert.True(t, maySpell(msg), "maySpell missed %s", msg)
			if kind != "state_update" {
				assert.True(t, mayCarryCompaction(msg), "mayCarryCompaction missed %s", msg)
			}
		}
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\\u0063 \n state compaction"}}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`,
	} {
		assert.False(t, maySpell([]byte(msg)), "maySpell says %s may spell a kind", msg)
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
		assert.Equal(t, want, slashCommand([]byte(prompt)), "slashCommand(%s)", prompt)
	}
}

// Defect: the proxy read a prompt's slash command only when the prompt's
// JSON was at most 4 KiB, so a Kimi Code /compact with a selection attached
// beside it ran no compaction. The command is read from the prompt's first
// text block however large the prompt is, and the blocks after it, or the
// rest of its text, are never decoded.
func TestSlashCommandOfALongPrompt(t *testing.T) {
	block := strings.Repeat(`x\"\\\u00e9 `, 2000)
	for prompt, want := range map[string]string{
		`[{"type":"text","text":"/compact"},{"type":"resource","resource":{"uri":"file:///a.go","text":"` + block + `"}}]`: "compact",
		`[{"type":"text","text":"/compact ` + block + `"}]`:                                                                "compact",
		`[{"type":"image","data":"` + block + `"},{"type":"text","text":"/compress now"}]`:                                 "compress",
		`[{"type":"text","text":"` + block + ` /compact"}]`:                                                                "",
		`[{"type":"text","text":"/` + strings.Repeat("a", maxCommandName+1) + `"}]`:                                        "",
	} {
		assert.Equal(t, want, slashCommand([]byte(prompt)), "slashCommand of a %d-byte prompt", len(prompt))
	}
}
