package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// The acceptance tests that run whole probes against the simulator. (The
// accuracy criterion is in accuracy_test.go, the gate's in gate_test.go.)

// publishedOverCapacity is the published H200 context matrix (docs/simulator.md): the smallest concurrency marked Over
// capacity at each context (0: none). Every other cell the matrix ran.
var publishedOverCapacity = map[string]int{"8K": 0, "16K": 128, "32K": 64, "64K": 32, "128K": 16, "251K": 8}

// skipUnderRace skips a test that sends prompts of 8K-251K tokens or times the HTTP path:
// under the race detector, writing and reading the context matrix's ~18M prompt tokens
// costs minutes of CPU, and the wall-clock round of the accuracy tests slows several-fold.
// make test runs these tests once more without -race (the acceptance target).
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("too slow or timing-sensitive under -race; make acceptance runs it without -race")
	}
}

// Acceptance: "slogate probe against the h200-9b simulator profile produces the 000 matrix
// (a short-duration preset for CI) with Valid and Over capacity cells where the published matrix has
// them."
//
// The CI variant is context-matrix.Quick() (outputs of 256 tokens) with rounds of a
// minute of the engine's time and the concurrencies 1, 8, 16, 32, 64, 128 instead of all eight:
// every context keeps its first over-capacity concurrency (8 at 251K up to 128 at 16K)
// and, but at 251K, the largest one the published matrix ran below it. It runs on virtual time (see
// virtual_test.go), so even the fullest cells (about 1M prompt tokens in flight) finish
// their requests inside the round however loaded the machine is, and the prefill list
// holds the model's single-request TTFT but for the wait described below. A minute (the
// wall-clock version had 1 s at Speed 300, of which the CPU it spent left less) brings
// two or more completions to the fullest cells; what the test costs is the
// CPU of writing and reading their prompt tokens, about 15 s.
func TestAcceptanceContextMatrix(t *testing.T) {
	skipUnderRace(t)
	synctest.Test(t, func(t *testing.T) {
		p := simProfile(t, "h200-9b", nil)
		s := startVirtualSim(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang})
		w := Presets["context-matrix"].Quick()
		w.Name, w.Duration, w.Concurrency = "context-matrix-ci", measure.Duration(60*time.Second), []int{1, 8, 16, 32, 64, 128}
		rep, err := Run(t.Context(), s.target(t, p.Model), w, Options{})
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
			if len(c.Rounds) > 0 {
				t.Logf("%s@%d: %s, %d sent, %d completed, TTFT p50 %.2f s", c.Row, c.Concurrency, c.State, c.Rounds[0].Sent, c.Completed, c.TTFTp50)
			}
			if c.State != want {
				t.Errorf("%s@%d: %s (%s), the published matrix has %s", c.Row, c.Concurrency, c.State, c.Detail, want)
				continue
			}
			if want == Valid && (c.Completed == 0 || c.Throughput <= 0 || c.TTFTp50 <= 0 || c.Output != 256) {
				t.Errorf("%s@%d is valid without figures: %+v", c.Row, c.Concurrency, c)
			}
		}
		// A row's prefill request follows the row before it, whose cut requests the
		// engine may still be computing: it can wait for up to one of that row's steps.
		checkPrefill(t, p, w, rep, func(i int) time.Duration {
			if i == 0 {
				return 0
			}
			return rowStep(p, w.Contexts[i-1], slices.Max(w.Concurrency))
		})
	})
}

// Acceptance (the matrix's prefill list): one entry per context, with the single-request
// TTFT of the profile. The matrix runs with every cell over capacity (256 streams fit at
// no context), so the run is its six prefill requests. On virtual time the prober's TTFT
// is the model's to the microsecond; on the wall clock (the test ran at Speed 3 before)
// what the simulator spends decoding a prompt and its timer's lateness added 2-5% to it
// on a quiet machine, and more on a loaded one.
func TestAcceptancePrefill(t *testing.T) {
	skipUnderRace(t)
	synctest.Test(t, func(t *testing.T) {
		p := simProfile(t, "h200-9b", nil)
		s := startVirtualSim(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang})
		w := Presets["context-matrix"].Quick()
		w.Concurrency = []int{256}
		rep, err := Run(t.Context(), s.target(t, p.Model), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rep.Cells {
			if c.State != OverCapacity {
				t.Errorf("%s@%d: %s, want over capacity", c.Row, c.Concurrency, c.State)
			}
		}
		checkPrefill(t, p, w, rep, func(int) time.Duration { return 0 })
	})
}

