package synth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slogate/slogate/enginesim"
)

// The prober's tests run it against the engine simulator (package enginesim) served by
// httptest, or against small httptest upstreams for answers the simulator never gives.

// simProfile returns the built-in profile called name, changed by edit when it is not nil.
func simProfile(t testing.TB, name string, edit func(*enginesim.Profile)) enginesim.Profile {
	t.Helper()
	p, err := enginesim.LookupProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	return p
}

// sim is one simulated engine served over HTTP for the duration of a test.
type sim struct {
	srv  *enginesim.Server
	url  string
	wire *wireClock
}

// runSim starts the engine of a simulator for cfg (the tiny profile when cfg has none)
// and stops it when the test ends. Serve its Handler with upstream (or httptest) after
// calling runSim, so that the HTTP server, closed first, waits for the handlers.
func runSim(t testing.TB, cfg enginesim.Config) *enginesim.Server {
	t.Helper()
	if cfg.Profile.Name == "" {
		cfg.Profile = simProfile(t, "tiny", nil)
	}
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
	return srv
}

// startSim starts a simulator for cfg served over HTTP, behind a wireClock, until the
// test ends.
func startSim(t testing.TB, cfg enginesim.Config) *sim {
	t.Helper()
	srv := runSim(t, cfg)
	wc := &wireClock{h: srv.Handler()}
	hs := httptest.NewServer(wc)
	t.Cleanup(hs.Close)
	return &sim{srv: srv, url: hs.URL, wire: wc}
}

// target returns a Target for the simulator's model.
func (s *sim) target(t testing.TB, model string) *Target {
	return newTarget(t, s.url, model)
}

// newTarget returns a Target for baseURL with its own connection pool, closed when the
// test ends so that no connection goroutine outlives it.
func newTarget(t testing.TB, baseURL, model string) *Target {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	tr.MaxIdleConns = 0
	t.Cleanup(tr.CloseIdleConnections)
	return &Target{BaseURL: baseURL, Model: model, Client: &http.Client{Transport: tr}}
}

// withFaults is an http.RoundTripper that adds the simulator's fault header to every
// request: a real transport with one header more, not a mock.
type withFaults struct {
	rt     http.RoundTripper
	faults string
}

func (f withFaults) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(enginesim.FaultHeader, f.faults)
	return f.rt.RoundTrip(r)
}

// faulty returns a target like t whose requests carry the fault directives.
func faulty(t *Target, faults string) *Target {
	return &Target{
		BaseURL: t.BaseURL, Model: t.Model, APIKey: t.APIKey, Clock: t.Clock, Timeout: t.Timeout, Route: t.Route,
		Client: &http.Client{Transport: withFaults{rt: t.Client.Transport, faults: faults}},
	}
}

// histogram is the sum and count of one histogram of an engine's /metrics.
type histogram struct{ sum, count float64 }

// scrapeHistograms reads the sums and counts of the named histograms from baseURL/metrics.
func scrapeHistograms(t testing.TB, client *http.Client, baseURL string, names ...string) map[string]histogram {
	t.Helper()
	resp, err := client.Get(strings.TrimRight(baseURL, "/") + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]histogram{}
	for _, n := range names {
		f, ok := families[n]
		if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
			t.Fatalf("/metrics has no single histogram %s", n)
		}
		h := f.GetMetric()[0].GetHistogram()
		out[n] = histogram{sum: h.GetSampleSum(), count: float64(h.GetSampleCount())}
	}
	return out
}
