package connqueue_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/slogate/slogate/internal/connqueue"
)

// TestQueue checks that what is handed over is what Accept returns, in order; that
// Offer never waits and Push waits no longer than its context; and that Close ends both
// sides and closes what was left in the backlog.
func TestQueue(t *testing.T) {
	addr := &net.TCPAddr{Port: 1}
	q := connqueue.New(addr, 1)
	if q.Addr() != addr {
		t.Errorf("Addr = %v, want the address New was given", q.Addr())
	}
	a, aPeer := net.Pipe()
	b, bPeer := net.Pipe()
	c, cPeer := net.Pipe()
	for _, p := range []net.Conn{a, aPeer, b, bPeer, c, cPeer} {
		defer p.Close()
	}

	if !q.Offer(a) {
		t.Fatal("Offer with room in the backlog = false")
	}
	if q.Offer(b) {
		t.Fatal("Offer with the backlog full = true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Push(ctx, b); !errors.Is(err, context.Canceled) {
		t.Errorf("Push with the backlog full and its context done = %v, want context.Canceled", err)
	}
	if got, err := q.Accept(); err != nil || got != a {
		t.Fatalf("Accept = %v, %v; want the connection offered", got, err)
	}
	pushed := make(chan error, 1)
	go func() { pushed <- q.Push(context.Background(), b) }()
	if got, err := q.Accept(); err != nil || got != b {
		t.Fatalf("Accept = %v, %v; want the connection pushed", got, err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("Push = %v", err)
	}

	if !q.Offer(c) {
		t.Fatal("Offer with room in the backlog = false")
	}
	q.Close()
	if _, err := cPeer.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the connection left in the backlog: its peer read %v, want EOF (closed by Close)", err)
	}
	if q.Offer(b) {
		t.Error("Offer after Close = true")
	}
	if err := q.Push(context.Background(), b); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Push after Close = %v, want net.ErrClosed", err)
	}
	if _, err := q.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	q.Close() // twice is fine
}
