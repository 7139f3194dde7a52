package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/internal/connqueue"
)

// Detached streams.
//
// A stream held by net/http's server costs, for as long as it runs, the connection's
// goroutine with the stack the handler grew, a second goroutine reading ahead to notice
// the client leaving, and three buffers (a 4 KiB reader, a 4 KiB writer and the
// response's 2 KiB writer) that a handler cannot size. Once the answer's headers are
// out, none of that is needed to pass the engine's events on: the proxy takes the
// connection over (Hijack), lets the handler return — which frees all of it — and
// continues the stream on a goroutine of its own, writing each read of the engine as
// one HTTP/1.1 chunk in one write. One epoll instance for all such connections (a
// watcher) tells when a client hangs up, which cancels its request at once as before.
// When the stream ends cleanly the connection is parked, costing no goroutine and no
// buffer, until the client sends its next request or the server's IdleTimeout passes;
// it then goes back to the server, which reads it like a new connection.
//
// Only streams of server-sent events answered 200 to an HTTP/1.1 request over TCP are
// detached; everything else stays on net/http's path. Detach turns it on.

// detacher holds what detached streams share.
type detacher struct {
	srv   *http.Server
	watch *watcher
	queue *connqueue.Queue // the listener through which connections return to srv

	streams running        // the detached streams' goroutines
	moving  sync.WaitGroup // parked connections on their way back to srv (added to by the watcher only)
	serving sync.WaitGroup // srv serving queue

	mu      sync.Mutex
	conns   map[*detachedConn]struct{} // streaming or parked
	closing bool                       // srv is shutting down: no connection is parked any more
}

// detachedConn is a client connection taken over from net/http.
type detachedConn struct {
	net.Conn
	pending []byte         // bytes of the client's next request net/http had read ahead
	trailer *http.Response // whose Trailer, complete at the body's end, ends the answer
	close   bool           // the client asked to close the connection after this answer
	wt      *watch         // the watcher's registration: hang-up while streaming, next request while parked
	ex      *exchange      // the stream's exchange; nil once parked
	idle    atomic.Value   // *time.Timer of a parked connection
	d       *detacher
}

// Detach makes p take over the connections of the streams it answers on srv, which
// must be the server serving p, and hand each back to srv when its stream has ended
// and the client sends its next request. Call it before srv serves. It returns an
// error, and changes nothing, where detaching is not supported (other systems than
// Linux). Shutting srv down stops parking connections; WaitDetached waits for the
// streams still detached, CloseDetached ends them.
func (p *Proxy) Detach(srv *http.Server) error {
	w, err := newWatcher()
	if err != nil {
		return err
	}
	d := &detacher{srv: srv, watch: w, queue: connqueue.New(queueAddr{}, returnBacklog), conns: make(map[*detachedConn]struct{})}
	srv.RegisterOnShutdown(d.shutdown)
	d.serving.Go(func() { _ = srv.Serve(d.queue) })
	p.det = d
	return nil
}

