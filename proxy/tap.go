package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// maxMeasuredBody bounds the copy of a non-streaming response kept for measurement; a
// larger answer passes through unmeasured.
const maxMeasuredBody = 8 << 20

// tap is the body of an inference response on its way to the client, measured as it
// passes.
type tap interface {
	// writeTo writes the body to the client, flushing as it goes. It returns nil at the
	// body's end, and the error when reading or writing failed: the client's connection
	// is then to be aborted.
	writeTo(w io.Writer, flush func() error) error
	// Close closes the engine's body.
	Close() error
}

// tapAnswer returns the tap that measures the body of an inference response as the
// proxy copies it to the client.
func (p *Proxy) tapAnswer(ex *exchange, resp *http.Response) tap {
	ex.status = resp.StatusCode
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if ex.inject && resp.ContentLength >= 0 {
			// The usage chunk will be removed, so the length the engine sent is wrong.
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
		}
		if p.cfg.StreamIdleTimeout > 0 {
			ex.idle = newIdleWatch(p.cfg.StreamIdleTimeout, ex.cancel)
		}
		t := &sseTap{ex: ex, src: resp.Body}
		if sb, ok := resp.Body.(socketBody); ok && p.det != nil && sb.canEach() { // slogate's own transport's bodies
			t.direct, t.watch = sb, p.det.watch
		} else {
			t.buffered, _ = resp.Body.(interface{ Buffered() int })
		}
		return t
	}
	return &bodyTap{ex: ex, src: resp.Body}
}

var (
	_ tap = (*sseTap)(nil)
	_ tap = (*bodyTap)(nil)
)

// socketBody is a body that can be read straight from its socket, each read's data at
// once (engineBody.each, for a chunked body on slogate's own transport).
type socketBody interface {
	// canEach reports whether each can read the body.
	canEach() bool
	// each calls fn with the data of each read of the socket, decoded into buf, until
	// the body's end (nil), fn's error, or the read's. w watches for the engine hanging
	// up meanwhile.
	each(buf []byte, w *watcher, fn func([]byte) error) error
}

// sseTap passes a server-sent event stream through event by event, feeding each event to
// the exchange's recorder. It forwards every byte the engine sent, in order, except the
// usage chunk slogate asked for; an event is passed on once it is complete.
//
// A stream that breaks off (the engine's connection fails, or the idle watch cancels it)
// while the client is still there ends with an OpenAI error event in place of the
// incomplete event the engine left, and then writeTo fails, so that the proxy aborts
// the client's connection: an OpenAI SDK raises the error event, any other client sees
// a truncated body; none can take the stream for a complete answer.
type sseTap struct {
	ex          *exchange
	src         io.ReadCloser
	parser      *wire.SSEParser // in bufs
	passthrough bool            // an event exceeded the parser's limit: forward the rest unmeasured
	bufs        *tapBuffers
	out         []byte                      // bytes ready for the client
	err         error                       // the upstream's terminal error (io.EOF at a clean end)
	lastCR      bool                        // the last byte queued for the client was "\r"
	skipLF      bool                        // a dropped event ended in "\r": drop the "\n" completing it
	tail        []byte                      // in passthrough, the last bytes forwarded, to find the end marker
	buffered    interface{ Buffered() int } // src, when it says what is read and not yet returned; nil otherwise
	direct      socketBody                  // src, when it is read straight from its socket; nil otherwise
	watch       *watcher                    // with direct: the detacher's, which watches the engine's connection
}

// writeTo writes the stream to the client as it arrives: the headers at once (the
// engine sent them before its first event), then what the reads of the engine
// completed, in one write and one flush once no more of it is buffered (several events
// that arrived together go out together, up to maxCoalesced bytes). It fails when
// writing failed or the engine's stream broke off (after the error event, when there
// was a client to tell).
func (t *sseTap) writeTo(w io.Writer, flush func() error) error {
	_ = flush()
	if t.direct != nil {
		return t.writeEach(w, flush)
	}
	for {
		if len(t.out) > 0 && !t.more() {
			if _, err := w.Write(t.out); err != nil {
				return err
			}
			t.out = t.out[:0]
			_ = flush()
		}
		switch {
		case t.err == io.EOF:
			return nil
		case t.err != nil:
			return t.err
		}
		t.fill()
	}
}

