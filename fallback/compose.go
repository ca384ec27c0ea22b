package fallback

import (
	"context"
	"errors"

	"github.com/acpcompact/acpcompact/emitter"
)

// None renders nothing: compaction stays invisible to fallback clients.
// A kit given None as its fallback leaves such clients in mode Off.
type None struct{}

// Render implements emitter.Renderer.
func (None) Render(context.Context, emitter.Event, emitter.Notifier) error { return nil }

// Compose returns a renderer that renders every event through each of rs in
// order, for example Compose(Marker(), Text()) for a marker that tooling
// reads plus prose that users read. Any emitter.Renderer composes, an
// agent's own included; nil entries are skipped.
//
// A failing renderer does not stop the others: each must still reach its
// terminal form. The errors are joined.
func Compose(rs ...emitter.Renderer) emitter.Renderer {
	out := make(composite, 0, len(rs))
	for _, r := range rs {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

type composite []emitter.Renderer

// Render implements emitter.Renderer.
func (c composite) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	var errs []error
	for _, r := range c {
		if err := r.Render(ctx, ev, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
