package condwait_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/acpcompact/acpcompact/internal/condwait"
)

// A wait ends when its condition holds, woken by the broadcast of whoever
// made it hold.
func TestUntilReturnsOnceDone(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	ready := false
	go func() {
		mu.Lock()
		ready = true
		c.Broadcast()
		mu.Unlock()
	}()
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, condwait.Until(c, time.Hour, func() bool { return ready }), "the condition held, yet the wait reports it did not")
}

// A wait whose condition never holds ends at its bound, reporting so.
func TestUntilGivesUpAtTheBound(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	mu.Lock()
	defer mu.Unlock()
	assert.False(t, condwait.Until(c, time.Millisecond, func() bool { return false }), "a condition that never held reported as done")
}
