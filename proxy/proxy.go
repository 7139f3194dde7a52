// Package proxy is slogate's request path: an HTTP reverse proxy in front of one
// inference engine that inspects every request to a route slogate knows (completions,
// chat, the Responses API, SGLang's /generate, the pooling routes), forwards it, and
// measures the response as it streams through, without changing a byte the engine sends
// (except the usage chunk slogate itself asked for, which it removes again).
//
// The proxy knows nothing of Prometheus: it reports each request's measurement to the
// Observers it is given. What the requests in flight hold is admission's ledger: the
// proxy holds each admitted request's ticket from admission until its report, and
// reports its output to it as it streams.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/tracing"
	"github.com/slogate/slogate/wire"
)

// Observer receives the measurement of every inference request of live traffic (requests
// of the probe class are synthetic probes, measured by the prober, and are not reported).
// Observe is called once per request, after its response ended, on the request's
// goroutine; it must be safe for concurrent use and must not block.
type Observer interface {
	Observe(req wire.Request, res measure.Result)
}

// GapObserver is an Observer that also wants each gap between output chunks as it is
// measured (for an inter-token histogram). GapObserver is called once per request; the
// function it returns is called on the request's goroutine and must not block.
type GapObserver interface {
	GapObserver(req wire.Request) func(time.Duration)
}

// Config configures a Proxy.
type Config struct {
	Upstream *url.URL // the engine's base URL; required

	// MaxBodyBytes bounds inference request bodies; larger ones get 413. Default 64 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds the time to receive a request's body, from the end of its
	// headers: a client that sends it slower gets 408 and its connection is closed, so
	// that trickled bodies cannot hold connections open. It covers inference requests
	// (whose body slogate reads before deciding) and the requests it passes through
	// (whose body streams to the engine); it never bounds the answer. 0 means no limit.
	BodyTimeout time.Duration
	// InjectUsage asks the engine for a usage report on streams whose client did not,
	// and removes it from what the client sees, so output tokens are exact. Without it,
	// such streams' tokens are counted from chunks.
	InjectUsage bool
	// UpstreamTimeout bounds the wait for the engine's response headers; 0 means none.
	// It becomes 504.
	UpstreamTimeout time.Duration
	// StreamIdleTimeout bounds the silence of an engine's event stream: once a read of it
	// has waited this long for a byte (before the first token or between two), slogate
	// cancels the upstream request and ends the client's stream with an OpenAI error
	// event and an aborted connection, and reports the request as UpstreamTimeout with
	// the status the client got (200). Time spent writing to a slow client does not
	// count. 0 means no limit.
	StreamIdleTimeout time.Duration

	// Admission decides which inference requests go to the engine now, later or not at
	// all, and keeps the ledger of those in flight: the proxy holds each admitted
	// request's ticket, reports its output chunks to it (Ticket.Output) as they stream,
	// and releases it (Ticket.Done) exactly once however the request ends — answered,
	// refused by the engine, cut by its client, the idle watch or Shutdown, or a panic
	// in the handler. nil forwards everything and keeps no ledger.
	Admission Admitter

	// The probe class (X-Slogate-Priority: probe) keeps a request out of the live metrics
	// and admits it only from headroom, so only trusted requests may claim it: those
	// carrying ProbeKey (when set) in ProbeKeyHeader, as the sidecar's own prober does,
	// or every request when TrustPriority is set. Others are served as interactive. The
	// other classes lower a request's own priority and are anyone's to choose.
	ProbeKey      string
	TrustPriority bool

	// Tracing makes each inference request's spans (proxy/trace.go) and says which
	// requests the head rule samples; nil makes none, and a client's traceparent then
	// reaches the engine as it came. TraceContent records the prompt
	// and the answer's text in the request's span (gen_ai.input.messages and
	// gen_ai.output.messages, at most 64 KiB each); without it, a span holds neither.
	// Judge says whether a request met its SLO (the tail rule keeps those that did
	// not), Engine the engine's state at dispatch; both may be nil.
	Tracing      *tracing.Tracing
	TraceContent bool
	Judge        Judge
	Engine       EngineState

	// Transport carries every request to the engine. By default the inference routes
	// go through a transport of slogate's own when the engine is reached over plain
	// HTTP (engineTransport: the exchange on the request's goroutine), and the rest,
	// or everything over HTTPS, through net/http's, tuned for one local upstream.
	Transport http.RoundTripper
	Observers []Observer
	Logger    *slog.Logger // access log and errors; default discard
	Clock     clock.Clock  // default clock.Real
}

