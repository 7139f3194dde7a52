// Package signal lets goroutines wait for a change of some shared state without
// polling it: the code that changes the state broadcasts, and a waiter looks at the state
// again after each broadcast until the state is what it waits for.
package signal

import "context"

// Changed is a broadcast of changes. Its zero value is ready; a Broadcast with nobody
// waiting costs nothing. It must be guarded by the lock that guards the state whose
// changes it announces: C and Broadcast are called with that lock held.
type Changed struct{ ch chan struct{} }

// C returns a channel closed at the next Broadcast.
func (c *Changed) C() <-chan struct{} {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Broadcast wakes everyone waiting on a channel C returned.
func (c *Changed) Broadcast() {
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Await returns the state once cond holds for it, or the last state and ctx's error
// once ctx is done. look returns the state and the channel of its next change (C), read
// together under the state's lock; cond is called without the lock.
func Await[T any](ctx context.Context, look func() (T, <-chan struct{}), cond func(T) bool) (T, error) {
	for {
		v, changed := look()
		if cond(v) {
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}
