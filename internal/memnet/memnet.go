// Package memnet is an in-memory network for tests: a listener whose connections are
// net.Pipe pairs, an HTTP server on it and a client that dials it.
//
// Everything on it blocks on channels, never on a socket, which is what lets a test run
// an HTTP server and its clients inside a testing/synctest bubble: the bubble's clock
// advances only when every goroutine in it is durably blocked, and a goroutine that waits
// on a loopback socket never is. Inside a bubble a test therefore sees the timings its
// model prescribes (a simulated engine's steps, a prober's pacing) and none of the time
// the machine spends, so that what it asserts holds however loaded the machine is. What
// the machine spends is measured by benchmarks instead (docs/benchmarks.md).
//
// It also works outside a bubble, on the wall clock, as an httptest.Server without
// sockets.
package memnet

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/slogate/slogate/internal/connqueue"
)

// Listener is an in-memory net.Listener: Accept returns the server ends of the
// connections Dial makes. Safe for concurrent use.
type Listener struct {
	*connqueue.Queue
}

// Listen returns a new Listener. Inside a synctest bubble, create it in the bubble.
func Listen() *Listener {
	return &Listener{connqueue.New(addr{}, 0)}
}

// Dial connects to l, whatever the network and address, and returns the client end.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	srv, cli := net.Pipe()
	err := l.Push(ctx, srv)
	if err == nil {
		return cli, nil
	}
	_ = srv.Close()
	_ = cli.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, &net.OpError{Op: "dial", Net: addr{}.Network(), Addr: addr{}, Err: errors.New("connection refused")}
}

type addr struct{}

func (addr) Network() string { return "memnet" }
func (addr) String() string  { return "memnet" }

// Server is an HTTP server on a Listener, like httptest.Server without a socket.
type Server struct {
	URL    string       // http://memnet: any host reaches the server through Client
	Client *http.Client // dials only this server; has room for many idle connections

	l      *Listener
	srv    *http.Server
	served chan struct{}
}

// NewServer serves h until Close. Inside a synctest bubble, create it in the bubble and
// close it before the bubble ends.
func NewServer(h http.Handler) *Server {
	s := &Server{URL: "http://" + addr{}.String(), l: Listen(), srv: &http.Server{Handler: h}, served: make(chan struct{})}
	s.Client = &http.Client{Transport: &http.Transport{
		DialContext: s.l.Dial, MaxIdleConns: 0, MaxIdleConnsPerHost: 4096, DisableCompression: true,
	}}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(s.l)
	}()
	return s
}

// Close closes the listener, every connection and the client's idle connections, and
// waits for the server to stop accepting. Handlers still running see their connections
// gone.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.served
	s.Client.CloseIdleConnections()
}
