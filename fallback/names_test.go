package fallback_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
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
	if !slices.Equal(gotNames, wantNames) {
		t.Fatalf("Names (sorted): got %q, want %q", gotNames, wantNames)
	}
	for _, name := range fallback.Names() {
		r, err := fallback.ByName(name)
		if err != nil {
			t.Fatalf("ByName(%q): %v", name, err)
		}
		if got := kinds(renderEvents(t, r, started("cmp_1", protocol.Auto))); !reflect.DeepEqual(got, want[name]) {
			t.Fatalf("%s: kinds of a start: got %q, want %q", name, got, want[name])
		}
	}
	r, err := fallback.ByName("opencode-marker")
	if err != nil {
		t.Fatalf("ByName(opencode-marker): %v", err)
	}
	if m := markers(renderEvents(t, r, started("cmp_1", protocol.Auto)), fallback.OpencodeMarkerKey); len(m) != 1 {
		t.Fatalf("opencode markers: got %v, want one", m)
	}
}

func TestByNameIsForgivingAboutCaseAndComposesLists(t *testing.T) {
	r, err := fallback.ByName(" Marker , TEXT ")
	if err != nil {
		t.Fatalf("ByName: %v", err)
	}
	want := []string{"session_info_update", "agent_message_chunk"}
	if got := kinds(renderEvents(t, r, started("cmp_1", protocol.Auto))); !slices.Equal(got, want) {
		t.Fatalf("kinds: got %q, want %q", got, want)
	}
}

func TestByNameRejectsUnknownNamesWithTheSentinel(t *testing.T) {
	for _, name := range []string{"", "standard", "marker,", "tool-call"} {
		r, err := fallback.ByName(name)
		if !errors.Is(err, fallback.ErrUnknownRenderer) {
			t.Fatalf("ByName(%q): got error %v, want %v", name, err, fallback.ErrUnknownRenderer)
		}
		if !noRenderer(r) {
			t.Fatalf("ByName(%q): got a %T renderer with the error, want nil", name, r)
		}
		if !strings.Contains(err.Error(), "toolcall") {
			t.Fatalf("ByName(%q): error %q does not list the known names (toolcall)", name, err)
		}
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
	if got := fallback.Names()[0]; got != "text" {
		t.Fatalf("Names()[0] after the caller changed its copy: got %q, want %q", got, "text")
	}
}
