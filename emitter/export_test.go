package emitter

import (
	"context"

	"github.com/acpcompact/acpcompact/protocol"
)

// Hooks for the package's own tests only (this file is compiled into its
// tests alone): observables and knobs that no host needs, so that they are
// not part of the API.

// SessionCount returns how many sessions e keeps.
func SessionCount(e *Emitter) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// OpenOf returns how many compactions of s are open.
func OpenOf(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// OpenCount returns the number of open compactions across e's sessions.
func OpenCount(e *Emitter) int {
	n := 0
	for _, s := range e.all() {
		n += OpenOf(s)
	}
	return n
}

// WithIDGenerator replaces the ID minted when Start gets no WithID.
func WithIDGenerator(f func() protocol.ID) Option { return func(c *config) { c.newID = f } }

// WithErrorText replaces how a failure's cause becomes the user-visible
// error string.
func WithErrorText(f func(error) string) Option { return func(c *config) { c.errorText = f } }

// RendererFunc adapts a function to Renderer.
type RendererFunc func(ctx context.Context, ev Event, n Notifier) error

// Render calls f.
func (f RendererFunc) Render(ctx context.Context, ev Event, n Notifier) error { return f(ctx, ev, n) }
