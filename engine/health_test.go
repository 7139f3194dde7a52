package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
)

// TestScrapeHealth checks that an engine whose /metrics answers but whose /health does
// not (vLLM with a dead engine core, SGLang starting or failing its one-token check) is
// down, that it is up again once /health answers 200, that an engine without /health is
// up, and that a healthy engine's /health is asked once per healthEvery, not per scrape.
func TestScrapeHealth(t *testing.T) {
	e := &fakeEngine{metrics: "vllm:num_requests_waiting 1\n", health: http.StatusServiceUnavailable}
	sc, clk, _ := startFake(t, e, KindAuto)
	ctx := context.Background()
	if s := sc.Scrape(ctx); s.Up || !errors.Is(s.Err, ErrUnhealthy) {
		t.Fatalf("with /health 503: up %v, err %v; want down with ErrUnhealthy", s.Up, s.Err)
	}
	clk.Step(time.Second)
	if s := sc.Scrape(ctx); s.Up || e.healthHits.Load() != 2 {
		t.Errorf("an unhealthy engine is asked again on the next scrape: up %v, %d asks", s.Up, e.healthHits.Load())
	}
	e.set(func(e *fakeEngine) { e.health = http.StatusOK })
	clk.Step(time.Second)
	if s := sc.Scrape(ctx); !s.Up || s.Err != nil || s.Waiting != 1 {
		t.Fatalf("with /health 200: up %v, err %v, waiting %v; want up", s.Up, s.Err, s.Waiting)
	}
	asked := e.healthHits.Load()
	for range 9 { // 9 more scrapes a second apart: /health at most twice more
		clk.Step(time.Second)
		sc.Scrape(ctx)
	}
	if n := e.healthHits.Load() - asked; n < 1 || n > 2 {
		t.Errorf("/health asked %d times in 9 s of healthy scrapes, want once per %s", n, healthEvery)
	}
	e.set(func(e *fakeEngine) { e.health = 0 }) // 404: an engine without the endpoint
	clk.Step(healthEvery)
	if s := sc.Scrape(ctx); !s.Up {
		t.Errorf("an engine without /health: up %v, err %v; want up", s.Up, s.Err)
	}
}

// TestScrapeSimulatorStarting checks the scraper against the simulator while it starts:
// it serves /metrics but answers /health with 503 (as SGLang does while it starts), so
// the engine is down until it is ready.
func TestScrapeSimulatorStarting(t *testing.T) {
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	engine, err := enginesim.NewServer(enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang, NotReadyFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(engine.Handler())
	t.Cleanup(srv.Close)
	sc := NewScraper(ScraperConfig{BaseURL: srv.URL, Timeout: 10 * time.Second})
	if s := sc.Scrape(context.Background()); s.Up || !errors.Is(s.Err, ErrUnhealthy) {
		t.Errorf("a starting engine: up %v, err %v; want down with ErrUnhealthy", s.Up, s.Err)
	}
}
