package proxy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/signal"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// The shared setup of the proxy tests: a simulated engine (or a plain httptest upstream)
// served over HTTP, slogate in front of it on its own httptest server, and an Observer
// that keeps every result the proxy reports.

const simModel = "sim-tiny"

// observed is one call of Observe.
type observed struct {
	req wire.Request
	res measure.Result
}

// observer keeps what the proxy reports: every result, or the last keep results when
// keep > 0. Safe for concurrent use.
type observer struct {
	keep    int
	mu      sync.Mutex
	got     []observed
	n       int            // results observed in all
	changed signal.Changed // of n
}

var _ proxy.Observer = (*observer)(nil)

func (o *observer) Observe(req wire.Request, res measure.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keep > 0 && len(o.got) == o.keep {
		o.got = append(o.got[:0], o.got[1:]...)
	}
	o.got = append(o.got, observed{req: req, res: res})
	o.n++
	o.changed.Broadcast()
}

func (o *observer) all() []observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observed(nil), o.got...)
}

func (o *observer) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// wait waits until n results have been observed and returns them, failing the test when
// there are more. The proxy reports a request after its response ended, which a client
// reading a body with a Content-Length may see first, hence the wait.
func (o *observer) wait(t testing.TB, n int) []observed {
	t.Helper()
	o.last(t, n)
	return o.all()
}

// last waits until n results have been observed and returns the last, failing the test
// when there are more.
func (o *observer) last(t testing.TB, n int) observed {
	t.Helper()
	awaitCount(t, "observed requests", &o.mu, &o.n, &o.changed, n)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n != n {
		t.Fatalf("observed %d requests, want %d: %+v", o.n, n, o.got)
	}
	return o.got[len(o.got)-1]
}

// sim is one simulated engine served over HTTP for the duration of a test.
type sim struct {
	srv *enginesim.Server
	hs  *httptest.Server

	mu       sync.Mutex
	requests int            // HTTP requests the simulator got
	arrived  signal.Changed // of requests
}

// tinyProfile returns the simulator's tiny profile, changed by edit when it is not nil.
func tinyProfile(t testing.TB, edit func(*enginesim.Profile)) enginesim.Profile {
	t.Helper()
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	return p
}

// startSim starts a simulator for cfg (the tiny profile when cfg has none) and stops it
// when the test ends: the HTTP server first (it waits for the handlers), then the engine.
func startSim(t testing.TB, cfg enginesim.Config) *sim {
	t.Helper()
	if cfg.Profile.Name == "" {
		cfg.Profile = tinyProfile(t, nil)
	}
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	s := &sim{srv: srv}
	s.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		s.arrived.Broadcast()
		s.mu.Unlock()
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.hs.Close()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("simulator Run returned %v, want nil", err)
		}
	})
	return s
}

// awaitRequests waits until the simulator has got n HTTP requests (not necessarily
// queued yet: a fault's delay comes first).
func (s *sim) awaitRequests(t testing.TB, n int) {
	t.Helper()
	awaitCount(t, "requests at the simulator", &s.mu, &s.requests, &s.arrived, n)
}

// await returns once cond holds for the simulator's stats, checked at each change of the
// engine's state (enginesim.Server.Await), and fails the test with what cond last said
// if it does not hold within hangLimit.
func (s *sim) await(t testing.TB, what string, cond func(enginesim.Stats) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	var state string
	if _, err := s.srv.Await(ctx, func(st enginesim.Stats) bool {
		var ok bool
		ok, state = cond(st)
		return ok
	}); err != nil {
		t.Fatalf("%s: %v; last state: %s", what, err, state)
	}
}

// aborted returns how many requests the simulator has aborted so far.
func (s *sim) aborted() int64 { return s.srv.Stats().FinishedByReason["abort"] }

// front is slogate in front of an upstream, with an observer.
type front struct {
	p      *proxy.Proxy
	hs     *httptest.Server
	obs    *observer
	ledger *admission.Controller // the proxy's admission control, whose ledger counts its requests in flight

	hijacked atomic.Int64 // client connections the proxy took over from net/http (detached streams)
}

// startProxy serves a proxy for upstream (a base URL) configured by cfg, with an observer
// added, until the test ends. Start the upstream first, so that the proxy's server (which
// waits for its handlers) closes before the upstream does.
func startProxy(t testing.TB, upstream string, cfg proxy.Config) *front {
	t.Helper()
	return startProxyKeeping(t, upstream, cfg, 0)
}

