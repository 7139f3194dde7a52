package connqueue_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/slogate/slogate/internal/connqueue"
)

// TestQueue checks that a pushed connection is the one Accept returns, that a push
// waits no longer than its context, and that Close ends both sides.
func TestQueue(t *testing.T) {
	addr := &net.TCPAddr{Port: 1}
	q := connqueue.New(addr)
	if q.Addr() != addr {
		t.Errorf("Addr = %v, want the address New was given", q.Addr())
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	pushed := make(chan error, 1)
	go func() { pushed <- q.Push(context.Background(), a) }()
	got, err := q.Accept()
	if err != nil || got != a {
		t.Fatalf("Accept = %v, %v; want the pushed connection", got, err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("Push = %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Push(ctx, b); !errors.Is(err, context.Canceled) {
		t.Errorf("Push with nobody accepting and its context done = %v, want context.Canceled", err)
	}

	q.Close()
	if err := q.Push(context.Background(), b); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Push after Close = %v, want net.ErrClosed", err)
	}
	if _, err := q.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	q.Close() // twice is fine
}
