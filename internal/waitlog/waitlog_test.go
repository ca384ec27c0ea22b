package waitlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/internal/waitlog"
)

// bound is what a test waits at most for something that does happen; the
// tests assert on what comes back, never on how long it took.
const bound = 10 * time.Second

func even(n int) bool { return n%2 == 0 }

// An item already recorded is found without waiting, and an item before
// from is not looked at.
func TestWaitFindsARecordedItemFromItsIndex(t *testing.T) {
	var l waitlog.Log[int]
	for _, v := range []int{2, 3, 4} {
		l.Append(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	v, err := l.Wait(ctx, 0, nil, even)
	require.NoError(t, err)
	assert.Equal(t, 2, v, "the first match from index 0")
	v, err = l.Wait(ctx, 1, nil, even)
	require.NoError(t, err)
	assert.Equal(t, 4, v, "the first match from index 1 skips the items before it")
}

// A wait for an item not recorded yet ends when an Append records it,
// skipping later items that do not match.
func TestWaitEndsOnTheAppendThatMatches(t *testing.T) {
	var l waitlog.Log[int]
	l.Append(1)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	waiting := make(chan struct{})
	got := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		close(waiting)
		v, err := l.Wait(ctx, 0, nil, even)
		got <- v
		errs <- err
	}()
	<-waiting
	l.Append(3)
	l.Append(6)
	l.Append(8)
	require.NoError(t, <-errs)
	assert.Equal(t, 6, <-got, "the first even item appended")
}

// A wait that nothing satisfies ends with its context, and says so.
func TestWaitEndsWithItsContext(t *testing.T) {
	var l waitlog.Log[int]
	l.Append(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Wait(ctx, 0, nil, even)
	assert.ErrorIs(t, err, context.Canceled)
}

// A wait ends with ErrStopped when its stop channel closes and nothing
// recorded satisfies it; an item recorded before the stop is still found.
func TestWaitEndsWhenStoppedAfterALastLook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	stop := make(chan struct{})
	close(stop)

	var l waitlog.Log[int]
	l.Append(1)
	_, err := l.Wait(ctx, 0, stop, even)
	require.ErrorIs(t, err, waitlog.ErrStopped, "nothing matched before the stop")

	l.Append(4)
	v, err := l.Wait(ctx, 0, stop, even)
	require.NoError(t, err, "an item recorded before the stop matched")
	assert.Equal(t, 4, v)
}

// Append returns the index each item got, Len the next one, and Items a
// copy: writing to it does not change the Log.
func TestAppendIndexesAndItemsCopies(t *testing.T) {
	var l waitlog.Log[string]
	assert.Equal(t, 0, l.Append("a"))
	assert.Equal(t, 1, l.Append("b"))
	assert.Equal(t, 2, l.Len())
	items := l.Items()
	items[0] = "changed"
	assert.Equal(t, 2, l.Append("c"))
	assert.Equal(t, []string{"a", "b", "c"}, l.Items())
}
