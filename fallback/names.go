package fallback

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
)

// ErrUnknownRenderer is wrapped by ByName's error for a name it does not
// know.
var ErrUnknownRenderer = errors.New("fallback: unknown renderer")

// The names ByName accepts, in the order Names lists them.
const (
	NameText           = "text"
	NameMarker         = "marker"
	NameOpencodeMarker = "opencode-marker"
	NameToolCall       = "toolcall"
	NameNone           = "none"
)

// Names returns the renderer names ByName accepts, for a CLI flag's help.
func Names() []string {
	return []string{NameText, NameMarker, NameOpencodeMarker, NameToolCall, NameNone}
}

// ByName returns the renderer a CLI flag names, with default options:
// "text", "marker", "opencode-marker", "toolcall" or "none". A
// comma-separated list ("marker,text") composes them in order. Names are
// matched case-insensitively; an unknown one gives an error wrapping
// ErrUnknownRenderer.
func ByName(name string) (emitter.Renderer, error) {
	parts := strings.Split(name, ",")
	rs := make([]emitter.Renderer, 0, len(parts))
	for _, p := range parts {
		r, err := byName(strings.ToLower(strings.TrimSpace(p)))
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	if len(rs) == 1 {
		return rs[0], nil
	}
	return Compose(rs...), nil
}

func byName(name string) (emitter.Renderer, error) {
	switch name {
	case NameText:
		return Text(), nil
	case NameMarker:
		return Marker(), nil
	case NameOpencodeMarker:
		return OpencodeMarker(), nil
	case NameToolCall:
		return ToolCall(), nil
	case NameNone:
		return None{}, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownRenderer, name, strings.Join(Names(), ", "))
}
