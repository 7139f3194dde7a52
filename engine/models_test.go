package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
)

// gatedModels holds every /v1/models request of e until the test sends on (or closes)
// open, so that a read can be kept in flight.
type gatedModels struct {
	e    *fakeEngine
	open chan struct{}
}

func (g gatedModels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		<-g.open
	}
	g.e.ServeHTTP(w, r)
}

// awaitModels waits until the read of /v1/models in flight has ended, and checks that
// the scraper's latest snapshot lists want.
func awaitModels(t *testing.T, sc *Scraper, want []string) {
	t.Helper()
	awaitIdle(t, sc)
	if got := sc.Latest().Models; !slices.Equal(got, want) {
		t.Fatalf("Models = %v, want %v", got, want)
	}
}

// TestUnknownModelRereads checks that a request for an unlisted model makes the scraper
// read /v1/models again before its minutely read (a LoRA adapter loaded at run time),
// at most once per modelsRecheck on its clock and never with a read in flight.
func TestUnknownModelRereads(t *testing.T) {
	e := &fakeEngine{metrics: string(fixture(t, "vllm_v1_dp.prom")), models: []string{"llama"}}
	g := gatedModels{e: e, open: make(chan struct{}, 10)}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	clk := clock.NewFake(epoch)
	sc := NewScraper(ScraperConfig{BaseURL: srv.URL, Clock: clk, Timeout: 10 * time.Second})
	g.open <- struct{}{}
	if s := sc.Scrape(context.Background()); !slices.Equal(s.Models, []string{"llama"}) {
		t.Fatalf("first scrape: Models = %v", s.Models)
	}

	// The adapter is loaded; a request names it. The names are read again at once,
	// not a minute after the first read.
	e.set(func(e *fakeEngine) { e.models = []string{"llama", "lora-a"} })
	sc.UnknownModel("lora-a")
	g.open <- struct{}{}
	awaitModels(t, sc, []string{"llama", "lora-a"})
	if got := e.modelsHits.Load(); got != 2 {
		t.Errorf("/v1/models read %d times, want 2", got)
	}
	// A scrape keeps the names just read: they are fresh.
	if s := sc.Scrape(context.Background()); !slices.Equal(s.Models, []string{"llama", "lora-a"}) || e.modelsHits.Load() != 2 {
		t.Errorf("scrape after the re-read: Models = %v, %d reads", s.Models, e.modelsHits.Load())
	}

	// Within modelsRecheck of the last re-read, unknown names start no read.
	clk.Step(modelsRecheck - time.Nanosecond)
	for range 100 {
		sc.UnknownModel("made-up")
	}
	if inFlight(sc) {
		t.Fatal("a read started within modelsRecheck of the last one")
	}

	// Once it has passed, one read starts, and none more while it is in flight, not
	// even by the scrape loop, whose names are a minute old by then.
	clk.Step(time.Nanosecond)
	sc.UnknownModel("made-up")
	if !inFlight(sc) {
		t.Fatal("no read started modelsRecheck after the last one")
	}
	clk.Step(time.Minute)
	sc.UnknownModel("made-up")
	if s := sc.Scrape(context.Background()); !s.Up {
		t.Fatalf("scrape during a re-read: %+v", s)
	}
	e.set(func(e *fakeEngine) { e.models = []string{"llama"} }) // the adapter was unloaded
	g.open <- struct{}{}
	awaitModels(t, sc, []string{"llama"})
	if got := e.modelsHits.Load(); got != 3 {
		t.Errorf("/v1/models read %d times, want 3 (one in flight at a time)", got)
	}

	// A failed re-read keeps the names known before.
	e.set(func(e *fakeEngine) { e.modelsDown = true })
	clk.Step(modelsRecheck)
	sc.UnknownModel("lora-b")
	g.open <- struct{}{}
	awaitIdle(t, sc)
	if got := sc.Latest().Models; !slices.Equal(got, []string{"llama"}) {
		t.Errorf("after a failed re-read: Models = %v", got)
	}
}

// awaitIdle waits until no read of /v1/models is in flight: the one in flight has
// ended and stored what it read. The limit only turns a hang into a failure.
func awaitIdle(t *testing.T, sc *Scraper) {
	t.Helper()
	select {
	case <-sc.recheck.idle():
	case <-time.After(hangLimit):
		t.Fatal("a /v1/models read is still in flight")
	}
}

// inFlight reports whether a read of /v1/models is in flight.
func inFlight(sc *Scraper) bool {
	sc.recheck.mu.Lock()
	defer sc.recheck.mu.Unlock()
	return sc.recheck.reading
}