// WaitDetached waits until every detached stream has ended, or ctx is done. Streams
// detached while it waits are waited for too.
func (p *Proxy) WaitDetached(ctx context.Context) error {
	if p.det == nil {
		return nil
	}
	for {
		select {
		case <-p.det.streams.idle():
			if p.det.streams.count() == 0 {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// running counts goroutines, and tells when none runs.
type running struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed while n is 0
}

func (r *running) add() {
	r.mu.Lock()
	if r.n == 0 {
		r.none = make(chan struct{})
	}
	r.n++
	r.mu.Unlock()
}

func (r *running) done() {
	r.mu.Lock()
	r.n--
	if r.n == 0 {
		close(r.none)
	}
	r.mu.Unlock()
}

func (r *running) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// idle returns a channel closed once no goroutine runs.
func (r *running) idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return r.none
}

// CloseDetached closes every connection p took over, parked or streaming (a stream's
// request is cancelled and reported as cut by Shutdown), waits for the streams'
// goroutines, and stops detaching. Call it once srv has shut down or closed.
func (p *Proxy) CloseDetached() {
	d := p.det
	if d == nil {
		return
	}
	d.shutdown()
	d.mu.Lock()
	for dc := range d.conns {
		if dc.ex != nil {
			dc.ex.cancel(ErrShutdown)
		}
		dc.Conn.Close()
	}
	d.mu.Unlock()
	<-d.streams.idle()
	d.watch.stop() // no event after it returns, so nothing more is moving
	d.moving.Wait()
	d.serving.Wait()
}

// shutdown closes the parked connections and the queue back to srv; streams that end
// afterwards close their connections.
func (d *detacher) shutdown() {
	d.mu.Lock()
	d.closing = true
	for dc := range d.conns {
		if dc.ex == nil && dc.wt != nil && d.watch.cancel(dc.wt) {
			if t, ok := dc.idle.Load().(*time.Timer); ok {
				t.Stop()
			}
			delete(d.conns, dc)
			dc.Conn.Close()
		}
	}
	d.mu.Unlock()
	d.queue.Close()
}

// detachable reports whether resp, the answer to ex whose headers for the client are
// h, may be detached: a 200 event stream of unannounced length (which net/http
// sends chunked) to an HTTP/1.1 client over TCP.
func (p *Proxy) detachable(ex *exchange, resp *http.Response, h http.Header) bool {
	r := ex.r
	if p.det == nil || resp.StatusCode != http.StatusOK || !r.ProtoAtLeast(1, 1) || r.ProtoMajor != 1 {
		return false
	}
	if _, ok := h["Content-Length"]; ok {
		return false
	}
	switch r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr, *net.UnixAddr:
		return true
	}
	return false
}

// handOff takes the client's connection over from net/http once the headers are out
// and continues the stream on a goroutine of its own. It reports false, with nothing
// changed, when the connection cannot be taken over or the client has already gone:
// the caller then streams as usual.
func (p *Proxy) handOff(w http.ResponseWriter, ex *exchange, resp *http.Response, body tap) bool {
	if !ex.unfollow() {
		return false // the client has gone
	}
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		ex.follow()
		return false
	}
	conn, brw, err := rc.Hijack()
	if err != nil {
		ex.follow()
		return false
	}
	d := p.det
	dc := &detachedConn{Conn: conn, close: ex.r.Close, ex: ex, d: d, trailer: resp}
	if n := brw.Reader.Buffered(); n > 0 { // the client pipelined its next request
		b, _ := brw.Reader.Peek(n)
		dc.pending = append([]byte(nil), b...)
	}
	ex.detached = true
	// What the handler's net/http objects referred to is not needed any more: the body
	// was read, and it would keep the connection's reader alive.
	ex.r.Body = http.NoBody
	d.mu.Lock()
	d.conns[dc] = struct{}{}
	d.mu.Unlock()
	dc.wt, err = d.watch.add(conn, false, func(watchEvent) { ex.hangUp() })
	if err != nil {
		// Not expected for a TCP connection; without the watch the stream still ends,
		// and its client's leaving is found by the next write.
		p.cfg.Logger.Warn("detached stream: cannot watch the client's connection", "err", err)
		dc.wt = nil
	}
	if ex.r.Context().Err() != nil { // gone between unfollow and the hijack
		ex.hangUp()
	}
	d.streams.add()
	go p.stream(ex, body, dc)
	return true
}

// stream runs a detached stream to its end, reports it, and parks its connection or,
// when the stream broke off, closes it (the client sees a truncated chunked body, as
// net/http shows an aborted handler).
func (p *Proxy) stream(ex *exchange, body tap, dc *detachedConn) {
	d := dc.d
	defer d.streams.done()
	keep, closed, reported := false, false, false
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			p.cfg.Logger.Error("panic in a detached stream", "panic", v, "stack", string(debug.Stack()))
			keep = false
		}
		if !closed {
			_ = body.Close()
		}
		if !reported {
			p.close(ex)
			ex.cancel(nil)
		}
		d.release(dc, keep)
	}()
	err := body.writeTo(chunkedWriter{dc.Conn}, noFlush)
	closed = true
	_ = body.Close()
	if dc.wt != nil {
		d.watch.cancel(dc.wt)
		dc.wt = nil
	}
	reported = true
	p.close(ex)
	ex.cancel(nil)
	keep = err == nil
}

func noFlush() error { return nil }

