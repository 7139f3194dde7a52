package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// StatusClientClosed is the status slogate records (never sends) for a request whose
// client went away before its answer ended, as nginx does.
const StatusClientClosed = 499

type exchangeKey struct{}

// exchange is one inference request on its way through the proxy: what slogate learned
// of the request, and what happened to it. It belongs to the request's goroutine.
type exchange struct {
	r      *http.Request
	req    wire.Request
	body   []byte // the request's body as read; nil once the engine answered
	inject bool   // slogate added stream_options.include_usage to the request
	rec    *measure.Recorder
	class  admission.Class   // from the priority header
	ticket *admission.Ticket // the request's place in admission's ledger; nil without admission control, or when not admitted
	tier   string            // the tier of a rejected request
	tenant string            // the request's tenant; "" without tenants
	clock  clock.Clock
	onGap  func(time.Duration)
	live   *liveRequest
	ctx    context.Context         // the request's own context: bounds admission's wait and the upstream request
	cancel context.CancelCauseFunc // cancels ctx
	idle   *idleWatch              // watches a streaming response; nil when none is watched
	span   *requestSpan            // the request's trace; nil when tracing is off
	reject *admission.Rejection    // why admission turned it away; nil otherwise

	status   int             // the status the client got; 0 until known
	failure  measure.Outcome // set by the error handler; OK otherwise
	complete bool            // the response body was read to its end
	done     bool            // the stream's end marker, [DONE], came through
	readErr  error           // reading the engine's response failed

	// With detached streams (detach.go), ctx does not derive from the client request's
	// context, which net/http cancels when the handler returns, but follows it until the
	// stream is detached; from then on the watcher tells when the client hangs up.
	following func() bool // stops following r's context; nil when ctx derives from it
	detached  bool        // the stream went on without net/http (set before the handler returns)
	gone      atomic.Bool // the client of a detached stream hung up
}

// follow makes the client request's context, when it ends, cancel ex.ctx.
func (ex *exchange) follow() {
	r, cancel := ex.r, ex.cancel
	ex.following = context.AfterFunc(r.Context(), func() { cancel(context.Cause(r.Context())) })
}

// unfollow stops following the client request's context; it reports false when that
// context had already ended (the client has gone).
func (ex *exchange) unfollow() bool {
	if ex.following == nil {
		return ex.r.Context().Err() == nil
	}
	stopped := ex.following()
	ex.following = nil
	return stopped
}

// hangUp is called when the client of a detached stream hangs up: it cancels the
// request.
func (ex *exchange) hangUp() {
	ex.gone.Store(true)
	ex.cancel(context.Canceled)
}

// clientGone reports whether the client went away: its request's context ended while
// net/http served it, or it hung up on a detached stream.
func (ex *exchange) clientGone() bool {
	if ex.detached {
		return ex.gone.Load()
	}
	return ex.r.Context().Err() != nil
}

// open reads and inspects an inference request. It answers the client itself (400 or
// 413) and reports false when the request cannot be forwarded.
func (p *Proxy) open(w http.ResponseWriter, r *http.Request, route wire.Route) (*exchange, bool) {
	ex := &exchange{r: r, req: wire.Request{Route: route}, clock: p.cfg.Clock, class: p.class(r)}
	p.startSpan(ex)
	body, err := p.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			p.refuse(ex, w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), nil)
		case errors.As(err, &ne) && ne.Timeout():
			w.Header().Set("Connection", "close")
			p.refuse(ex, w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %s", p.cfg.BodyTimeout), nil)
		default:
			p.refuse(ex, w, http.StatusBadRequest, "reading the request body: "+err.Error(), nil)
		}
		return nil, false
	}
	req, err := wire.Inspect(route, body)
	if err != nil {
		var fe *wire.FieldError
		var param *string
		if errors.As(err, &fe) && fe.Field != "" {
			param = &fe.Field
		}
		p.refuse(ex, w, http.StatusBadRequest, err.Error(), param)
		return nil, false
	}
	ex.req, ex.body = req, body
	ex.span.inspected(req, body)
	// continuous_usage_stats alone is not enough: vLLM honours it only together with
	// include_usage (vllm/entrypoints/serve/utils/api_utils.py, should_include_usage), so
	// such a stream would carry no usage at all.
	// Only OpenAI chunk streams take stream_options: the Responses API reports usage at
	// its end anyway, /generate on every event, and pooling routes do not stream.
	ex.inject = p.cfg.InjectUsage && req.Stream && !req.IncludeUsage && req.Route.OpenAIStream()
	if ex.class != admission.Probe { // probes are measured by the prober, not in live metrics
		ex.onGap = p.gapObserver(req)
	}
	return ex, true
}