// startProxyKeeping is startProxy with an observer that keeps only the last keep results
// (all when keep is 0). Without cfg.Admission the proxy gets admission control in Off
// mode, as `slogate serve --admission=off` wires it, so that its ledger can be read.
func startProxyKeeping(t testing.TB, upstream string, cfg proxy.Config, keep int) *front {
	t.Helper()
	return startProxyServer(t, upstream, cfg, keep, nil)
}

// startProxyServer is startProxyKeeping with the proxy's HTTP server changed by edit (when
// not nil) before it starts.
func startProxyServer(t testing.TB, upstream string, cfg proxy.Config, keep int, edit func(*http.Server)) *front {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	var ledger *admission.Controller
	switch a := cfg.Admission.(type) {
	case nil:
		ledger = newAdmission(t, admission.Off, admission.DefaultConfig())
		cfg.Admission = ledger
	case *admission.Controller:
		ledger = a
	default:
		t.Fatalf("admission control %T has no ledger to check", a)
	}
	obs := &observer{keep: keep}
	cfg.Upstream = u
	cfg.Observers = append(cfg.Observers, obs)
	p := proxy.New(cfg)
	hs := httptest.NewUnstartedServer(p)
	f := &front{p: p, hs: hs, obs: obs, ledger: ledger}
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			f.hijacked.Add(1)
		}
	}
	if edit != nil {
		edit(hs.Config)
	}
	// Streams are detached from net/http's connections, as `slogate serve` runs them.
	if err := p.Detach(hs.Config); err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(func() {
		// Shut down first: it stops the connections of ended streams from returning to
		// the server while httptest's Close counts the server's connections.
		ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
		defer cancel()
		if err := hs.Config.Shutdown(ctx); err != nil {
			t.Errorf("shutting the proxy's server down: %v", err)
		}
		if err := p.WaitDetached(ctx); err != nil {
			t.Errorf("detached streams still running after the test: %v", err)
		}
		p.CloseDetached()
		hs.Close()
	})
	return f
}

// newAdmission returns admission control in mode for cfg, with the SLOs of the tests.
func newAdmission(t testing.TB, mode admission.Mode, cfg admission.Config) *admission.Controller {
	t.Helper()
	c, err := admission.New(cfg, admission.Options{Mode: mode, SLO: measure.NewSLO(2*time.Second, 100*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startEnv starts a simulator for simCfg and a proxy with InjectUsage in front of it.
func startEnv(t testing.TB, simCfg enginesim.Config) (*sim, *front) {
	t.Helper()
	s := startSim(t, simCfg)
	return s, startProxy(t, s.hs.URL, proxy.Config{InjectUsage: true})
}

// do sends a request (with a JSON body unless body is "") and returns the status, the
// headers and the whole response body.
func do(t testing.TB, client *http.Client, method, target, body string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	resp := send(context.Background(), t, client, method, target, body, header)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, target, err)
	}
	return resp.StatusCode, resp.Header, data
}

// send sends a request and returns the response, whose body the caller closes.
func send(ctx context.Context, t testing.TB, client *http.Client, method, target, body string, header http.Header) *http.Response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return resp
}

// fault is a header that sets simulator faults for one request.
func fault(directives string) http.Header {
	return http.Header{enginesim.FaultHeader: {directives}}
}

// sseRead is an event stream as a client read it with wire.SSEReader.
type sseRead struct {
	chunks []wire.Chunk // decoded data events (others are skipped)
	done   bool         // data: [DONE] arrived
	err    error        // what ended reading; nil for a clean end of the body
}

// outputs returns the number of chunks that carried output.
func (s sseRead) outputs() int {
	n := 0
	for i := range s.chunks {
		if s.chunks[i].OutputBytes() > 0 {
			n++
		}
	}
	return n
}

// readSSE reads events from r until it ends or stop returns true after a chunk.
func readSSE(r io.Reader, stop func(sseRead) bool) sseRead {
	var out sseRead
	sr := wire.NewSSEReader(r, 4<<20)
	for {
		ev, err := sr.Next()
		if err != nil {
			if err != io.EOF {
				out.err = err
			}
			return out
		}
		switch {
		case ev.Comment:
			continue
		case ev.IsDone():
			out.done = true
			continue
		}
		c, err := wire.DecodeChunk(ev.Data)
		if err != nil {
			continue
		}
		out.chunks = append(out.chunks, c)
		if stop != nil && stop(out) {
			return out
		}
	}
}

// hangLimit turns a hang into a failure. It bounds waits that end as soon as the code
// does what it should; nothing is asserted about time.
const hangLimit = 30 * time.Second

// accessLog is a slog.Handler for the proxy's Logger that counts its access-log records
// ("request"). The proxy writes one per inference request once the request has left the
// in-flight count and been reported: for a probe too, which no observer sees.
type accessLog struct {
	mu      sync.Mutex
	n       int
	changed signal.Changed // of n
}

func (l *accessLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *accessLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *accessLog) WithGroup(string) slog.Handler            { return l }

func (l *accessLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "request" {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.n++
		l.changed.Broadcast()
	}
	return nil
}

// await waits until n requests have been logged.
func (l *accessLog) await(t testing.TB, n int) {
	t.Helper()
	awaitCount(t, "access-log records", &l.mu, &l.n, &l.changed, n)
}

// awaitCount waits until the count *n, guarded by mu and announced by changed, reaches
// want, failing the test after hangLimit.
func awaitCount(t testing.TB, what string, mu *sync.Mutex, n *int, changed *signal.Changed, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	got, err := signal.Await(ctx, func() (int, <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return *n, changed.C()
	}, func(got int) bool { return got >= want })
	if err != nil {
		t.Fatalf("%s: %d, want %d: %v", what, got, want, err)
	}
}

// eventually polls cond until it holds, failing the test with what it last reported
// after a generous deadline. It asserts no timing: only that the condition is reached.
// It is for what announces no change: admission's queue, and the goroutines and file
// descriptors of closed connections; everything else is awaited (awaitCount, sim.await).
// The pause between polls grows from 50µs to 5ms.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, 5*time.Millisecond) {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 10s; last state: %s", what, state)
		}
		time.Sleep(pause)
	}
}

