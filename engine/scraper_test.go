package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/slogate/slogate/clock"
)

// epoch is where the tests' fake clocks start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeEngine is an engine endpoint whose answers the test changes between scrapes.
type fakeEngine struct {
	mu          sync.Mutex
	metrics     string // the /metrics body
	contentType string // of /metrics; text 0.0.4 if empty
	status      int    // of /metrics; 200 if 0
	models      []string
	modelsDown  bool // /v1/models answers 503
	health      int  // the status of /health; 404 (no such endpoint) if 0

	metricsHits, modelsHits, healthHits atomic.Int64
	accept                              atomic.Value // the Accept header of the last /metrics request
}

func (e *fakeEngine) set(f func(e *fakeEngine)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

func (e *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r.URL.Path {
	case "/metrics":
		e.metricsHits.Add(1)
		e.accept.Store(r.Header.Get("Accept"))
		ct := e.contentType
		if ct == "" {
			ct = "text/plain; version=0.0.4; charset=utf-8"
		}
		w.Header().Set("Content-Type", ct)
		if e.status != 0 {
			w.WriteHeader(e.status)
		}
		fmt.Fprint(w, e.metrics)
	case "/v1/models":
		e.modelsHits.Add(1)
		if e.modelsDown {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var cards []string
		for _, m := range e.models {
			cards = append(cards, fmt.Sprintf(`{"id":%q,"object":"model","owned_by":"vllm"}`, m))
		}
		fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(cards, ","))
	case "/health":
		e.healthHits.Add(1)
		if e.health == 0 {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(e.health)
	default:
		http.NotFound(w, r)
	}
}

// startFake serves e and returns a scraper of it with a fake clock.
func startFake(t *testing.T, e *fakeEngine, kind Kind) (*Scraper, *clock.Fake, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	clk := clock.NewFake(epoch)
	sc := NewScraper(ScraperConfig{BaseURL: srv.URL + "/", Kind: kind, Clock: clk, Timeout: 10 * time.Second})
	return sc, clk, srv
}

// TestLatestBeforeFirstScrape checks the snapshot a new Scraper holds.
func TestLatestBeforeFirstScrape(t *testing.T) {
	for _, kind := range []Kind{KindAuto, KindVLLM, KindSGLang} {
		t.Run(kind.String(), func(t *testing.T) {
			sc := NewScraper(ScraperConfig{BaseURL: "http://127.0.0.1:1", Kind: kind})
			s := sc.Latest()
			if s.Up || !errors.Is(s.Err, ErrNotScraped) || !s.At.IsZero() || s.Kind != kind || s.Models != nil {
				t.Errorf("Latest() = %+v", s)
			}
			for name, v := range fields(s) {
				if Known(v) {
					t.Errorf("%s = %v, want unknown", name, v)
				}
			}
			if age := s.Age(time.Now()); age != time.Duration(math.MaxInt64) {
				t.Errorf("Age = %v, want the maximum", age)
			}
		})
	}
}

// TestScrapeClockAndModels checks At, Age, the Accept header, and that /v1/models is
// read again only once modelsEvery has passed.
func TestScrapeClockAndModels(t *testing.T) {
	e := &fakeEngine{metrics: string(fixture(t, "vllm_v1_dp.prom")), models: []string{"llama"}}
	sc, clk, _ := startFake(t, e, KindAuto)
	ctx := context.Background()
	t0 := clk.Now()

	s := sc.Scrape(ctx)
	if !s.Up || s.Err != nil || !s.At.Equal(t0) || !slices.Equal(s.Models, []string{"llama"}) {
		t.Fatalf("first scrape = %+v", s)
	}
	if got := e.accept.Load(); got != "text/plain;version=0.0.4" {
		t.Errorf("Accept = %q", got)
	}
	if age := s.Age(t0.Add(1500 * time.Millisecond)); age != 1500*time.Millisecond {
		t.Errorf("Age = %v, want 1.5s", age)
	}

	e.set(func(e *fakeEngine) { e.models = []string{"llama", "lora-a"} })
	steps := []struct {
		advance    time.Duration
		modelsHits int64
		models     []string
	}{
		{30 * time.Second, 1, []string{"llama"}},                 // t0+30s: still fresh
		{30*time.Second - time.Nanosecond, 1, []string{"llama"}}, // just under a minute
		{time.Nanosecond, 2, []string{"llama", "lora-a"}},        // t0+60s: read again
		{59 * time.Second, 2, []string{"llama", "lora-a"}},       // fresh from t0+60s
	}
	for i, st := range steps {
		clk.Step(st.advance)
		s := sc.Scrape(ctx)
		if !s.Up || !s.At.Equal(clk.Now()) || s.Age(clk.Now()) != 0 {
			t.Errorf("step %d: Up %v, At %v, want %v", i, s.Up, s.At, clk.Now())
		}
		if got := e.modelsHits.Load(); got != st.modelsHits {
			t.Errorf("step %d: /v1/models read %d times, want %d", i, got, st.modelsHits)
		}
		if !slices.Equal(s.Models, st.models) {
			t.Errorf("step %d: Models = %v, want %v", i, s.Models, st.models)
		}
	}
	if got := e.metricsHits.Load(); got != int64(len(steps)+1) {
		t.Errorf("/metrics read %d times, want %d", got, len(steps)+1)
	}

	// A failing /v1/models keeps the names known before and is retried on every scrape.
	e.set(func(e *fakeEngine) { e.modelsDown = true; e.models = []string{"other"} })
	clk.Step(time.Hour)
	for range 2 {
		if s := sc.Scrape(ctx); !s.Up || !slices.Equal(s.Models, []string{"llama", "lora-a"}) {
			t.Errorf("with /v1/models down: %+v", s)
		}
	}
	if got := e.modelsHits.Load(); got != 4 {
		t.Errorf("/v1/models read %d times, want 4", got)
	}
	e.set(func(e *fakeEngine) { e.modelsDown = false })
	if s := sc.Scrape(ctx); !slices.Equal(s.Models, []string{"other"}) {
		t.Errorf("after /v1/models recovers: Models = %v", s.Models)
	}
}

// TestScrapeDown checks that a failed scrape marks the engine down, says why, and keeps
// the last good measurements and their time.
func TestScrapeDown(t *testing.T) {
	good := string(fixture(t, "vllm_v1_dp.prom"))
	tests := []struct {
		name    string
		breakIt func(e *fakeEngine, srv *httptest.Server)
		err     error  // errors.Is
		msg     string // in the error text
	}{
		{
			name:    "closed port",
			breakIt: func(_ *fakeEngine, srv *httptest.Server) { srv.Close() },
			msg:     "connect",
		},
		{
			name:    "500",
			breakIt: func(e *fakeEngine, _ *httptest.Server) { e.status = http.StatusInternalServerError },
			err:     ErrStatus,
			msg:     "500 Internal Server Error",
		},
		{
			name:    "garbage",
			breakIt: func(e *fakeEngine, _ *httptest.Server) { e.metrics = "<html><body>Bad Gateway</body></html>\n" },
			err:     ErrMalformed,
		},
		{
			name:    "another exposition",
			breakIt: func(e *fakeEngine, _ *httptest.Server) { e.metrics = string(fixture(t, "none.prom")) },
			err:     ErrUnrecognised,
		},
		{
			name:    "another engine",
			breakIt: func(e *fakeEngine, _ *httptest.Server) { e.metrics = string(fixture(t, "sglang_cache_config.prom")) },
			err:     ErrUnrecognised,
		},
		{
			name: "OpenMetrics with an exemplar",
			breakIt: func(e *fakeEngine, _ *httptest.Server) {
				e.contentType = "application/openmetrics-text; version=1.0.0; charset=utf-8"
				e.metrics = "vllm:num_requests_running 1 # {trace_id=\"a\"} 1\n# EOF\n"
			},
			err: ErrMalformed,
			msg: "application/openmetrics-text",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeEngine{metrics: good, models: []string{"llama"}}
			sc, clk, srv := startFake(t, e, KindVLLM)
			ctx := context.Background()
			first := sc.Scrape(ctx)
			if !first.Up {
				t.Fatalf("first scrape: %v", first.Err)
			}
			clk.Step(5 * time.Second)
			e.set(func(e *fakeEngine) { tt.breakIt(e, srv) })

			down := sc.Scrape(ctx)
			if down.Up || down.Err == nil {
				t.Fatalf("scrape of a broken engine = %+v", down)
			}
			if tt.err != nil && !errors.Is(down.Err, tt.err) {
				t.Errorf("Err = %v, want %v", down.Err, tt.err)
			}
			if !strings.Contains(down.Err.Error(), tt.msg) {
				t.Errorf("Err = %q, want it to mention %q", down.Err, tt.msg)
			}
			if !down.At.Equal(first.At) || down.Age(clk.Now()) != 5*time.Second {
				t.Errorf("At = %v, want %v from the last good scrape", down.At, first.At)
			}
			for _, d := range measurementDiff(down, first) {
				t.Errorf("measurements not kept: %s", d)
			}
			if !slices.Equal(down.Models, first.Models) {
				t.Errorf("Models = %v, want %v", down.Models, first.Models)
			}
			if latest := sc.Latest(); latest.Up || latest.Err != down.Err {
				t.Errorf("Latest() = %+v, want the down snapshot", latest)
			}
		})
	}
}

// counters is a vLLM exposition with the counter pairs that give ratios: prefix-cache
// hits and queries, accepted draft tokens and draft tokens (with one draft per 4 draft
// tokens).
func counters(hits, queries, accepted, drafted float64) string {
	return vllmText(
		`vllm:num_requests_running{engine="0"} 0`,
		fmt.Sprintf(`vllm:prefix_cache_hits_total{engine="0"} %v`, hits),
		fmt.Sprintf(`vllm:prefix_cache_queries_total{engine="0"} %v`, queries),
		fmt.Sprintf(`vllm:spec_decode_num_accepted_tokens_total{engine="0"} %v`, accepted),
		fmt.Sprintf(`vllm:spec_decode_num_draft_tokens_total{engine="0"} %v`, drafted),
		fmt.Sprintf(`vllm:spec_decode_num_drafts_total{engine="0"} %v`, drafted/4),
	)
}

// TestScrapeWindowRatio checks that the ratios cover about the last minute on the
// scraper's clock: not the engine's whole life, not one scrape interval; unknown on the
// first reading, after a restart and when the window saw no traffic.
func TestScrapeWindowRatio(t *testing.T) {
	e := &fakeEngine{}
	sc, clk, _ := startFake(t, e, KindAuto)
	ctx := context.Background()
	steps := []struct {
		after        time.Duration // clock advance before the scrape
		metrics      string        // "" the engine answers 503
		prefix, spec float64
	}{
		{0, counters(100, 400, 10, 100), nan, nan},                 // first: no window yet
		{10 * time.Second, counters(400, 1000, 70, 200), 0.5, 0.6}, // 300/600, 60/100
		{10 * time.Second, "", 0, 0},                               // engine down: no reading kept
		{10 * time.Second, counters(700, 1600, 70, 200), 0.5, 0.6}, // from the first: 600/1200, 60/100
		// 60 s after the first: the window starts there, not at the previous scrape
		// (which would give 0/0) and includes all of the last minute.
		{30 * time.Second, counters(700, 1600, 70, 200), 0.5, 0.6},
		// The first reading is out: the base is the newest one at least a minute old,
		// the second (t=10 s), not the first one ever (which would give 0.5, 0.6).
		{10 * time.Second, counters(1000, 1800, 90, 400), 600.0 / 800, 20.0 / 200},
		{50 * time.Second, counters(10, 20, 1, 10), nan, nan}, // restart: no window
		{5 * time.Second, counters(10, 20, 1, 10), nan, nan},  // idle since: unknown
		{5 * time.Second, counters(10, 120, 1, 110), 0, 0},    // traffic, nothing hit
	}
	for i, st := range steps {
		clk.Step(st.after)
		if st.metrics == "" {
			e.set(func(e *fakeEngine) { e.status = http.StatusServiceUnavailable })
			if s := sc.Scrape(ctx); s.Up {
				t.Fatalf("step %d: up with a 503", i)
			}
			e.set(func(e *fakeEngine) { e.status = 0 })
			continue
		}
		e.set(func(e *fakeEngine) { e.metrics = st.metrics })
		s := sc.Scrape(ctx)
		if !s.Up || !floatEq(s.PrefixHitRatio, st.prefix) || !floatEq(s.SpecAcceptRate, st.spec) {
			t.Errorf("step %d: up %v, ratios %v, %v; want %v, %v (%v)", i, s.Up, s.PrefixHitRatio, s.SpecAcceptRate, st.prefix, st.spec, s.Err)
		}
		if wantLen := 1 + 4*st.spec; !floatEq(s.SpecAcceptLength, wantLen) {
			t.Errorf("step %d: SpecAcceptLength %v, want %v", i, s.SpecAcceptLength, wantLen)
		}
	}
}

// TestScrapeBodyLimit checks that a body over the limit is refused as too large rather
// than parsed in part: here the limit falls on a line boundary, where the prefix alone
// would parse as a valid exposition with fewer engines.
func TestScrapeBodyLimit(t *testing.T) {
	body := string(fixture(t, "vllm_v1_dp.prom"))
	cut := strings.Index(body, `vllm:num_requests_running{engine="1"`)
	tests := []struct {
		name  string
		limit int64
		err   error
	}{
		{"body at the limit", int64(len(body)), nil},
		{"one byte over", int64(len(body)) - 1, ErrTooLarge},
		{"cut on a line boundary", int64(cut), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, _, _ := startFake(t, &fakeEngine{metrics: body}, KindAuto)
			sc.maxBody = tt.limit
			s := sc.Scrape(context.Background())
			if !errors.Is(s.Err, tt.err) || s.Up != (tt.err == nil) {
				t.Fatalf("Scrape = up %v, err %v; want err %v", s.Up, s.Err, tt.err)
			}
			if tt.err != nil && !strings.Contains(s.Err.Error(), fmt.Sprintf("exceeds %d bytes", tt.limit)) {
				t.Errorf("Err = %q, want it to say the body was too large", s.Err)
			}
			if tt.err == nil && s.Running != 19 {
				t.Errorf("Running = %v, want 19", s.Running)
			}
		})
	}
	if sc := NewScraper(ScraperConfig{BaseURL: "http://x"}); sc.maxBody != maxExposition {
		t.Errorf("default limit %d, want %d", sc.maxBody, maxExposition)
	}
}

