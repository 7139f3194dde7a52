package exporter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// recordingWatcher records the names it is told of; for one goroutine.
type recordingWatcher []string

func (w *recordingWatcher) UnknownModel(name string) { *w = append(*w, name) }

// TestUnknownModelsTold checks which lookups tell the watcher: names not served only.
func TestUnknownModelsTold(t *testing.T) {
	tests := []struct {
		name   string
		served func() []string
		model  string
		told   []string
	}{
		{"served", served("a", "b"), "b", nil},
		{"not served", served("a", "b"), "c", []string{"c"}},
		{"empty, one served", served("a"), "", nil},
		{"empty, two served", served("a", "b"), "", nil},
		{"no served list", nil, "a", []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w recordingWatcher
			m, _ := newMetrics(t, Options{ServedModels: tc.served, UnknownModels: &w})
			m.Model(tc.model)
			if got := []string(w); !slices.Equal(got, tc.told) {
				t.Errorf("told %q, want %q", got, tc.told)
			}
		})
	}
	// A nil pointer in the interface counts as absent.
	m, _ := newMetrics(t, Options{ServedModels: served("a"), UnknownModels: (*engine.Scraper)(nil)})
	if got := m.Model("b"); got != OtherModel {
		t.Errorf("Model(b) = %q", got)
	}
}

// adapterEngine is an engine endpoint whose /v1/models lists a LoRA adapter once the
// test loads it, as vLLM lists adapters loaded with POST /v1/load_lora_adapter.
type adapterEngine struct {
	mu     sync.Mutex
	loaded bool
}

func (e *adapterEngine) load() { e.mu.Lock(); e.loaded = true; e.mu.Unlock() }

func (e *adapterEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r.URL.Path {
	case "/metrics":
		fmt.Fprintln(w, `vllm:num_requests_running{model_name="llama",engine="0"} 0`)
	case "/v1/models":
		cards := []string{`{"id":"llama","object":"model","root":"llama","parent":null}`}
		if e.loaded {
			cards = append(cards, `{"id":"sql-lora","object":"model","root":"/adapters/sql","parent":"llama"}`)
		}
		fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(cards, ","))
	default:
		http.NotFound(w, r)
	}
}

// TestAdapterLabelledAfterReread checks the model label of requests for an adapter
// loaded at run time: the first request's lookup makes the scraper read /v1/models
// again, and the adapter's requests are recorded under its name from then on, though
// the scraper's clock never reaches its minutely read.
func TestAdapterLabelledAfterReread(t *testing.T) {
	e := &adapterEngine{}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	clk := clock.NewFake(time.Unix(1000, 0)) // never advanced
	sc := engine.NewScraper(engine.ScraperConfig{BaseURL: srv.URL, Clock: clk, Timeout: 10 * time.Second})
	if s := sc.Scrape(context.Background()); !s.Up || !slices.Equal(s.Models, []string{"llama"}) {
		t.Fatalf("first scrape: %+v", s)
	}
	m, reg := newMetrics(t, Options{ServedModels: func() []string { return sc.Latest().Models }, UnknownModels: sc})

	e.load()
	req := wire.Request{Route: wire.RouteCompletions, Model: "sql-lora"}
	res := measure.Result{Route: wire.RouteCompletions, Status: 200, Outcome: measure.OK, E2E: time.Second}
	// The first request is for a model the scraper does not list yet: it is recorded as
	// another model's, and makes the scraper read /v1/models again.
	m.Observe(req, res)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang, not a time, fails
	defer cancel()
	if s, err := sc.Await(ctx, func(s engine.Snapshot) bool { return slices.Contains(s.Models, "sql-lora") }); err != nil {
		t.Fatalf("the re-read never listed the adapter: %v (%v)", err, s.Models)
	}
	if got := m.Model("sql-lora"); got != "sql-lora" {
		t.Fatalf("requests for the adapter still recorded as %q", got)
	}
	m.Observe(req, res)
	key := `slogate_requests_total{code="200",model="sql-lora",outcome="ok",route="completions",tier="none"}`
	if got := samples(t, reg, "slogate_requests_total")[key]; got != 1 {
		t.Errorf("%s = %v, want 1; have %v", key, got, samples(t, reg, "slogate_requests_total"))
	}
}
