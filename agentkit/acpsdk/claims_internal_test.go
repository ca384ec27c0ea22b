package acpsdk

import (
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.FailNow(t, "prompt 2 was handed to the SDK before prompt 1 reached its handler")
	case <-time.After(20 * time.Millisecond):
	}
	key, ok := c.claim()
	require.True(t, ok, "the first handler claimed nothing")
	require.Equal(t, k1, key, "what the first handler claimed")
	<-handed
	// Prompt 2 is rejected by the SDK before any handler: its answer
	// releases the reader at once, rather than after claimTimeout.
	c.sent([]byte(`{"jsonrpc":"2.0","id":"two","error":{"code":-32602,"message":"invalid params"}}`))
	start := time.Now()
	c.hand(k3)
	require.Less(t, time.Since(start), claimTimeout, "how long prompt 3 waited for a prompt that was answered")
	key, ok = c.claim()
	require.True(t, ok, "the next handler claimed nothing")
	require.Equal(t, k3, key, "what the next handler claimed")
	_, ok = c.claim()
	assert.False(t, ok, "a handler with no prompt of its own claimed one")
	c.close()
	c.hand(k1) // a closed connection holds nothing back
}