// TestScrapeOpenMetrics checks an engine that answers in OpenMetrics although asked for
// text, as prometheus_client does when a client prefers it.
func TestScrapeOpenMetrics(t *testing.T) {
	e := &fakeEngine{
		metrics:     string(fixture(t, "vllm_v1_openmetrics.prom")),
		contentType: "application/openmetrics-text; version=1.0.0; charset=utf-8",
	}
	sc, _, _ := startFake(t, e, KindAuto)
	s := sc.Scrape(context.Background())
	if !s.Up {
		t.Fatalf("Scrape: %v", s.Err)
	}
	for _, d := range measurementDiff(s, want(KindVLLM, 1, 2, 0.0625, 65536, nan, 3, nan)) {
		t.Error(d)
	}
}

// TestRunStops checks that Run scrapes until its context is cancelled and then returns
// (goleak in TestMain checks that nothing is left running).
func TestRunStops(t *testing.T) {
	const interval = time.Second
	e := &fakeEngine{metrics: string(fixture(t, "sglang_cache_config.prom"))}
	srv := httptest.NewServer(e)
	defer srv.Close()
	clk := clock.NewFake(epoch)
	sc := NewScraper(ScraperConfig{BaseURL: srv.URL, Interval: interval, Timeout: 10 * time.Second, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	// One scrape at once, then one per tick of the interval, each stored at its time.
	wait, stop := context.WithTimeout(ctx, hangLimit)
	defer stop()
	for i := range 3 {
		if i > 0 {
			clk.Step(interval)
		}
		at := epoch.Add(time.Duration(i) * interval)
		if s, err := sc.Await(wait, func(s Snapshot) bool { return s.At.Equal(at) }); err != nil {
			t.Fatalf("scrape %d: %v; latest %+v", i+1, err, s)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if s := sc.Latest(); s.Kind != KindSGLang || !s.At.Equal(epoch.Add(2*interval)) || e.metricsHits.Load() != 3 {
		t.Errorf("Latest() after Run = %+v, %d scrapes", s, e.metricsHits.Load())
	}
}

// TestLimitedReader checks the body limit against readers that deliver the body in one
// piece, byte by byte, or with io.EOF alongside the last bytes.
func TestLimitedReader(t *testing.T) {
	readers := map[string]func(string) io.Reader{
		"whole":     func(s string) io.Reader { return strings.NewReader(s) },
		"byte":      func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"eof-early": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	tests := []struct {
		body  string
		limit int64
		err   error
	}{
		{"", 0, nil},
		{"a", 0, ErrTooLarge},
		{"abc", 3, nil},
		{"abc", 4, nil},
		{"abcd", 3, ErrTooLarge},
	}
	for name, mk := range readers {
		for _, tt := range tests {
			got, err := io.ReadAll(&limitedReader{r: mk(tt.body), n: tt.limit})
			if !errors.Is(err, tt.err) || (tt.err == nil && string(got) != tt.body) {
				t.Errorf("%s: %q with limit %d: %q, %v; want err %v", name, tt.body, tt.limit, got, err, tt.err)
			}
		}
	}
}

// TestScrapeBadModels checks that an unreadable /v1/models leaves Models unknown without
// marking the engine down, and that a bad base URL is a scrape error.
func TestScrapeBadModels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, counters(1, 2, 3, 4))
			return
		}
		fmt.Fprint(w, `{"data":[{"id":`)
	}))
	defer srv.Close()
	s := NewScraper(ScraperConfig{BaseURL: srv.URL}).Scrape(context.Background())
	if !s.Up || s.Models != nil {
		t.Errorf("with garbage from /v1/models: up %v, Models %v (%v)", s.Up, s.Models, s.Err)
	}

	s = NewScraper(ScraperConfig{BaseURL: "http://bad host"}).Scrape(context.Background())
	if s.Up || s.Err == nil {
		t.Errorf("with a bad base URL: %+v", s)
	}
}

// TestScraperSendsAPIKey: an engine started with --api-key answers /v1/models only with
// the bearer token, and the scraper sends it.
func TestScraperSendsAPIKey(t *testing.T) {
	const key = "sk-engine"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/v1/models" {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
			return
		}
		_, _ = io.WriteString(w, "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 1\n")
	}))
	defer srv.Close()
	snap := NewScraper(ScraperConfig{BaseURL: srv.URL, APIKey: key}).Scrape(context.Background())
	if !snap.Up || len(snap.Models) != 1 || snap.Models[0] != "m" {
		t.Errorf("with the API key: up=%v models=%v err=%v", snap.Up, snap.Models, snap.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range auth {
		if a != "Bearer "+key {
			t.Errorf("a request carried Authorization %q", a)
		}
	}
}
