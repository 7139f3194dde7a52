package proxy

import (
	"os"
	"syscall"
	"time"
)

// eachSupported: on Linux, chunked bodies are read straight from the socket (each).
const eachSupported = true

// each reads the rest of a chunked body (canEach) straight from the engine's socket,
// decoding its chunks in place in buf, and calls fn with the data of each read that
// brought some. It returns nil once the body ended (its trailers are then in the
// answer's Trailer, and the connection is back in the pool or closed, as Read leaves
// it), fn's error as soon as fn fails (the connection is left to Close), or the read's
// error: the request context's when it is done, io.ErrUnexpectedEOF when the engine
// closed early, the decoder's for a malformed body.
//
// Why not Read: a goroutine reading a socket through net.Conn tries the read first and
// waits for the poller only when the read finds nothing, so a stream that waits for
// every token pays an empty read (EAGAIN) for each. each runs inside one
// syscall.RawConn.Read, whose function waits for the poller without that read: after a
// read that did not fill buf (the socket's queue was empty then), it waits for the next
// readiness event, which Go's edge-triggered poller records even when it comes while fn
// runs. A read that fills buf is followed by another at once. The poller's readiness is
// reset only when RawConn.Read starts, which is why the whole body is read inside one
// call.
//
// The poller tells a hang-up apart from data only when it comes on its own: a FIN or
// a reset that arrives with the stream's last bytes, before they are read, makes one
// readiness event with them, and the read that takes the bytes does not report the end.
// So while each runs, w watches the connection for the engine hanging up; when it does,
// each reads what is left until the end, as Read would.
//
// fn runs on the calling goroutine, inside that call: it may block (writing to the
// client), but a Close of the body from another goroutine waits for it to return.
func (b *engineBody) each(buf []byte, w *watcher, fn func([]byte) error) error {
	c := b.c
	var d chunkedDecoder
	var fnErr error
	// deliver decodes one read and hands its data to fn; it reports whether the body is
	// over: it ended (after: the bytes that came after it), it was malformed, or fn failed.
	after := 0
	deliver := func(p []byte) (bool, error) {
		n, a, err := d.decode(p)
		if n > 0 {
			if fnErr = fn(p[:n]); fnErr != nil {
				return true, fnErr
			}
		}
		if err != nil || d.done() {
			after = a
			return true, err
		}
		return false, nil
	}
	// The reader the answer's headers were read with may hold the body's start.
	for c.br.Buffered() > 0 {
		n, _ := c.br.Read(buf)
		if over, err := deliver(buf[:n]); over {
			if err == nil {
				after += c.br.Buffered()
			}
			return b.eachDone(err, fnErr, &d, after)
		}
	}
	c.br.Reset(nil) // nothing is left in it: back to the pool now, not at the body's end
	readers.Put(c.br)
	c.br = nil
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return b.eachDone(errNoFD, nil, &d, 0)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return b.eachDone(err, nil, &d, 0)
	}
	// Without the watch, every short read is followed by another, as Read does.
	drain := true
	if b.watch, err = w.add(c.nc, false, func(watchEvent) { b.hangUp() }); err == nil {
		b.w, drain = w, false
	}
	var readErr error
	read := func(fd uintptr) bool {
		for {
			if err := b.ctx.Err(); err != nil {
				readErr = err
				return true
			}
			n, err := syscall.Read(int(fd), buf)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false // wait for the poller
			case err != nil:
				readErr = os.NewSyscallError("read", err)
				return true
			case n == 0:
				readErr = d.eof()
				return true
			}
			var over bool
			if over, readErr = deliver(buf[:n]); over {
				return true
			}
			if n < len(buf) && !drain {
				return false // the socket's queue was empty: wait for more
			}
		}
	}
	for {
		err := rc.Read(read)
		if err == nil {
			break
		}
		if !b.hup.Load() || b.ctx.Err() != nil {
			readErr = err // the deadline of a cancellation, or the connection was closed
			break
		}
		// The engine hung up, and hangUp's deadline woke the wait: read to the end.
		drain = true
		c.deadline(time.Time{})
	}
	return b.eachDone(readErr, fnErr, &d, after)
}

// hangUp is the watch's: the engine closed or reset the connection. It wakes each's
// wait with a deadline in the past.
func (b *engineBody) hangUp() {
	b.hup.Store(true)
	b.c.deadline(aLongTimeAgo)
}

// eachDone ends each: it ends the watch (a connection it reported on is not reused),
// then leaves the connection to Close when fn failed, and ends the body otherwise.
func (b *engineBody) eachDone(err, fnErr error, d *chunkedDecoder, after int) error {
	if b.watch != nil {
		if !b.w.cancel(b.watch) {
			b.reuse = false
		}
		b.watch, b.w = nil, nil
	}
	if fnErr != nil && err == fnErr {
		return err
	}
	return b.eachEnd(err, d, after)
}
