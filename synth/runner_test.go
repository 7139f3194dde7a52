package synth

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/signal"
)

// counter wraps an engine's handler and counts the completions requests it receives and
// the most it held at once.
type counter struct {
	h        http.Handler
	mu       sync.Mutex
	arrived  int
	inFlight int
	peak     int
	arrival  signal.Changed
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/completions" {
		c.h.ServeHTTP(w, r)
		return
	}
	c.mu.Lock()
	c.arrived++
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	c.arrival.Broadcast()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	c.h.ServeHTTP(w, r)
}

func (c *counter) counts() (arrived, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arrived, c.peak
}

// awaitArrived returns once n requests have arrived, woken by each arrival; it fails the
// test after hangLimit, which only turns a hang into a failure.
func (c *counter) awaitArrived(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	arrived, err := signal.Await(ctx, func() (int, <-chan struct{}) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.arrived, c.arrival.C()
	}, func(arrived int) bool { return arrived >= n })
	if err != nil {
		t.Fatalf("%d requests arrived, want %d", arrived, n)
	}
}

// countedSim starts a simulator for cfg behind a counter.
func countedSim(t *testing.T, cfg enginesim.Config) (*counter, *Target) {
	t.Helper()
	if cfg.Profile.Name == "" {
		cfg.Profile = simProfile(t, "tiny", nil)
	}
	srv := runSim(t, cfg)
	c := &counter{h: srv.Handler()}
	url := upstream(t, c.ServeHTTP)
	return c, newTarget(t, url, cfg.Profile.Model)
}

func fixed(input, output int) func(uint64) prompt {
	return func(seed uint64) prompt { return prompt{input: input, output: output, seed: seed} }
}

func TestClosedLoopCountBounded(t *testing.T) {
	tests := []struct{ conc, perStream int }{{1, 3}, {4, 2}, {8, 1}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d streams x %d", tc.conc, tc.perStream), func(t *testing.T) {
			c, tg := countedSim(t, enginesim.Config{})
			var sd seeds
			b := tg.closedLoop(context.Background(), tc.conc, fixed(16, 4), &sd, 0, tc.perStream)
			arrived, peak := c.counts()
			if want := tc.conc * tc.perStream; len(b.samples) != want || arrived != want {
				t.Errorf("%d samples, %d requests at the engine; want %d", len(b.samples), arrived, want)
			}
			if peak > tc.conc {
				t.Errorf("%d requests in flight at once, want at most %d", peak, tc.conc)
			}
			for _, s := range b.samples {
				if !s.Success() {
					t.Errorf("a request failed: %v", s.Failure)
				}
			}
			if b.windowed || b.span <= 0 || b.arrival != 0 {
				t.Errorf("windowed %v, span %v, arrival %v; want a count-bounded round", b.windowed, b.span, b.arrival)
			}
		})
	}
}

