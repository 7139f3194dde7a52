package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/enginesim"
)

// sim is a simulated engine served over HTTP for the duration of a test.
type sim struct {
	profile enginesim.Profile
	engine  *enginesim.Server
	srv     *httptest.Server
}

func startSim(t *testing.T, flavor enginesim.Flavor) *sim {
	t.Helper()
	return startSimWith(t, flavor, nil)
}

// startSimWith is startSim with the tiny profile changed by edit, if not nil.
func startSimWith(t *testing.T, flavor enginesim.Flavor, edit func(*enginesim.Profile)) *sim {
	t.Helper()
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	engine, err := enginesim.NewServer(enginesim.Config{Profile: p, Flavor: flavor})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = engine.Run(ctx)
	}()
	srv := httptest.NewServer(engine.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return &sim{profile: p, engine: engine, srv: srv}
}

// complete sends one completion request; with stream it returns once the first event
// has arrived and leaves the rest to the returned body, else it reads the whole answer.
func (s *sim) complete(ctx context.Context, t *testing.T, body string, stream bool) io.ReadCloser {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("completion: %s: %s", resp.Status, b)
	}
	if !stream {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		resp.Body.Close()
		t.Fatalf("first stream line %q: %v", line, err)
	}
	return resp.Body
}

var simCases = []struct {
	flavor     enginesim.Flavor
	configured Kind
	want       Kind
}{
	{enginesim.FlavorVLLM, KindAuto, KindVLLM},
	{enginesim.FlavorVLLM, KindVLLM, KindVLLM},
	{enginesim.FlavorSGLang, KindAuto, KindSGLang},
	{enginesim.FlavorSGLang, KindSGLang, KindSGLang},
}

// TestScrapeSimulator scrapes the simulator of each engine, detected and configured,
// after a few requests have finished.
func TestScrapeSimulator(t *testing.T) {
	for _, tt := range simCases {
		t.Run(fmt.Sprintf("%s/%s", tt.flavor, tt.configured), func(t *testing.T) {
			s := startSim(t, tt.flavor)
			ctx := context.Background()
			for i := range 3 {
				s.complete(ctx, t, fmt.Sprintf(`{"model":%q,"prompt":[1,2,3,%d],"max_tokens":8,"ignore_eos":true}`, s.profile.Model, i), false)
			}
			clk := clock.NewFake(epoch)
			sc := NewScraper(ScraperConfig{BaseURL: s.srv.URL, Kind: tt.configured, Clock: clk, Timeout: 10 * time.Second})
			snap := sc.Scrape(ctx)
			if !snap.Up || snap.Err != nil {
				t.Fatalf("Scrape: up %v, %v", snap.Up, snap.Err)
			}
			if snap.Kind != tt.want || !snap.At.Equal(clk.Now()) {
				t.Errorf("Kind %v, At %v; want %v, %v", snap.Kind, snap.At, tt.want, clk.Now())
			}
			if snap.Running != 0 || snap.Waiting != 0 {
				t.Errorf("idle engine: Running %v, Waiting %v; want 0, 0", snap.Running, snap.Waiting)
			}
			if want := float64(s.profile.KVCapacity()); snap.KVCapacityTokens != want {
				t.Errorf("KVCapacityTokens = %v, want %v", snap.KVCapacityTokens, want)
			}
			if !Known(snap.KVUsage) || snap.KVUsage < 0 || snap.KVUsage > 1 || snap.Preemptions != 0 {
				t.Errorf("KVUsage %v, Preemptions %v", snap.KVUsage, snap.Preemptions)
			}
			if Known(snap.SpecAcceptRate) {
				t.Errorf("SpecAcceptRate = %v without speculative decoding", snap.SpecAcceptRate)
			}
			if !slices.Equal(snap.Models, []string{s.profile.Model}) {
				t.Errorf("Models = %v, want [%s]", snap.Models, s.profile.Model)
			}
		})
	}
}

// TestScrapeSimulatorBusy scrapes the simulator while a long stream is generating.
func TestScrapeSimulatorBusy(t *testing.T) {
	for _, tt := range simCases {
		if tt.configured != KindAuto {
			continue
		}
		t.Run(string(tt.flavor), func(t *testing.T) {
			s := startSim(t, tt.flavor)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// 4000 tokens at the tiny profile's ~2 ms per step: seconds of generation.
			body := s.complete(ctx, t, fmt.Sprintf(`{"model":%q,"prompt":[1,2,3,4],"max_tokens":4000,"ignore_eos":true,"stream":true}`, s.profile.Model), true)
			defer body.Close()

			// The first event has come: the request runs and holds KV blocks, and the
			// simulator's gauges are read at each scrape.
			sc := NewScraper(ScraperConfig{BaseURL: s.srv.URL, Timeout: 10 * time.Second})
			snap := sc.Scrape(ctx)
			if !snap.Up || snap.Running < 1 || !(snap.KVUsage > 0) || snap.Kind != tt.want {
				t.Errorf("with a stream in flight: up %v, kind %v, Running %v, KVUsage %v (%v)", snap.Up, snap.Kind, snap.Running, snap.KVUsage, snap.Err)
			}
			cancel()
			_, err := io.Copy(io.Discard, body)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("stream ended: %v", err)
			}
		})
	}
}

// TestScrapeSimulatorPriority scrapes the SGLang simulator with priority scheduling,
// which exports the running and queued requests twice in each family (the total under
// priority="", the breakdown under priority="0"): the snapshot holds the real counts.
func TestScrapeSimulatorPriority(t *testing.T) {
	s := startSimWith(t, enginesim.FlavorSGLang, func(p *enginesim.Profile) {
		p.PriorityScheduling, p.MaxNumSeqs = true, 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range 5 { // 2 run and 3 wait, for seconds, until cancelled
		body := fmt.Sprintf(`{"model":%q,"prompt":[1,2,3,%d],"max_tokens":4000,"ignore_eos":true,"stream":true}`, s.profile.Model, i)
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/v1/completions", strings.NewReader(body))
			if err != nil {
				return
			}
			if resp, err := s.srv.Client().Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wait, stop := context.WithTimeout(ctx, hangLimit)
	defer stop()
	// SGLang exports its scheduler gauges from its first batch's stats log on: the
	// first step must have ended, not only been scheduled.
	if st, err := s.engine.Await(wait, func(st enginesim.Stats) bool { return st.Running == 2 && st.Waiting == 3 && st.Steps > 0 }); err != nil {
		t.Fatalf("the engine never ran a step of 2 with 3 queued: %v (%+v)", err, st)
	}
	sc := NewScraper(ScraperConfig{BaseURL: s.srv.URL, Timeout: 10 * time.Second})
	snap := sc.Scrape(ctx)
	if snap.Running != 2 || snap.Waiting != 3 || snap.Kind != KindSGLang {
		t.Errorf("2 running and 3 waiting: Running %v, Waiting %v, kind %v (%v)", snap.Running, snap.Waiting, snap.Kind, snap.Err)
	}
}
