package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// The acceptance tests that run whole probes against the simulator. (The
// accuracy criterion is in accuracy_test.go, the gate's in gate_test.go.)

// publishedOverCapacity is the published H200 context matrix (docs/simulator.md): the
// smallest concurrency marked Over capacity at each context (0: none). Every other cell
// the matrix ran.
var publishedOverCapacity = map[string]int{"8K": 0, "16K": 128, "32K": 64, "64K": 32, "128K": 16, "251K": 8}

// skipUnderRace skips a test that sends prompts of 8K-251K tokens: under the race
// detector, writing and reading the context matrix's ~18M prompt tokens takes longer
// than its sped-up one-second windows, and the largest cells come out n/c. make test
// runs these tests once more without -race (the acceptance target).
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("too slow or timing-sensitive under -race; make acceptance runs it without -race")
	}
}

// Acceptance: slogate probe against the h200-9b simulator profile produces the published
// H200 context matrix (a short-duration preset for CI) with Valid and Over capacity cells
// where the published matrix has them.
//
// The CI variant is context-matrix.Quick() (outputs of 256 tokens) with 1 s rounds instead
// of 3 s and the concurrencies 1, 8, 16, 32, 64, 128 instead of all eight: every context
// keeps its first over-capacity concurrency (8 at 251K up to 128 at 16K) and, but at 251K,
// the largest one the published matrix ran below it. The simulator runs 300 times faster
// than the H200 it models, so a cell's round of 1 s covers 300 s of the engine's time;
// even the fullest cells (about 1M prompt tokens in flight) finish requests inside it.
// The run takes ~25 s without -race.
func TestAcceptanceContextMatrix(t *testing.T) {
	skipUnderRace(t)
	const speed = 300
	p := simProfile(t, "h200-9b", nil)
	s := startSim(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang, Speed: speed})
	w := Presets["context-matrix"].Quick()
	w.Name, w.Duration, w.Concurrency = "context-matrix-ci", measure.Duration(time.Second), []int{1, 8, 16, 32, 64, 128}
	rep, err := Run(context.Background(), s.target(t, p.Model), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.KVCapacity != p.KVCapacity() || rep.Engine != "sglang" {
		t.Errorf("KV capacity %d, engine %q; want %d, sglang", rep.KVCapacity, rep.Engine, p.KVCapacity())
	}
	if len(rep.Cells) != len(w.Contexts)*len(w.Concurrency) {
		t.Fatalf("%d cells, want %d", len(rep.Cells), len(w.Contexts)*len(w.Concurrency))
	}
	for _, c := range rep.Cells {
		over, ok := publishedOverCapacity[c.Row]
		if !ok {
			t.Fatalf("row %q is not in the published matrix", c.Row)
		}
		want := Valid
		if over > 0 && c.Concurrency >= over {
			want = OverCapacity
		}
		if c.State != want {
			t.Errorf("%s@%d: %s (%s), the published matrix has %s", c.Row, c.Concurrency, c.State, c.Detail, want)
			continue
		}
		if want == Valid && (c.Completed == 0 || c.Throughput <= 0 || c.TTFTp50 <= 0 || c.Output != 256) {
			t.Errorf("%s@%d is valid without figures: %+v", c.Row, c.Concurrency, c)
		}
	}
	// One prefill per context, never faster than the model. (At this speed the real time
	// the simulator spends decoding a prompt and the loopback's jitter are as large as the
	// modelled prefill, so its figures are checked at Speed 3 in TestAcceptancePrefill.)
	if len(rep.Prefill) != len(w.Contexts) {
		t.Fatalf("%d prefill entries, want %d", len(rep.Prefill), len(w.Contexts))
	}
	for i, pf := range rep.Prefill {
		want := modelledTTFT(t, p, pf.Context-w.Output).Seconds() / speed
		if pf.Context != w.Contexts[i] || pf.Failure != "" || pf.TTFT < 0.95*want || pf.TokPerS <= 0 {
			t.Errorf("prefill %+v; want context %d, TTFT at least %.4f s", pf, w.Contexts[i], want)
		}
	}
}

