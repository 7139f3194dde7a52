// Package connqueue is a net.Listener for connections that come from inside the
// process rather than from a socket: a Queue's Accept returns the connections handed to
// it by Push. An http.Server serving a Queue serves every connection pushed.
package connqueue

import (
	"context"
	"net"
	"sync"
)

// Queue is a net.Listener whose connections are pushed to it. Safe for concurrent use.
type Queue struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

// New returns a Queue whose Addr is addr.
func New(addr net.Addr) *Queue {
	return &Queue{conns: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

// Push hands c to the next Accept, waiting for it until ctx ends. It returns
// net.ErrClosed once q is closed, or ctx's error; c is then untouched.
func (q *Queue) Push(ctx context.Context, c net.Conn) error {
	select {
	case q.conns <- c:
		return nil
	case <-q.done:
		return net.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Accept waits for the next connection pushed; it returns net.ErrClosed once q is closed.
func (q *Queue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Close stops q accepting; connections already accepted stay open. Pushes waiting
// return net.ErrClosed.
func (q *Queue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

// Addr returns the address q was made with.
func (q *Queue) Addr() net.Addr { return q.addr }
