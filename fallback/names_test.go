package fallback_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

func TestByNameBuildsEveryListedRenderer(t *testing.T) {
	want := map[string][]string{
		"text":            {"agent_message_chunk"},
		"marker":          {"session_info_update"},
		"opencode-marker": {"session_info_update"},
		"toolcall":        {"tool_call"},
		"none":            {},
	}
	require.ElementsMatch(t, []string{"text", "marker", "opencode-marker", "toolcall", "none"}, fallback.Names())
	for _, name := range fallback.Names() {
		r, err := fallback.ByName(name)
		require.NoError(t, err, name)
		require.Equal(t, want[name], kinds(renderEvents(t, r, started("cmp_1", protocol.Auto))), name)
	}
	r, err := fallback.ByName("opencode-marker")
	require.NoError(t, err)
	require.Len(t, markers(renderEvents(t, r, started("cmp_1", protocol.Auto)), fallback.OpencodeMarkerKey), 1)
}

func TestByNameIsForgivingAboutCaseAndComposesLists(t *testing.T) {
	r, err := fallback.ByName(" Marker , TEXT ")
	require.NoError(t, err)
	require.Equal(t, []string{"session_info_update", "agent_message_chunk"}, kinds(renderEvents(t, r, started("cmp_1", protocol.Auto))))
}

func TestByNameRejectsUnknownNamesWithTheSentinel(t *testing.T) {
	for _, name := range []string{"", "standard", "marker,", "tool-call"} {
		r, err := fallback.ByName(name)
		require.ErrorIs(t, err, fallback.ErrUnknownRenderer, "%q", name)
		require.Nil(t, r)
		require.Contains(t, err.Error(), "toolcall", "the error lists the known names")
	}
}

func TestNamesReturnsAFreshList(t *testing.T) {
	n := fallback.Names()
	n[0] = "changed"
	require.Equal(t, "text", fallback.Names()[0])
}