// Acceptance (the matrix's prefill list): one entry per context, with the single-request
// TTFT of the profile, scaled by Speed. The matrix runs with every cell over capacity (256
// streams fit at no context), so the run is its six prefill requests (~9 s). What the
// simulator spends in real time besides its model (decoding the prompt, ~0.45 µs a token,
// and ~1 ms of timer lateness per step) counts Speed times over; at Speed 3 it adds 2-5%
// to the modelled TTFT, and the bound is 10%.
func TestAcceptancePrefill(t *testing.T) {
	skipUnderRace(t)
	const speed = 3
	p := simProfile(t, "h200-9b", nil)
	s := startSim(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang, Speed: speed})
	w := Presets["context-matrix"].Quick()
	w.Concurrency = []int{256}
	rep, err := Run(context.Background(), s.target(t, p.Model), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cells {
		if c.State != OverCapacity {
			t.Errorf("%s@%d: %s, want over capacity", c.Row, c.Concurrency, c.State)
		}
	}
	if len(rep.Prefill) != len(w.Contexts) {
		t.Fatalf("%d prefill entries, want %d", len(rep.Prefill), len(w.Contexts))
	}
	for i, pf := range rep.Prefill {
		input := w.Contexts[i] - w.Output
		want := modelledTTFT(t, p, input).Seconds()
		got := pf.TTFT * speed
		t.Logf("%s: TTFT %.3f s x %d = %.3f s, profile %.3f s (%+.1f%%), %.0f prompt tok/s", ContextLabel(pf.Context), pf.TTFT, speed, got, want, 100*(got/want-1), pf.TokPerS/speed)
		if pf.Context != w.Contexts[i] || pf.Failure != "" || math.Abs(got-want) > 0.10*want {
			t.Errorf("prefill %+v: TTFT x speed %.3f s, want %.3f s ± 10%%", pf, got, want)
		}
		if math.Abs(pf.TokPerS-float64(input)/pf.TTFT) > 1e-6*pf.TokPerS {
			t.Errorf("prompt tok/s %v, want input / TTFT = %v", pf.TokPerS, float64(input)/pf.TTFT)
		}
	}
}

// modelledTTFT is the profile's TTFT for one request with a prompt of n tokens on an idle
// engine: the API server's latency and the scheduler's steps until the first token, run in
// virtual time.
func modelledTTFT(t *testing.T, p enginesim.Profile, n int) time.Duration {
	t.Helper()
	var ttft time.Duration
	s := enginesim.NewScheduler(p, enginesim.Hooks{Finished: func(f enginesim.Finished) { ttft = f.TTFT }})
	now := time.Unix(0, 0)
	s.Submit(now, enginesim.Request{ID: 1, PromptTokens: n, OutputTokens: 1, FinishReason: "length", MaxTokens: 1, Arrival: now})
	for {
		d, busy := s.Step(now)
		if !busy {
			break
		}
		now = now.Add(d)
		s.Complete(now)
	}
	if ttft <= 0 {
		t.Fatalf("the scheduler never produced a token for a %d-token prompt", n)
	}
	return p.APILatency + ttft
}

