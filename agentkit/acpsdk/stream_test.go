package acpsdk_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
)

// The kit writes the SDK's output and its own through one buffered queue:
// notifications may leave several to a write, after their call returned.
// On the wire the client must still see every message in the order it was
// produced, and the response after everything sent before it.
func TestFloodReachesTheClientInOrderBeforeTheResponse(t *testing.T) {
	kittest.FloodReachesTheClientInOrderBeforeTheResponse(t, stack{})
}
