// Package connqueue is a net.Listener for connections that come from inside the
// process rather than from a socket: a Queue's Accept returns the connections handed to
// it by Push or Offer. An http.Server serving a Queue serves every connection handed to
// it.
package connqueue

import (
	"context"
	"net"
	"sync"
)

// Queue is a net.Listener whose connections are handed to it. Safe for concurrent use.
type Queue struct {
	conns  chan net.Conn
	done   chan struct{}
	mu     sync.Mutex // orders Offer and Close, so that no connection stays in the backlog
	closed bool
	addr   net.Addr
}

// New returns a Queue whose Addr is addr, holding up to backlog connections that no
// Accept has taken yet (0: a connection is handed over only to a waiting Accept).
func New(addr net.Addr, backlog int) *Queue {
	return &Queue{conns: make(chan net.Conn, backlog), done: make(chan struct{}), addr: addr}
}

// Push hands c to an Accept, waiting for room until ctx ends. It returns net.ErrClosed
// once q is closed, or ctx's error; c is then untouched. A c pushed while q closes is
// closed with the backlog.
func (q *Queue) Push(ctx context.Context, c net.Conn) error {
	select {
	case <-q.done:
		return net.ErrClosed
	default:
	}
	select {
	case q.conns <- c:
		select {
		case <-q.done: // Close may have emptied the backlog before c went in
			q.drain()
		default:
		}
		return nil
	case <-q.done:
		return net.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Offer hands c over if that needs no wait: the backlog has room. It reports false, with
// c untouched, when it has none or q is closed.
func (q *Queue) Offer(c net.Conn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	select {
	case q.conns <- c:
		return true
	default:
		return false
	}
}

// Accept waits for the next connection handed over; it returns net.ErrClosed once q is
// closed.
func (q *Queue) Accept() (net.Conn, error) {
	select {
	case <-q.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Close stops q accepting, and closes the connections left in its backlog; connections
// already accepted stay open. Pushes waiting return net.ErrClosed.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	close(q.done)
	q.drain()
	return nil
}

// drain closes the connections in the backlog.
func (q *Queue) drain() {
	for {
		select {
		case c := <-q.conns:
			c.Close()
		default:
			return
		}
	}
}

// Addr returns the address q was made with.
func (q *Queue) Addr() net.Addr { return q.addr }