// A duration-bounded round starts requests only inside its window, cuts the ones still
// running when it closes, and returns then rather than when they would have ended.
func TestClosedLoopDurationBounded(t *testing.T) {
	// 10 ms steps: a 20-token answer takes ~0.2 s; a 3,000-token one would take 30 s.
	p := simProfile(t, "tiny", func(p *enginesim.Profile) { p.Timing = enginesim.Timing{StepBase: 0.010} })
	tests := []struct {
		name            string
		output          int
		wantSucceeded   bool
		wantAtMostSends int
	}{
		{"short answers", 20, true, 0},
		{"answers longer than the window", 3000, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const conc, window = 2, 600 * time.Millisecond
			c, tg := countedSim(t, enginesim.Config{Profile: p})
			var sd seeds
			before := goleak.IgnoreCurrent() // the simulator's and the server's goroutines
			began := time.Now()
			b := tg.closedLoop(context.Background(), conc, fixed(16, tc.output), &sd, window, 0)
			took := time.Since(began)
			arrived, _ := c.counts()
			if !b.windowed || b.span != window {
				t.Errorf("windowed %v, span %v; want true, %v", b.windowed, b.span, window)
			}
			// A request the window closes on before it reaches the engine is a sample too.
			if arrived > len(b.samples) || arrived < len(b.samples)-conc {
				t.Errorf("%d requests reached the engine, %d samples", arrived, len(b.samples))
			}
			windowEnd := b.start.Add(window)
			cut, ok := 0, 0
			for _, s := range b.samples {
				if !s.Res.Start.Before(windowEnd) {
					t.Errorf("a request started %v after the window closed", s.Res.Start.Sub(windowEnd))
				}
				switch s.Failure {
				case Cut:
					cut++
					if s.WindowTokens >= tc.output {
						t.Errorf("a cut request has all %d tokens", s.WindowTokens)
					}
				case NoFailure:
					ok++
				default:
					t.Errorf("a request failed: %v", s.Failure)
				}
			}
			// Each stream's last request is cut (or, rarely, ended just as the window closed).
			if cut < 1 || cut > conc {
				t.Errorf("%d requests cut, want 1 to %d", cut, conc)
			}
			if tc.wantSucceeded && ok < conc {
				t.Errorf("%d requests succeeded, want at least %d", ok, conc)
			}
			if tc.wantAtMostSends > 0 && len(b.samples) > conc*tc.wantAtMostSends {
				t.Errorf("%d requests sent, want %d", len(b.samples), conc*tc.wantAtMostSends)
			}
			// The cut requests would have run 30 s; the round ended with its window.
			if took > 10*time.Second {
				t.Errorf("the round took %v after a %v window", took, window)
			}
			// Nothing of the round is left to send: once the client's idle connections
			// are closed, every goroutine the round started is gone (goleak retries
			// while the engine's side of the cut requests winds down).
			tg.Client.CloseIdleConnections()
			goleak.VerifyNone(t, before)
			if again, _ := c.counts(); again != arrived {
				t.Errorf("%d requests arrived after the round returned", again-arrived)
			}
		})
	}
}

func TestOpenLoop(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	offsets := []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond}
	var sd seeds
	b := tg.openLoop(context.Background(), offsets, 50*time.Millisecond, fixed(16, 4), &sd, time.Minute)
	arrived, _ := c.counts()
	if len(b.samples) != len(offsets) || arrived != len(offsets) {
		t.Errorf("%d samples, %d at the engine; want %d", len(b.samples), arrived, len(offsets))
	}
	for _, s := range b.samples {
		if !s.Success() {
			t.Errorf("a request failed: %v", s.Failure)
		}
	}
	if b.arrival != 50*time.Millisecond || b.windowed {
		t.Errorf("arrival %v windowed %v", b.arrival, b.windowed)
	}
	// The sends keep to their offsets' order.
	starts := make([]time.Duration, len(b.samples))
	for i, s := range b.samples {
		starts[i] = s.Res.Start.Sub(b.start)
	}
	slices.Sort(starts)
	for i, off := range offsets {
		if starts[i] < off {
			t.Errorf("send %d at %v, before its offset %v", i, starts[i], off)
		}
	}
	if r := summarize(b); r.Offered != float64(len(offsets))/0.05 {
		t.Errorf("offered %v/s, want %v/s", r.Offered, float64(len(offsets))/0.05)
	}
}