// apiError decodes an OpenAI error body, failing the test if it is not one.
func apiError(t testing.TB, body []byte) wire.APIError {
	t.Helper()
	e, err := wire.DecodeError(body)
	if err != nil {
		t.Fatalf("not an OpenAI error body: %v: %s", err, body)
	}
	if e.Message == "" {
		t.Errorf("error without a message: %s", body)
	}
	return e
}

// histogram is the sum and count of one Prometheus histogram.
type histogram struct {
	sum   float64
	count uint64
}

// scrapeHistograms reads the histograms of a /metrics page.
func scrapeHistograms(t testing.TB, client *http.Client, target string) map[string]histogram {
	t.Helper()
	status, _, body := do(t, client, http.MethodGet, target, "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d", target, status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing %s: %v", target, err)
	}
	out := make(map[string]histogram)
	for name, f := range families {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				out[name] = histogram{sum: h.GetSampleSum(), count: h.GetSampleCount()}
			}
		}
	}
	return out
}

// capture is what a plain upstream saw of one request.
type capture struct {
	method, path string
	header       http.Header
	length       int64 // the request's ContentLength
	body         []byte
}

// upstream is a plain httptest server that records requests and answers them with
// answer. It keeps the last keepCaptures requests and counts all.
type upstream struct {
	hs      *httptest.Server
	mu      sync.Mutex
	rs      []capture
	n       int
	arrived signal.Changed // of n
}

const keepCaptures = 16

func startUpstream(t testing.TB, answer http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		if len(u.rs) == keepCaptures {
			u.rs = append(u.rs[:0], u.rs[1:]...)
		}
		u.rs = append(u.rs, capture{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), length: r.ContentLength, body: body})
		u.n++
		u.arrived.Broadcast()
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer(w, r)
	}))
	t.Cleanup(u.hs.Close)
	return u
}

// await waits until the upstream has got n requests.
func (u *upstream) await(t testing.TB, n int) {
	t.Helper()
	awaitCount(t, "requests at the upstream", &u.mu, &u.n, &u.arrived, n)
}

// count returns how many requests the upstream got.
func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n
}

// requests returns the last requests the upstream got.
func (u *upstream) requests() []capture {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]capture(nil), u.rs...)
}

// replay answers with body as an event stream, flushed in pieces of at most piece bytes
// (all at once when piece is 0).
func replay(body []byte, piece int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if piece <= 0 {
			piece = len(body)
		}
		for rest := body; len(rest) > 0; {
			n := min(piece, len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			_ = rc.Flush()
			rest = rest[n:]
		}
	}
}