// readBody reads an inference request's body, at most MaxBodyBytes of it, within
// BodyTimeout.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	src := http.MaxBytesReader(w, r.Body, p.cfg.MaxBodyBytes)
	if p.cfg.BodyTimeout <= 0 {
		return readAll(src, r.ContentLength)
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(p.cfg.BodyTimeout)); err != nil {
		return readAll(src, r.ContentLength)
	}
	body, err := readAll(src, r.ContentLength)
	if err == nil {
		// Cleared once the body is in, so that it does not cut the answer short. A body
		// that missed it keeps it, and net/http closes the connection without waiting
		// for the rest.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

// presized is the longest announced body read into a buffer of its length at once;
// longer ones grow as they arrive, so that an announced length costs no memory before
// the bytes come.
const presized = 1 << 20

// readAll reads src to its end, into a buffer of the announced length when that is at
// most presized (growing it only if the body turns out longer). length is -1 when
// unknown.
func readAll(src io.Reader, length int64) ([]byte, error) {
	if length <= 0 || length > presized {
		return io.ReadAll(src)
	}
	// One byte more than announced, so that the read that finds the end has room.
	body := make([]byte, 0, length+1)
	for {
		if len(body) == cap(body) { // not expected: net/http ends a body at its length
			body = slices.Grow(body, 512)
		}
		n, err := src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			return body, nil
		}
		if err != nil {
			return body, err
		}
	}
}

// refuse answers a request slogate will not forward and reports it.
func (p *Proxy) refuse(ex *exchange, w http.ResponseWriter, status int, msg string, param *string) {
	wire.WriteError(w, status, wire.APIError{Message: msg, Param: param})
	ex.status, ex.failure = status, measure.BadRequest
	p.report(ex)
}

// rewrite prepares the outgoing request: the body as read (with include_usage added when
// slogate asks for usage), and no content coding, so the response can be measured.
func (ex *exchange) rewrite(out *http.Request) {
	body := ex.body
	if ex.inject {
		body = withUsage(body, ex.req.ContinuousUsage)
	}
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	out.Header.Del("Accept-Encoding")
	out.Header.Del("Expect")                 // the body is sent whole, without waiting for a 100 Continue
	out.Header.Del(admission.PriorityHeader) // slogate's own; the engine has no use for them
	out.Header.Del(ProbeKeyHeader)
	out.GetBody = nil
	ex.span.dispatch(out, ex.clock.Now())
	ex.rec = measure.NewRecorder(ex.req.Route, ex.req.Stream, measure.Options{Clock: ex.clock, OnGap: ex.onGap})
}

// usageOption asks for a usage report at the end of the stream and nothing else: a
// continuous report would change every chunk the client sees. continuousOption keeps the
// continuous report a client asked for, which vLLM sends only with include_usage.
const (
	usageOption      = `,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}`
	continuousOption = `,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`
)

// withUsage returns body, a non-empty JSON object, with usageOption (continuousOption
// when continuous) as its last member; the bytes after the object (whitespace) are kept.
// The engines' JSON parsers keep the last of duplicate keys, so it overrides any
// stream_options the client sent. One copy of the body costs less than the 32 KiB buffer
// the transport would allocate to send a multi-part reader.
func withUsage(body []byte, continuous bool) []byte {
	option := usageOption
	if continuous {
		option = continuousOption
	}
	end := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+len(option)-1)
	out = append(out, body[:end]...)
	out = append(out, option...)
	return append(out, body[end+1:]...)
}

// gapObserver returns the function that hands each gap to the observers that want gaps,
// or nil when none does.
func (p *Proxy) gapObserver(req wire.Request) func(time.Duration) {
	var fns []func(time.Duration)
	for _, o := range p.cfg.Observers {
		if g, ok := o.(GapObserver); ok {
			if f := g.GapObserver(req); f != nil {
				fns = append(fns, f)
			}
		}
	}
	switch len(fns) {
	case 0:
		return nil
	case 1:
		return fns[0]
	}
	return func(d time.Duration) {
		for _, f := range fns {
			f(d)
		}
	}
}
