package engine

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// modelsEvery is how often the served models are read again once known.
const modelsEvery = time.Minute

// modelsRecheck is the least time, on the scraper's clock, between two reads of
// /v1/models that UnknownModel starts.
const modelsRecheck = 5 * time.Second

// recheck is the state of the reads of /v1/models outside the scrape loop: at most one
// in flight (counting the scrape loop's own), at most one started per modelsRecheck.
type recheck struct {
	mu      sync.Mutex    // guards the fields below; taken after Scraper.mu, never before
	reading bool          // a /v1/models read is in flight
	ended   chan struct{} // closed when the read in flight ends
	started time.Time     // when UnknownModel last started a read; zero if never
}

// begin claims the one read allowed in flight; it reports false if one already is.
// With limit, it also refuses a read within modelsRecheck of the last one it allowed
// with limit, and records now as that read's start.
func (r *recheck) begin(now time.Time, limit bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reading || limit && !r.started.IsZero() && now.Sub(r.started) < modelsRecheck {
		return false
	}
	r.reading, r.ended = true, make(chan struct{})
	if limit {
		r.started = now
	}
	return true
}

func (r *recheck) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reading = false
	close(r.ended)
}

// idle returns a channel closed once no read of /v1/models is in flight: the one in
// flight now, if any, has ended and stored what it read.
func (r *recheck) idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reading {
		c := make(chan struct{})
		close(c)
		return c
	}
	return r.ended
}

// UnknownModel tells the scraper that a request named a model it does not list among
// the served ones, e.g. a LoRA adapter loaded at run time (vLLM POST
// /v1/load_lora_adapter; its /v1/models then lists the adapter with the base model as
// "parent", vllm/entrypoints/openai/models/serving.py, show_available_models). The
// scraper reads /v1/models again at once, in the background, instead of waiting for
// its minutely read, and the new names are in Latest().Models when the read is done.
//
// UnknownModel never blocks and never does I/O on the caller's goroutine: it is meant
// for the request path. It starts at most one read per modelsRecheck (5 s) on the
// scraper's clock, and none while another read of /v1/models is in flight, so a client
// sending made-up names costs the engine one small request every five seconds at most.
// A failed read keeps the names known before. The name itself is not used. Safe for
// concurrent use, also with Scrape and Run.
func (s *Scraper) UnknownModel(string) {
	if !s.recheck.begin(s.clock.Now(), true) {
		return
	}
	go s.reread()
}

// reread reads /v1/models and, if that worked, stores the names in the scraper and its
// latest snapshot. It ends the read claimed by UnknownModel.
func (s *Scraper) reread() {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	models, err := s.readModels(ctx)
	if err == nil {
		s.mu.Lock() // waits for a scrape in progress, which then keeps its own names
		s.models, s.modelsAt = models, s.clock.Now()
		snap := s.Latest()
		snap.Models = models
		s.store(&snap)
		s.mu.Unlock()
	}
	s.recheck.end()
}

// servedModels returns the served model names, reading /v1/models when they are not
// known yet or are older than modelsEvery, unless a read started by UnknownModel is in
// flight. A failed read keeps the names known before. s.mu is held.
func (s *Scraper) servedModels(ctx context.Context) []string {
	now := s.clock.Now()
	if s.models != nil && now.Sub(s.modelsAt) < modelsEvery {
		return s.models
	}
	if !s.recheck.begin(now, false) {
		return s.models
	}
	defer s.recheck.end()
	models, err := s.readModels(ctx)
	if err != nil {
		return s.models
	}
	s.models, s.modelsAt = models, now
	return models
}

// readModels reads the ids of the models /v1/models lists: base models and, on vLLM,
// the LoRA adapters loaded.
func (s *Scraper) readModels(ctx context.Context) ([]string, error) {
	resp, err := s.get(ctx, "/v1/models", "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return nil, err
	}
	models := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		models = append(models, m.ID)
	}
	return models, nil
}
