package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// engineTransport is the http.RoundTripper of the inference routes when the engine is
// reached over plain HTTP: HTTP/1.1 over TCP, with the whole exchange on the caller's
// goroutine. net/http's Transport gives every connection a read loop and a write loop
// (two goroutines, their stacks and two 4 KiB buffers) for as long as it is open; an
// inference request's body is already in memory and its answer is read by one
// goroutine, so engineTransport writes the request from a pooled buffer and reads the
// answer through one pooled 2 KiB reader, held only while the exchange lasts; a chunked
// answer read with engineBody.each (an event stream's) gives the reader back once its
// headers are in and reads the rest straight from the socket.
//
// Guarantees:
//   - A request's context bounds the whole exchange: once it is done, a pending dial,
//     write or read returns at once with the context's error, and the connection is
//     closed, never reused.
//   - A connection is reused only after its answer was read to the end, with nothing
//     left over, and neither side asked to close it; it waits at most idleTimeout, and
//     one the engine closed meanwhile is never handed out (checked before reuse).
//   - ResponseHeaderTimeout bounds the wait for the answer's headers (a net.Error whose
//     Timeout is true), and nothing after them.
//   - Closing an answer's body before its end closes the connection; it never reads the
//     rest.
//
// It does not retry: a request that fails on a reused connection fails, as it does with
// net/http's Transport for a POST without GetBody. It is safe for concurrent use.
type engineTransport struct {
	dialer        net.Dialer
	headerTimeout time.Duration
	idleTimeout   time.Duration
	maxIdle       int

	mu     sync.Mutex
	idle   map[string][]*engineConn // by host:port, most recently used last
	reaper *time.Timer              // closes connections idle for idleTimeout; nil when none waits
}

// engineIdleTimeout is how long an engine connection waits for its next request. It is
// below the 5 s after which vLLM's and SGLang's API servers close an idle keep-alive
// connection (enginesim.KeepAliveTimeout), so that slogate closes first rather than
// keep sockets the engine has already closed.
const engineIdleTimeout = 4 * time.Second

// newEngineTransport returns an engineTransport whose answers' headers must arrive
// within headerTimeout (0: no bound).
func newEngineTransport(headerTimeout time.Duration) *engineTransport {
	return &engineTransport{
		dialer:        net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		headerTimeout: headerTimeout,
		idleTimeout:   engineIdleTimeout,
		maxIdle:       4096,
		idle:          make(map[string][]*engineConn),
	}
}

// engineConn is one connection to the engine.
type engineConn struct {
	t    *engineTransport
	host string
	nc   net.Conn
	br   *bufio.Reader // from readers while an exchange holds the connection
	idle time.Time     // when it was put back, while idle

	mu        sync.Mutex // orders a cancellation's deadline with clearing the header deadline
	cancelled bool
}

// Pools of the buffers an exchange holds: the reader for the whole exchange (2 KiB: one
// read of the engine's socket; events arrive one or a few at a time), the writer while
// the request is written.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 2<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

// RoundTrip sends req on an idle connection to its host, or a new one, and returns the
// answer once its headers are in; its body reads from the connection.
func (t *engineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	c, err := t.conn(ctx, hostPort(req.URL))
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return c.roundTrip(req)
}

// hostPort returns u's host:port, port 80 when u names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// conn returns an idle connection to host that is still open, or dials one.
func (t *engineTransport) conn(ctx context.Context, host string) (*engineConn, error) {
	for {
		c := t.takeIdle(host)
		if c == nil {
			break
		}
		if alive(c.nc) {
			c.br = readers.Get().(*bufio.Reader)
			c.br.Reset(c.nc)
			return c, nil
		}
		c.nc.Close()
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(nc)
	return &engineConn{t: t, host: host, nc: nc, br: br}, nil
}

// takeIdle removes and returns the most recently used idle connection to host that has
// not waited past idleTimeout, or nil.
func (t *engineTransport) takeIdle(host string) *engineConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	conns := t.idle[host]
	if len(conns) == 0 {
		return nil
	}
	c := conns[len(conns)-1]
	conns[len(conns)-1] = nil
	t.idle[host] = conns[:len(conns)-1]
	return c
}

// put returns c to the idle pool, or closes it when the pool is full.
func (t *engineTransport) put(c *engineConn) {
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
	c.idle = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.idle[c.host]); n >= t.maxIdle {
		c.nc.Close()
		return
	}
	t.idle[c.host] = append(t.idle[c.host], c)
	if t.reaper == nil {
		t.reaper = time.AfterFunc(t.idleTimeout, t.reap)
	}
}

// reap closes the connections that have waited idleTimeout, and runs again while any
// connection waits.
func (t *engineTransport) reap() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var next time.Duration
	for host, conns := range t.idle {
		k := 0 // conns is oldest first: the expired ones lead
		for k < len(conns) && now.Sub(conns[k].idle) >= t.idleTimeout {
			conns[k].nc.Close()
			conns[k] = nil
			k++
		}
		conns = conns[k:]
		if len(conns) == 0 {
			delete(t.idle, host)
			continue
		}
		t.idle[host] = conns
		if d := t.idleTimeout - now.Sub(conns[0].idle); next == 0 || d < next {
			next = d
		}
	}
	t.reaper = nil
	if next > 0 {
		t.reaper = time.AfterFunc(next, t.reap)
	}
}

// CloseIdleConnections closes every idle connection.
func (t *engineTransport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for host, conns := range t.idle {
		for _, c := range conns {
			c.nc.Close()
		}
		delete(t.idle, host)
	}
	if t.reaper != nil {
		t.reaper.Stop()
		t.reaper = nil
	}
}