// checkPrefill holds rep's prefill list, measured on virtual time, to the profile: one
// entry per context of w, each with prompt tokens per second of input / TTFT and with the
// modelled single-request TTFT, to a microsecond, or up to slack(i) more.
func checkPrefill(t *testing.T, p enginesim.Profile, w Workload, rep Report, slack func(i int) time.Duration) {
	t.Helper()
	if len(rep.Prefill) != len(w.Contexts) {
		t.Fatalf("%d prefill entries, want %d", len(rep.Prefill), len(w.Contexts))
	}
	for i, pf := range rep.Prefill {
		input := w.Contexts[i] - w.Output
		want := modelledTTFT(t, p, input).Seconds()
		over := slack(i).Seconds()
		t.Logf("%s: TTFT %.6f s, profile %.6f s (%+.6f s; up to %+.6f s allowed), %.0f prompt tok/s",
			ContextLabel(pf.Context), pf.TTFT, want, pf.TTFT-want, over, pf.TokPerS)
		if pf.Context != w.Contexts[i] || pf.Failure != "" || pf.TTFT < want-1e-6 || pf.TTFT > want+over+1e-6 {
			t.Errorf("prefill %+v: want context %d, TTFT %.6f s (+%.6f s at most)", pf, w.Contexts[i], want, over)
		}
		if math.Abs(pf.TokPerS-float64(input)/pf.TTFT) > 1e-6*pf.TokPerS {
			t.Errorf("prompt tok/s %v, want input / TTFT = %v", pf.TokPerS, float64(input)/pf.TTFT)
		}
	}
}

// rowStep bounds the duration of a step of a matrix row of context ctxLen at up to conc
// streams: a full prefill chunk attending to the whole context, beside every other stream
// decoding with its whole context resident and as many waiting.
func rowStep(p enginesim.Profile, ctxLen, conc int) time.Duration {
	return p.Timing.StepTime(enginesim.StepShape{
		PrefillTokens: p.MaxBatchedTokens, PrefillAttn: float64(p.MaxBatchedTokens) * float64(ctxLen),
		DecodeSeqs: conc, DecodeKV: conc * ctxLen, Waiting: conc,
	})
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

// Acceptance: "a looping simulator yields Looped cells." On virtual time.
func TestAcceptanceLoopingEngine(t *testing.T) {
	synctest.Test(t, testLoopingEngine)
}

func testLoopingEngine(t *testing.T) {
	s := startVirtualSim(t, enginesim.Config{Faults: enginesim.Faults{Loop: true}})
	w := Workload{Name: "loop", Kind: Matrix, Contexts: []int{256, 1024}, Concurrency: []int{1, 2, 4}, Output: 64, Requests: 2}
	rep, err := Run(t.Context(), s.target(t, "sim-tiny"), w, Options{})
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

// Acceptance (the published H20-3e rate scan, docs/simulator.md): against the h20x8-flash profile, offered
// arrivals at 0.5x and 1.1x of its calibrated rate of 1.75 requests/s show the knee: at
// 1.1x the queue grows and p95 TTFT is far above 0.5x's, while at 0.5x the engine completes
// what it is offered.
//
// It runs on virtual time (see virtual_test.go), rounds of a minute of the engine's time.
// Arrivals are evenly spaced ("a fixed arrival rate", as the published scan ran it): Poisson bursts
// over a round this short put the p95 of the 0.5x cell anywhere between 0.7 s and 5 s.
func TestAcceptanceRateScan(t *testing.T) {
	skipUnderRace(t)
	synctest.Test(t, func(t *testing.T) {
		p := simProfile(t, "h20x8-flash", nil)
		s := startVirtualSim(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang})
		w := Workload{
			Name: "rate-scan-ci", Kind: Scan, Shapes: []Shape{{"8K/128", 8192, 128}},
			Multiples: []float64{0.5, 1.1}, ReferenceRate: 1.75, Arrival: "constant",
			Duration: measure.Duration(time.Minute), Rounds: 1,
		}
		rep, err := Run(t.Context(), s.target(t, p.Model), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Cells) != 2 || rep.Reference != w.ReferenceRate {
			t.Fatalf("%d cells, reference %v", len(rep.Cells), rep.Reference)
		}
		low, high := rep.Cells[0], rep.Cells[1]
		for _, c := range rep.Cells {
			t.Logf("%.1fx: offered %.2f/s (nominal %.2f), completed %.2f/s; TTFT p50 %.2f s, p95 %.2f s",
				c.Multiple, c.Rate, c.Nominal, c.CompletionRate, c.TTFTp50, c.TTFTp95)
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
		// Past the knee the engine no longer completes what it is offered. At 1.1x it is
		// only some 15% past its capacity, and over a one-minute round and its drain it
		// completes about 90% of the arrivals (the published scan, over longer rounds: 1.67 of 1.93
		// requests/s).
		if high.CompletionRate > 0.95*high.Rate {
			t.Errorf("at 1.1x completed %.2f/s of %.2f/s offered: no saturation", high.CompletionRate, high.Rate)
		}
	})
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