// Acceptance: "a looping simulator yields Looped cells."
func TestAcceptanceLoopingEngine(t *testing.T) {
	s := startSim(t, enginesim.Config{Faults: enginesim.Faults{Loop: true}})
	w := Workload{Name: "loop", Kind: Matrix, Contexts: []int{256, 1024}, Concurrency: []int{1, 2, 4}, Output: 64, Requests: 2}
	rep, err := Run(context.Background(), s.target(t, "sim-tiny"), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 6 {
		t.Fatalf("%d cells, want 6", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if want := fmt.Sprintf("%d of %d outputs repeated themselves", 2*c.Concurrency, 2*c.Concurrency); c.State != LoopedState || c.Detail != want {
			t.Errorf("%s@%d: %s %q, want looped %q", c.Row, c.Concurrency, c.State, c.Detail, want)
		}
	}
}

// Acceptance (the published H20-3e rate scan, docs/simulator.md): against the
// h20x8-flash profile, offered arrivals at 0.5x and 1.1x of its calibrated rate of 1.75
// requests/s show the knee: at 1.1x the queue grows and p95 TTFT is far above 0.5x's,
// while at 0.5x the engine completes what it is offered.
//
// The simulator runs 10 times faster, so the reference rate is 17.5 requests/s of real
// time and a 6 s round is a minute of the engine's. Arrivals are evenly spaced (a fixed
// arrival rate, as the published scan ran it): Poisson bursts over a round this short put
// the p95 of the 0.5x cell anywhere between 0.7 s and 5 s of the engine's time. Takes
// ~14 s.
func TestAcceptanceRateScan(t *testing.T) {
	const speed = 10
	p := simProfile(t, "h20x8-flash", nil)
	s := startSim(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang, Speed: speed})
	w := Workload{
		Name: "rate-scan-ci", Kind: Scan, Shapes: []Shape{{"8K/128", 8192, 128}},
		Multiples: []float64{0.5, 1.1}, ReferenceRate: 1.75 * speed, Arrival: "constant",
		Duration: measure.Duration(6 * time.Second), Rounds: 1,
	}
	rep, err := Run(context.Background(), s.target(t, p.Model), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 2 || rep.Reference != w.ReferenceRate {
		t.Fatalf("%d cells, reference %v", len(rep.Cells), rep.Reference)
	}
	low, high := rep.Cells[0], rep.Cells[1]
	for _, c := range rep.Cells {
		t.Logf("%.1fx: offered %.2f/s (nominal %.2f), completed %.2f/s; TTFT p50 %.2f s, p95 %.2f s (engine time)",
			c.Multiple, c.Rate/speed, c.Nominal/speed, c.CompletionRate/speed, c.TTFTp50*speed, c.TTFTp95*speed)
		if c.State != Valid || c.Nominal != c.Multiple*w.ReferenceRate {
			t.Errorf("%.1fx: %s %s, nominal %v", c.Multiple, c.State, c.Detail, c.Nominal)
		}
	}
	if high.TTFTp95 < 4*low.TTFTp95 {
		t.Errorf("p95 TTFT %.3f s at 1.1x is not far above %.3f s at 0.5x: no knee", high.TTFTp95, low.TTFTp95)
	}
	if math.Abs(low.CompletionRate/low.Rate-1) > 0.1 {
		t.Errorf("at 0.5x completed %.2f/s of %.2f/s offered", low.CompletionRate, low.Rate)
	}
	// Past the knee the engine no longer completes what it is offered. At 1.1x it is only
	// some 15% past its capacity, and over a one-minute round and its drain it completes
	// about 90% of the arrivals (the published scan, over longer rounds: 1.67 of 1.93
	// requests/s).
	if high.CompletionRate > 0.95*high.Rate {
		t.Errorf("at 1.1x completed %.2f/s of %.2f/s offered: no saturation", high.CompletionRate, high.Rate)
	}
}

// A scan without a reference rate measures it first: the closed-loop completion rate at
// the calibration concurrency; a count-bounded round's arrival window is the time its
// requests take at that rate.
func TestScanCalibrates(t *testing.T) {
	_, tg := countedSim(t, enginesim.Config{})
	w := Workload{
		Name: "cal", Kind: Scan, Shapes: []Shape{{"s", 64, 8}}, Multiples: []float64{0.5, 1},
		CalibrationConcurrency: 2, Requests: 4, Arrival: "constant",
	}
	rep, err := Run(context.Background(), tg, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reference <= 0 || len(rep.Cells) != 2 {
		t.Fatalf("reference %v, %d cells", rep.Reference, len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Nominal != c.Multiple*rep.Reference || c.State != Valid || c.Rounds[0].Sent < 1 {
			t.Errorf("cell %+v", c)
		}
	}
	if got := rep.Cells[1].Rounds[0].Sent; got != 4 {
		t.Errorf("1x sent %d requests, want Requests = 4", got)
	}
}

// Run refuses an invalid workload before any request, and stops with what it measured
// when ctx ends.
func TestRunStops(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	if _, err := Run(context.Background(), tg, Workload{Name: "bad"}, Options{}); err == nil {
		t.Error("Run accepted an invalid workload")
	}
	if arrived, _ := c.counts(); arrived != 0 {
		t.Errorf("%d requests sent for an invalid workload", arrived)
	}
	// The first cell's round would last an hour; ctx ends inside it.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	w := Workload{Name: "long", Kind: Shapes, Shapes: []Shape{{"a", 16, 8}, {"b", 16, 8}}, Concurrency: []int{1, 2}, Duration: measure.Duration(time.Hour)}
	rep, err := Run(ctx, tg, w, Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if len(rep.Cells) != 1 || rep.Finished.IsZero() || rep.Schema != SchemaVersion {
		t.Errorf("report after cancel: %d cells, finished %v, schema %q", len(rep.Cells), rep.Finished, rep.Schema)
	}
}