// maxInformational bounds the informational (1xx) answers read before the answer, as
// net/http's Transport does.
const maxInformational = 5

var errTooManyInformational = errors.New("proxy: the engine sent too many informational answers")

// aLongTimeAgo is a deadline in the past: it makes every pending and later I/O on a
// connection fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes req on c and reads the answer's headers (skipping informational
// answers). The connection belongs to the answer's body from then on.
func (c *engineConn) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, c.cancel)
	fail := func(err error) (*http.Response, error) {
		stop()
		c.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(c.nc)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writers.Put(bw)
	if err != nil {
		return fail(err)
	}
	if c.t.headerTimeout > 0 {
		c.deadline(time.Now().Add(c.t.headerTimeout))
	}
	var resp *http.Response
	for informational := 0; ; informational++ {
		if resp, err = http.ReadResponse(c.br, req); err != nil {
			return fail(err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if informational == maxInformational {
			return fail(errTooManyInformational)
		}
	}
	if c.t.headerTimeout > 0 {
		c.deadline(time.Time{})
	}
	b := &engineBody{c: c, src: resp.Body, ctx: ctx, stop: stop, reuse: !resp.Close && !req.Close}
	if resp.Body != http.NoBody && len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked" {
		b.trailer = &resp.Trailer
	}
	resp.Body = b
	return resp, nil
}

// cancel makes the connection's pending and later I/O fail: its request's context is
// done.
func (c *engineConn) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	c.nc.SetDeadline(aLongTimeAgo)
}

// deadline sets the read deadline, unless a cancellation has set its own.
func (c *engineConn) deadline(d time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cancelled {
		c.nc.SetReadDeadline(d)
	}
}

// close closes the connection and gives back its reader.
func (c *engineConn) close() {
	c.nc.Close()
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
}

// engineBody is an answer's body: it reads from the connection, which it puts back in
// the idle pool at a clean end and closes otherwise.
type engineBody struct {
	c     *engineConn
	src   io.ReadCloser // the body http.ReadResponse made
	ctx   context.Context
	stop  func() bool // stops the cancellation: false once it ran
	reuse bool        // neither side asked to close the connection

	ended atomic.Bool // the connection was put back or closed
	mu    sync.Mutex
	err   error // what Read returns once ended

	// trailer is the answer's Trailer, for each to set as net/http's reader does at the
	// body's end; nil unless the body is chunked.
	trailer *http.Header
	// While each reads: the watch for the engine hanging up, and whether it did.
	w     *watcher
	watch *watch
	hup   atomic.Bool
}

// canEach reports whether the body can be read with each: it is chunked, on a
// connection each can wait on, and nothing of it was read yet.
func (b *engineBody) canEach() bool {
	return eachSupported && b.trailer != nil && !b.ended.Load()
}

// eachEnd ends a body read with each: cleanly, as Read ends it at its end (the
// connection goes back to the pool when reusable and nothing came after the body), or
// on err.
func (b *engineBody) eachEnd(err error, d *chunkedDecoder, after int) error {
	if err != nil {
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		}
		b.end(err, false)
		return err
	}
	if d.header != nil {
		mergeTrailer(b.trailer, d.header)
	}
	b.end(io.EOF, after == 0)
	return nil
}

// mergeTrailer sets the trailers that came at the end of a body in the answer's
// Trailer, as net/http does: it holds the announced names, with no value, until then.
func mergeTrailer(dst *http.Header, src http.Header) {
	if *dst == nil {
		*dst = src
		return
	}
	for k, vv := range src {
		(*dst)[k] = vv
	}
}

// Buffered returns how many bytes of the answer (with its chunk framing) are read from
// the connection and not yet from the body: more than 0 means the engine sent more,
// which a read returns without waiting unless it is the start of a chunk whose rest is
// still on its way. It is for the reading goroutine only.
func (b *engineBody) Buffered() int {
	if b.ended.Load() || b.c.br == nil {
		return 0
	}
	return b.c.br.Buffered()
}

// errBodyClosed is what a read of a body closed before its end returns.
var errBodyClosed = errors.New("proxy: read of the engine's answer after it was closed")

func (b *engineBody) Read(p []byte) (int, error) {
	b.trailer = nil // read through net/http's reader from now on: each may not take over
	if b.ended.Load() {
		b.mu.Lock()
		defer b.mu.Unlock()
		return 0, b.err
	}
	n, err := b.src.Read(p)
	switch {
	case err == io.EOF:
		b.end(io.EOF, true)
	case err != nil:
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		}
		b.end(err, false)
	}
	return n, err
}

// Close ends the exchange: at the body's end it changes nothing, before it the
// connection is closed. It may be called while another goroutine reads: that read
// fails (a body read with each: Close waits until each's function returns).
func (b *engineBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended.Swap(true) {
		return nil
	}
	b.err = errBodyClosed
	b.stop()
	b.c.nc.Close() // its reader may be in use by a read: left to the collector
	return nil
}

// end runs on the reading goroutine when the body ended, cleanly (the connection goes
// back to the pool when reusable) or not (it is closed); later reads return err.
func (b *engineBody) end(err error, clean bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended.Swap(true) {
		return // closed meanwhile
	}
	b.err = err
	c := b.c
	if b.stop() && clean && b.reuse && (c.br == nil || c.br.Buffered() == 0) {
		c.t.put(c)
		return
	}
	c.close()
}