// Proxy is the client-facing handler. It is safe for concurrent use.
type Proxy struct {
	cfg         Config
	rp          *httputil.ReverseProxy // the routes passed through
	inferenceRT http.RoundTripper      // the inference routes' transport
	engine      *engineTransport       // slogate's own transport; nil when Config.Transport was given or the engine speaks HTTPS
	live        liveSet
	limit       int64
	det         *detacher // detached streams; nil until Detach
}

// New returns a Proxy for cfg.
func New(cfg Config) *Proxy {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	p := &Proxy{cfg: cfg}
	inference := cfg.Transport
	if cfg.Transport == nil {
		p.cfg.Transport = newTransport(cfg.UpstreamTimeout)
		inference = p.cfg.Transport
		if cfg.Upstream.Scheme == "http" {
			p.engine = newEngineTransport(cfg.UpstreamTimeout)
			inference = p.engine
		}
	}
	p.live.init()
	p.inferenceRT = inference
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(p.cfg.Upstream) },
		Transport:     p.cfg.Transport,
		FlushInterval: -1,
		ErrorHandler:  p.errorHandler,
		ErrorLog:      slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		BufferPool:    bufferPool{},
	}
	return p
}

// newTransport returns a transport for one upstream on the same host: many idle
// connections, no compression (bytes pass through as the engine sends them), HTTP/1.1.
func newTransport(headerTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   4096,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		DisableCompression:    true,
	}
}

// ServeHTTP forwards every request to the engine; POST requests to the routes of
// wire.RouteOf are inspected, admitted by prompt size, measured and reported.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := wire.RouteOf(r.URL.Path)
	if route == wire.RouteUnknown || r.Method != http.MethodPost {
		p.passThrough(w, r)
		return
	}
	ex, ok := p.open(w, r, route)
	if !ok {
		return
	}
	// The request's own context, which the idle watch and Shutdown may cancel: it bounds
	// the wait in admission's queue and the upstream request. A stream that may be
	// detached needs one that outlives the handler, which follows the client's instead.
	parent := r.Context()
	if p.det != nil {
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, exchangeKey{}, ex))
	ex.ctx, ex.cancel = ctx, cancel
	if p.det != nil {
		ex.follow()
	}
	ex.live = p.live.enter(cancel)
	defer func() {
		if !ex.detached { // a detached stream's goroutine ends it
			ex.unfollow()
			p.close(ex)
			cancel(nil)
		}
	}()
	if !p.admit(w, ex) {
		return
	}
	p.forward(w, ex)
}

// ErrShutdown is the cause with which Shutdown cancels the requests in flight.
var ErrShutdown = errors.New("proxy: slogate is shutting down")

// Shutdown cuts short every inference request in flight, for a server whose grace
// period to drain has run out, and returns how many it cut. A request waiting in
// admission's queue or for the engine's response headers gets 503; a stream ends with
// an OpenAI error event and an aborted connection, so no client takes it for complete.
// Each is reported with the Shutdown outcome once its handler returns, which the
// caller should give a moment (http.Server.Shutdown again, briefly) before it closes
// the connections. Requests that arrive afterwards are served as usual.
func (p *Proxy) Shutdown() int { return p.live.cutAll(ErrShutdown) }

// bufferPool recycles the copy buffers of the ReverseProxy of the routes passed through,
// and of the proxy's copy of non-streaming answers: 4 KiB (what the client connection's
// own write buffer holds) rather than ReverseProxy's default 32.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// CloseIdleConnections closes the engine connections the proxy keeps open between
// requests (those of its own transports, or of Config.Transport when it can).
func (p *Proxy) CloseIdleConnections() {
	if c, ok := p.cfg.Transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	if p.engine != nil {
		p.engine.CloseIdleConnections()
	}
}
