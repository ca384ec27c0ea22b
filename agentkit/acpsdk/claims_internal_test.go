package acpsdk

import (
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/internal/skim"
)

// TestEachPromptHandlerClaimsItsOwnPrompt: the reader holds a prompt back
// until the one before it is claimed by its handler or answered without
// one, so the handler that claims is always the prompt's own.
func TestEachPromptHandlerClaimsItsOwnPrompt(t *testing.T) {
	c := newClaims()
	k1, k2, k3 := skim.IDKey([]byte(`1`)), skim.IDKey([]byte(`"two"`)), skim.IDKey([]byte(`3`))
	c.hand(k1)
	handed := make(chan struct{})
	go func() {
		c.hand(k2) // waits for prompt 1's handler
		close(handed)
	}()
	select {
	case <-handed:
		t.Fatal("prompt 2 was handed to the SDK before prompt 1 reached its handler")
	case <-time.After(20 * time.Millisecond):
	}
	if key, ok := c.claim(); !ok || key != k1 {
		t.Fatalf("the first handler claimed %q, want prompt 1", key)
	}
	<-handed
	// Prompt 2 is rejected by the SDK before any handler: its answer
	// releases the reader at once, rather than after claimTimeout.
	c.sent([]byte(`{"jsonrpc":"2.0","id":"two","error":{"code":-32602,"message":"invalid params"}}`))
	start := time.Now()
	c.hand(k3)
	if waited := time.Since(start); waited >= claimTimeout {
		t.Fatalf("prompt 3 waited %v for a prompt that was answered", waited)
	}
	if key, ok := c.claim(); !ok || key != k3 {
		t.Fatalf("the next handler claimed %q, want prompt 3", key)
	}
	if _, ok := c.claim(); ok {
		t.Error("a handler with no prompt of its own claimed one")
	}
	c.close()
	c.hand(k1) // a closed connection holds nothing back
}
