package signal

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// counter is a shared int whose changes are broadcast.
type counter struct {
	mu      sync.Mutex
	n       int
	changed Changed
}

func (c *counter) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.changed.Broadcast()
}

func (c *counter) look() (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.changed.C()
}

func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c counter
		c.add() // nobody waits: nothing to wake
		got := make(chan int)
		go func() {
			n, err := Await(context.Background(), c.look, func(n int) bool { return n >= 3 })
			if err != nil {
				t.Error(err)
			}
			got <- n
		}()
		for range 2 { // at 1, then 2: Await waits
			synctest.Wait()
			select {
			case n := <-got:
				t.Fatalf("Await returned %d before the count reached 3", n)
			default:
			}
			c.add()
		}
		if n := <-got; n != 3 {
			t.Errorf("Await = %d, want 3", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the bubble's time
		defer cancel()
		if n, err := Await(ctx, c.look, func(n int) bool { return n > 3 }); err != context.DeadlineExceeded || n != 3 {
			t.Errorf("Await(never) = %d, %v", n, err)
		}
	})
}