// writeEnd ends a chunked body: the last chunk, the engine's trailers (those it
// announced and any others, as net/http's path passes both on), the blank line.
func writeEnd(c net.Conn, trailer http.Header) error {
	if len(trailer) == 0 {
		_, err := io.WriteString(c, "0\r\n\r\n")
		return err
	}
	var b bytes.Buffer
	b.WriteString("0\r\n")
	if err := trailer.Write(&b); err != nil {
		return err
	}
	b.WriteString("\r\n")
	_, err := c.Write(b.Bytes())
	return err
}

// release ends the answer on dc and parks the connection (keep), or closes it.
func (d *detacher) release(dc *detachedConn, keep bool) {
	if dc.wt != nil {
		d.watch.cancel(dc.wt)
		dc.wt = nil
	}
	if keep {
		err := writeEnd(dc.Conn, dc.trailer.Trailer)
		keep = err == nil && !dc.close && !dc.ex.clientGone()
	}
	d.mu.Lock()
	dc.ex, dc.trailer = nil, nil
	d.mu.Unlock()
	if !keep {
		d.drop(dc)
		return
	}
	if len(dc.pending) > 0 {
		d.handBack(dc)
		return
	}
	d.park(dc)
}

// park keeps dc, with no goroutine and no buffer, until the client sends its next
// request (it goes back to the server) or hangs up, or the server's idle timeout
// passes (it is closed).
func (d *detacher) park(dc *detachedConn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		delete(d.conns, dc)
		dc.Conn.Close()
		return
	}
	wt, err := d.watch.add(dc.Conn, true, func(e watchEvent) {
		if t, ok := dc.idle.Load().(*time.Timer); ok {
			t.Stop()
		}
		if e == readable {
			if c := d.returning(dc); !d.queue.Offer(c) { // the server is slow to accept, or shut down
				d.moving.Go(func() { d.push(c) })
			}
			return
		}
		d.drop(dc)
	})
	if err != nil {
		delete(d.conns, dc)
		dc.Conn.Close()
		return
	}
	dc.wt = wt
	idle := d.srv.IdleTimeout
	if idle == 0 {
		idle = d.srv.ReadTimeout // as net/http does
	}
	if idle > 0 {
		dc.idle.Store(time.AfterFunc(idle, func() {
			if d.watch.cancel(wt) {
				d.drop(dc)
			}
		}))
	}
}

// drop forgets and closes dc.
func (d *detacher) drop(dc *detachedConn) {
	d.mu.Lock()
	delete(d.conns, dc)
	d.mu.Unlock()
	dc.Conn.Close()
}

// handBack returns dc to the server, with what the client sent ahead.
func (d *detacher) handBack(dc *detachedConn) { d.push(d.returning(dc)) }

// returning forgets dc and returns the connection to give the server: dc's, or one
// that first reads what the client sent ahead.
func (d *detacher) returning(dc *detachedConn) net.Conn {
	d.mu.Lock()
	delete(d.conns, dc)
	d.mu.Unlock()
	if len(dc.pending) > 0 {
		return &prefixedConn{Conn: dc.Conn, r: io.MultiReader(bytes.NewReader(dc.pending), dc.Conn)}
	}
	return dc.Conn
}

// push hands c to the server, waiting for it to accept; it closes c if the server shut
// down.
func (d *detacher) push(c net.Conn) {
	if d.queue.Push(context.Background(), c) != nil {
		c.Close()
	}
}

// returnBacklog is how many connections may wait for the server to accept them on
// their way back, each costing no goroutine; past it, each waits on one.
const returnBacklog = 1024

// prefixedConn is a connection whose first bytes were already read from it.
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chunkedWriter writes each Write to the connection as one HTTP/1.1 chunk, in one write.
type chunkedWriter struct{ c net.Conn }

var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

func (w chunkedWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	bp := chunkBuffers.Get().(*[]byte)
	b := strconv.AppendInt((*bp)[:0], int64(len(p)), 16)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	b = append(b, "\r\n"...)
	_, err := w.c.Write(b)
	if cap(b) <= maxPooledOut {
		*bp = b[:0]
		chunkBuffers.Put(bp)
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// queueAddr is the address of the connections that return to the server.
type queueAddr struct{}

func (queueAddr) Network() string { return "slogate" }
func (queueAddr) String() string  { return "detached connections" }
