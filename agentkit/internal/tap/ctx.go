package tap

import "context"

// Binding is what a kit puts in the context of every handler it runs: the
// connection's tap, under one context key for both kits, so that one
// agentkit.SessionFrom (and one Recover) serves agentkit's connections and
// agentkit/acpsdk's alike. A kit makes one Binding per connection and binds
// a pointer to it, so a handler's context costs one context value.
type Binding struct {
	Tap *Tap
	// Host is the binding kit's own state for the connection, read only
	// by that kit (agentkit's AsyncHandler finds its limiter there); other
	// readers ignore it.
	Host any
}

type bindingKey struct{}

// Bind returns ctx carrying b.
func Bind(ctx context.Context, b *Binding) context.Context {
	return context.WithValue(ctx, bindingKey{}, b)
}

// Bound returns the Binding ctx carries (from Bind, in ctx or a context it
// derives from), or nil.
func Bound(ctx context.Context) *Binding {
	b, _ := ctx.Value(bindingKey{}).(*Binding)
	return b
}

// From returns the tap of the connection whose handler ctx belongs to, or
// nil.
func From(ctx context.Context) *Tap {
	if b := Bound(ctx); b != nil {
		return b.Tap
	}
	return nil
}