// writeEach is writeTo for a body read straight from its socket: what each read of it
// completed goes to the client in one write and one flush.
func (t *sseTap) writeEach(w io.Writer, flush func() error) error {
	t.buffers()
	write := func() error {
		if len(t.out) == 0 {
			return nil
		}
		if _, err := w.Write(t.out); err != nil {
			return err
		}
		t.out = t.out[:0]
		_ = flush()
		return nil
	}
	var werr error
	t.ex.idle.reading()
	err := t.direct.each(t.bufs.read[:], t.watch, func(b []byte) error {
		t.ex.idle.read()
		t.feed(b)
		if werr = write(); werr != nil {
			return werr
		}
		t.ex.idle.reading()
		return nil
	})
	t.ex.idle.read()
	if werr != nil {
		return werr
	}
	if err == nil {
		err = io.EOF
	}
	t.end(err)
	if err := write(); err != nil {
		return err
	}
	if t.err == io.EOF {
		return nil
	}
	return t.err
}

// maxCoalesced bounds the bytes writeTo holds back for the client while more of the
// engine's stream is buffered.
const maxCoalesced = 4 << 10

// more reports whether the engine's stream has more bytes buffered, ready to read at
// once, and the queue for the client has room for them: writing can wait for them.
func (t *sseTap) more() bool {
	return t.buffered != nil && t.err == nil && len(t.out) < maxCoalesced && t.buffered.Buffered() > 0
}

// fill reads the engine's stream once and queues for the client what the read
// completed (which may be nothing).
func (t *sseTap) fill() {
	t.buffers()
	t.ex.idle.reading()
	n, err := t.src.Read(t.bufs.read[:])
	t.ex.idle.read()
	t.feed(t.bufs.read[:n])
	if err != nil {
		t.end(err)
	}
}

// buffers takes the tap's buffers from the pool, once.
func (t *sseTap) buffers() {
	if t.bufs == nil {
		t.bufs = tapPool.Get().(*tapBuffers)
		t.out = t.bufs.out[:0]
		t.parser = &t.bufs.parser
		t.parser.Reset()
	}
}

func (t *sseTap) feed(b []byte) {
	if t.passthrough {
		t.pass(b)
		return
	}
	if err := t.parser.Feed(b, t.event); errors.Is(err, wire.ErrEventTooLarge) {
		t.passthrough = true
		if tk := t.ex.ticket; tk != nil { // the first output, if not yet seen, will not be
			tk.PrefillDone()
		}
		t.pass(t.parser.Pending())
	}
}

// forward queues bytes for the client. When the event dropped before them ended in a
// "\r" at the end of a read, a "\n" completing that line ending is dropped with it.
func (t *sseTap) forward(b []byte) {
	if t.skipLF && len(b) > 0 {
		t.skipLF = false
		if b[0] == '\n' {
			b = b[1:]
		}
	}
	if len(b) > 0 {
		t.lastCR = b[len(b)-1] == '\r'
	}
	t.out = append(t.out, b...)
}

// drop leaves an event out of what the client gets. A line ending split between reads
// leaves its "\n" at the start of the next event's bytes (see wire.SSEParser): the "\n"
// completing the "\r" before the event is kept, the one completing its own is dropped.
func (t *sseTap) drop(raw []byte) {
	if t.lastCR && len(raw) > 0 && raw[0] == '\n' {
		t.forward(raw[:1])
	}
	t.skipLF = len(raw) > 0 && raw[len(raw)-1] == '\r'
}

