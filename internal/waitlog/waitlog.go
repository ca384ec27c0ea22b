// Package waitlog is an append-only record that a reader can wait on: the
// first item from a given index that satisfies a predicate, bounded by a
// context. The test client of the kits and the scenario agent's client keep
// what they saw on the wire in one.
package waitlog

import (
	"context"
	"errors"
	"sync"
)

// ErrStopped is returned by Wait when its stop channel closed and no item
// recorded by then satisfied the predicate.
var ErrStopped = errors.New("waitlog: stopped while waiting")

// Log is an append-only list of T. The zero value is an empty Log ready
// for use. Safe for concurrent use.
type Log[T any] struct {
	mu    sync.Mutex
	items []T
	// changed is what a waiter that saw every item waits on: made by the
	// first such waiter, closed and dropped by the next Append.
	changed chan struct{}
}

// ch returns the channel the next Append closes. l.mu is held.
func (l *Log[T]) ch() chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// Append adds v at the end and wakes every waiter. It returns v's index.
func (l *Log[T]) Append(v T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return len(l.items) - 1
}

// Items returns a copy of the list.
func (l *Log[T]) Items() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// Len returns how many items the list holds: the index the next Append
// gets.
func (l *Log[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// Wait returns the first item at index from or later that satisfies pred,
// waiting for later Appends until one does. It gives up when ctx ends,
// returning ctx.Err(), or when stop closes (a nil stop never does), once
// no item appended before then satisfies pred, returning ErrStopped. pred
// is called with the Log's lock held, so it must not call the Log.
func (l *Log[T]) Wait(ctx context.Context, from int, stop <-chan struct{}, pred func(T) bool) (T, error) {
	var zero T
	for i := max(from, 0); ; {
		l.mu.Lock()
		for ; i < len(l.items); i++ {
			if pred(l.items[i]) {
				v := l.items[i]
				l.mu.Unlock()
				return v, nil
			}
		}
		ch := l.ch()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			// One last look: an item may have been appended just before
			// stop closed.
			if i >= l.Len() {
				return zero, ErrStopped
			}
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}