// Requests still running when the drain ends are cut; arrivals after ctx ends are not sent.
func TestOpenLoopDrainAndCancel(t *testing.T) {
	p := simProfile(t, "tiny", func(p *enginesim.Profile) { p.Timing = enginesim.Timing{StepBase: 0.010} })
	_, tg := countedSim(t, enginesim.Config{Profile: p})
	var sd seeds
	b := tg.openLoop(context.Background(), []time.Duration{0, 0}, time.Millisecond, fixed(16, 3000), &sd, 200*time.Millisecond)
	if len(b.samples) != 2 || b.samples[0].Failure != Cut || b.samples[1].Failure != Cut {
		t.Errorf("samples %v, want two cut", failures(b.samples))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b = tg.openLoop(ctx, []time.Duration{0, time.Hour}, 2*time.Hour, fixed(16, 4), &sd, time.Minute)
	if len(b.samples) > 1 {
		t.Errorf("%d sent after ctx ended", len(b.samples))
	}
	if b = tg.openLoop(context.Background(), nil, time.Second, fixed(16, 4), &sd, time.Minute); len(b.samples) != 0 {
		t.Errorf("no offsets sent %d", len(b.samples))
	}
}

func failures(ss []Sample) []Failure {
	out := make([]Failure, len(ss))
	for i, s := range ss {
		out[i] = s.Failure
	}
	return out
}

func TestArrivalsConstant(t *testing.T) {
	tests := []struct {
		rate float64
		dur  time.Duration
		want int
	}{
		{10, time.Second, 10},
		{7, time.Second, 7},
		{3, time.Second, 3},
		{100, 10 * time.Second, 1000},
		{0.875, 10 * time.Second, 9}, // 0.5 x 1.75 req/s
		{1.925, 10 * time.Second, 20},
		{2, 100 * time.Millisecond, 1},
		{0, time.Second, 0},
		{-1, time.Second, 0},
	}
	for _, tc := range tests {
		got := arrivals(tc.rate, tc.dur, false, 1)
		if len(got) != tc.want {
			t.Errorf("arrivals(%v/s over %v) sends %d, want %d", tc.rate, tc.dur, len(got), tc.want)
			continue
		}
		for i, off := range got {
			if want := time.Duration(float64(i) / tc.rate * float64(time.Second)); absDur(off-want) > time.Microsecond {
				t.Errorf("rate %v: send %d at %v, want %v", tc.rate, i, off, want)
			}
		}
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

func TestArrivalsPoisson(t *testing.T) {
	const rate, dur = 50.0, 200 * time.Second // 10,000 arrivals expected; sd 100
	a := arrivals(rate, dur, true, 7)
	if n := float64(len(a)); math.Abs(n-rate*dur.Seconds()) > 4*math.Sqrt(rate*dur.Seconds()) {
		t.Errorf("%v arrivals, want %v ± 4 sd", n, rate*dur.Seconds())
	}
	if !slices.IsSorted(a) || a[0] < 0 || a[len(a)-1] >= dur {
		t.Error("offsets are not sorted inside the window")
	}
	// Exponential gaps: their mean is 1/rate and their coefficient of variation 1.
	var sum, sq float64
	for i := 1; i < len(a); i++ {
		g := (a[i] - a[i-1]).Seconds()
		sum, sq = sum+g, sq+g*g
	}
	n := float64(len(a) - 1)
	mean := sum / n
	cv := math.Sqrt(sq/n-mean*mean) / mean
	if math.Abs(mean*rate-1) > 0.05 || math.Abs(cv-1) > 0.05 {
		t.Errorf("gaps: mean %v s, cv %v; want %v s, 1", mean, cv, 1/rate)
	}
	if !slices.Equal(a, arrivals(rate, dur, true, 7)) {
		t.Error("the same seed gave different arrivals")
	}
	if slices.Equal(a[:10], arrivals(rate, dur, true, 8)[:10]) {
		t.Error("different seeds gave the same arrivals")
	}
}

// TestClosedLoopBacksOffFailures: against an engine that refuses every request at once,
// each stream waits failureBackoff between attempts instead of hammering it.
func TestClosedLoopBacksOffFailures(t *testing.T) {
	var sent atomic.Int64
	url := upstream(t, func(w http.ResponseWriter, _ *http.Request) {
		sent.Add(1)
		http.Error(w, "busy", http.StatusTooManyRequests)
	})
	tg := &Target{BaseURL: url, Model: "m"}
	const conc, window = 4, time.Second
	b := tg.closedLoop(context.Background(), conc, func(seed uint64) prompt { return prompt{input: 4, output: 2, seed: seed} }, &seeds{}, window, 0)
	limit := int64(conc * (int(window/failureBackoff) + 1))
	if n := sent.Load(); n > limit || n < conc {
		t.Errorf("%d requests in a %v window from %d streams; want between %d and %d with backoff", n, window, conc, conc, limit)
	}
	if len(b.samples) != int(sent.Load()) {
		t.Errorf("%d samples for %d requests", len(b.samples), sent.Load())
	}
}