// passTail is how many of the last bytes passed through unparsed are kept to find the
// end marker in them.
const passTail = 32

// pass forwards bytes unparsed and notes when they end with the end marker, so that a
// stream that fell back to passthrough and ends properly is not reported as broken.
func (t *sseTap) pass(b []byte) {
	t.forward(b)
	t.tail = append(t.tail, b[max(len(b)-passTail, 0):]...)
	t.tail = append(t.tail[:0], t.tail[max(len(t.tail)-passTail, 0):]...)
	if !t.ex.done && endsWithDone(t.tail) {
		t.ex.rec.Done()
		t.ex.done = true
	}
}

// endsWithDone reports whether b ends with the line "data: [DONE]" and the blank line
// that completes its event.
func endsWithDone(b []byte) bool {
	body := bytes.TrimRight(b, "\r\n")
	start := bytes.LastIndexAny(body, "\r\n")
	if line := string(body[start+1:]); start < 0 || line != "data: [DONE]" && line != "data:[DONE]" {
		return false
	}
	eols := 0
	for i, rest := 0, b[len(body):]; i < len(rest); i++ {
		if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
			i++
		}
		eols++
	}
	return eols >= 2
}

// event measures one event, in the shape of the request's route, and queues its bytes
// for the client, unless it is the usage chunk slogate added.
func (t *sseTap) event(ev wire.Event) error {
	switch {
	case ev.Comment:
	case ev.IsDone():
		t.ex.rec.Done()
		t.ex.done = true
	default:
		c, err := wire.ScanFor(t.ex.req.Route, ev.Data)
		if err != nil {
			break // not an event of the route: forwarded, not measured
		}
		// An error object is measured (the answer failed, or the engine refused it) and
		// forwarded like a chunk.
		if c.IsError {
			t.ex.rec.ErrorData(ev.Data)
		}
		t.ex.span.answered(t.ex.req.Route, ev.Data)
		t.ex.rec.Chunk(c)
		if tk := t.ex.ticket; tk != nil { // the output so far holds KV in the engine too
			tk.Output(t.ex.rec.Outputs())
		}
		if c.End {
			// A Responses stream has no [DONE]: its terminal event is the end marker.
			t.ex.done = true
		}
		if t.ex.inject && c.UsageOnly() {
			t.drop(ev.Raw)
			return nil
		}
	}
	t.forward(ev.Raw)
	return nil
}

// end records how the upstream stream ended. At its end, it releases what the parser
// held back, so that nothing the engine sent is lost; when it broke off before [DONE],
// it queues the error event for the client instead; after [DONE], it ends the client's
// stream as if the engine's had ended.
func (t *sseTap) end(err error) {
	t.err = err
	if err == io.EOF {
		if !t.passthrough {
			t.forward(t.parser.Pending())
		}
		t.ex.complete = true
		return
	}
	w := t.ex.idle
	w.stop()
	if t.ex.done {
		// The answer was complete ([DONE] came through) and only the end of the engine's
		// body is missing: the client's ends cleanly.
		t.err = io.EOF
		return
	}
	t.ex.readErr = err
	if !t.ex.clientGone() && errors.Is(context.Cause(t.ex.ctx), ErrShutdown) {
		t.ex.failure = measure.Shutdown
		t.breakOff(http.StatusServiceUnavailable, shutdownMessage)
		return
	}
	idle := w.expired()
	if idle {
		t.ex.failure = measure.UpstreamTimeout
	}
	if t.ex.clientGone() {
		return // the client is gone: nobody to tell
	}
	if idle {
		t.breakOff(http.StatusGatewayTimeout, fmt.Sprintf("the engine sent nothing for %s; slogate ended the stream", w.timeout))
		return
	}
	// The engine broke off while the client was still there. Settle the outcome now: a
	// client that reads the error event may hang up before the request is reported,
	// and that would make it look as if the client had left first.
	t.ex.failure = measure.UpstreamError
	if t.ex.rec.Outputs() > 0 {
		t.ex.failure = measure.AbortedMidstream
	}
	t.breakOff(http.StatusBadGateway, "the engine's stream broke off before its end")
}

