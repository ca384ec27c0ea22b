package fallback_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
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
	// Names promises the set, not an order.
	gotNames, wantNames := slices.Sorted(slices.Values(fallback.Names())), []string{"marker", "none", "opencode-marker", "text", "toolcall"}
	require.Equal(t, wantNames, gotNames, "Names (sorted)")
	for _, name := range fallback.Names() {
		r, err := fallback.ByName(name)
		require.NoError(t, err, "ByName(%q)", name)
		require.Equal(t, want[name], kinds(renderEvents(t, r, started("cmp_1", protocol.Auto))), "%s: kinds of a start", name)
	}
	r, err := fallback.ByName("opencode-marker")
	require.NoError(t, err, "ByName(opencode-marker)")
	require.Len(t, markers(renderEvents(t, r, started("cmp_1", protocol.Auto)), fallback.OpencodeMarkerKey), 1, "opencode markers")
}

func TestByNameIsForgivingAboutCaseAndComposesLists(t *testing.T) {
	r, err := fallback.ByName(" Marker , TEXT ")
	require.NoError(t, err, "ByName")
	want := []string{"session_info_update", "agent_message_chunk"}
	require.Equal(t, want, kinds(renderEvents(t, r, started("cmp_1", protocol.Auto))), "kinds")
}

func TestByNameRejectsUnknownNamesWithTheSentinel(t *testing.T) {
	for _, name := range []string{"", "standard", "marker,", "tool-call"} {
		r, err := fallback.ByName(name)
		require.ErrorIs(t, err, fallback.ErrUnknownRenderer, "ByName(%q)", name)
		require.True(t, noRenderer(r), "ByName(%q): got a %T renderer with the error, want nil", name, r)
		require.ErrorContains(t, err, "toolcall", "ByName(%q): error %q does not list the known names (toolcall)", name, err)
	}
}

// noRenderer reports whether r is nil, also when it holds a nil pointer,
// slice, map or func: such a value is as unusable as a nil interface, and
// the check has accepted it since it was written.
func noRenderer(r emitter.Renderer) bool {
	if r == nil {
		return true
	}
	switch v := reflect.ValueOf(r); v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

func TestNamesReturnsAFreshList(t *testing.T) {
	n := fallback.Names()
	n[0] = "changed"
	require.Equal(t, "text", fallback.Names()[0], "Names()[0] after the caller changed its copy")
}