// breakOff queues an OpenAI error event (`data: {"error":{...}}`) for the client, on a
// line of its own. The incomplete event the engine left is dropped, but for the "\n"
// that completes a "\r\n" already forwarded; in passthrough, where what was forwarded
// may end inside an event, blank lines end that event first.
func (t *sseTap) breakOff(code int, msg string) {
	if t.passthrough {
		t.forward([]byte("\n\n"))
	} else if p := t.parser.Pending(); t.lastCR && len(p) > 0 && p[0] == '\n' {
		t.forward(p[:1])
	}
	body, _ := json.Marshal(wire.ErrorBody{Error: wire.APIError{Message: msg, Type: wire.TypeServer, Code: code}})
	t.out = append(t.out, "data: "...)
	t.out = append(t.out, body...)
	t.out = append(t.out, "\n\n"...)
}

// Close stops the idle watch, closes the upstream body and returns the tap's buffers to
// the pool.
func (t *sseTap) Close() error {
	t.ex.idle.stop()
	if t.bufs != nil {
		t.bufs.out = t.out[:0]
		if cap(t.bufs.out) > maxPooledOut { // a rare huge event: not kept for every stream after it
			t.bufs.out = make([]byte, 0, 1<<10)
		}
		tapPool.Put(t.bufs)
		t.bufs, t.out, t.parser = nil, nil, nil
	}
	return t.src.Close()
}

// tapBuffers are the read buffer, output queue and parser of one sseTap, recycled
// across requests so that a stream costs no buffer allocation. Every open stream holds
// one, so they are small: the read buffer holds an event or a few (1 KiB: an engine's
// chunk of one token is 200–600 bytes; a larger one takes more reads, from the
// transport's buffer, not the socket), and the queue, which holds the events of one
// write, starts at 1 KiB and keeps what it grew to.
type tapBuffers struct {
	read   [1 << 10]byte
	out    []byte
	parser wire.SSEParser // DefaultMaxEvent
}

// maxPooledOut is the largest output queue returned to the pool.
const maxPooledOut = 64 << 10

var tapPool = sync.Pool{New: func() any { return &tapBuffers{out: make([]byte, 0, 1<<10)} }}

// bodyTap passes a non-streaming response through and measures it at its end.
type bodyTap struct {
	ex   *exchange
	src  io.ReadCloser
	copy []byte
	over bool // the body outgrew maxMeasuredBody
}

// writeTo copies the body through a pooled buffer, flushing after every write, as
// ReverseProxy does with a negative flush interval.
func (t *bodyTap) writeTo(w io.Writer, flush func() error) error {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	for {
		n, rerr := t.read(*buf)
		if n > 0 {
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				return werr
			}
			_ = flush()
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// read reads the engine's body, keeping a copy to measure at its end.
func (t *bodyTap) read(p []byte) (int, error) {
	n, err := t.src.Read(p)
	if !t.over {
		if len(t.copy)+n > maxMeasuredBody {
			t.over, t.copy = true, nil
		} else {
			t.copy = append(t.copy, p[:n]...)
		}
	}
	switch {
	case err == io.EOF:
		t.ex.complete = true
		if !t.over {
			t.ex.rec.Body(t.copy)
			t.ex.span.answeredBody(t.ex.req.Route, t.copy)
		}
	case err != nil:
		t.ex.readErr = err
		if !t.ex.clientGone() && errors.Is(context.Cause(t.ex.ctx), ErrShutdown) {
			t.ex.status, t.ex.failure = http.StatusServiceUnavailable, measure.Shutdown
		}
	}
	return n, err
}

// Close closes the upstream body.
func (t *bodyTap) Close() error { return t.src.Close() }
