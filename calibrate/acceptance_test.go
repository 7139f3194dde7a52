package calibrate

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// The simulators run faster than the engines they model, by a speed chosen per tier
// so that each stays under maxRealRate requests a second: what the simulator and the
// prober spend in real time besides the model (timer lateness, writing and decoding
// prompts, streaming) counts speed times over in the engine's time, and on a busy
// machine it reaches the short tiers' TTFT SLO first. The tiers run side by side on
// simulators of their own.
const (
	maxSpeed    = 20
	minSpeed    = 2
	maxRealRate = 30
)

// window is the engine time a point's round covers at least; low rates get longer
// rounds, to bring 200 requests.
const window = time.Minute

// tierSLOs are the SLOs of the built-in tiers in the acceptance tests, in the engine's
// time: longer prompts take longer to prefill, and their tiers promise less.
var tierSLOs = map[string]measure.SLO{
	"short":  measure.NewSLO(2*time.Second, 100*time.Millisecond),
	"medium": measure.NewSLO(5*time.Second, 100*time.Millisecond),
	"long":   measure.NewSLO(10*time.Second, 150*time.Millisecond),
	"xlong":  measure.NewSLO(15*time.Second, 150*time.Millisecond),
}

// Acceptance: "against the simulator profiles, whose true sustainable rate per tier is
// known from the model, the derived λ* is within 10% of it for every tier, in a test
// with a short preset." Each tier of the built-in tiers is calibrated over HTTP against a
// simulator of its own, with the SLO and rounds scaled by its speed, and its λ*
// compared with enginesim.SustainableRate for the same shape, SLO and window.
func TestAcceptanceKneePerTier(t *testing.T) {
	if raceEnabled {
		t.Skip("the simulator's prompt decoding is too slow under -race; run without -race")
	}
	t.Parallel()
	for _, profile := range []string{"h20x8-flash", "h200-9b"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			p, err := enginesim.LookupProfile(profile)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := DefaultPlan(admission.DefaultConfig(), measure.SLO{}, p.MaxModelLen, 128)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, tp := range plan.Tiers {
				wg.Go(func() { checkTier(t, p, tp.Tier.Name, tp.Shape) })
			}
			wg.Wait()
		})
	}
}

// checkTier calibrates tier, of requests of shape, against a simulator of p and holds
// its λ* to the model's.
func checkTier(t *testing.T, p enginesim.Profile, tier string, shape synth.Shape) {
	slo := tierSLOs[tier]
	guess, err := enginesim.SustainableRate(p, shape.Input, shape.Output, slo, enginesim.Search{Window: 10 * time.Minute})
	if err != nil || guess <= 0 {
		t.Errorf("%s: SustainableRate: %v, %v", tier, guess, err)
		return
	}
	speed := min(max(maxRealRate/guess, minSpeed), maxSpeed)
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) / speed) }
	plan := Plan{
		Tiers: []TierPlan{{Shape: shape, Tier: admission.TierConfig{
			Name: tier, SLO: measure.NewSLO(scaled(time.Duration(slo.TTFT)), scaled(time.Duration(slo.TPOT))),
		}}},
		Round: scaled(window), MaxRound: scaled(10 * time.Minute), MinRequests: 200,
	}
	res, err := Run(context.Background(), startSim(t, p, speed), plan, "vllm", nil)
	if err != nil || len(res.Tiers) != 1 {
		t.Errorf("%s: Run: %v, %d tiers", tier, err, len(res.Tiers))
		return
	}
	r := res.Tiers[0]
	got := r.KneeRate / speed
	// The truth over the window the calibration's rounds had at that rate.
	w, d := plan.withDefaults().window(r.KneeRate)
	var seeds []float64
	for seed := range uint64(5) {
		k, err := enginesim.SustainableRate(p, shape.Input, shape.Output, slo, enginesim.Search{
			Window: time.Duration(float64(w) * speed), Drain: time.Duration(float64(d) * speed), Seeds: []uint64{seed + 1},
		})
		if err != nil {
			t.Errorf("%s: SustainableRate: %v", tier, err)
			return
		}
		seeds = append(seeds, k)
	}
	truth := median(seeds)
	t.Logf("%s %d/%d at speed %.1f: λ* %.3f req/s, model %.3f req/s (%+.1f%%; seeds %.3f); %s", tier, shape.Input, shape.Output, speed, got, truth, 100*(got/truth-1), seeds, r.Rule)
	for _, pt := range r.Points {
		t.Logf("  %7.3f offered  %7.3f completed/s  %3.0f%%  TTFT p50 %6.2fs p95 %6.2fs  TPOT p95 %5.1fms", pt.Offered/speed, pt.Throughput/speed, 100*pt.Completion,
			pt.TTFTp50.Seconds()*speed, pt.TTFTp95.Seconds()*speed, pt.TPOTp95.Seconds()*speed*1000)
	}
	// Where the model's own knee moves by more than 10% from one arrival seed to the
	// next, one calibration cannot be closer than that: λ* must then lie within 10% of
	// the seeds' range.
	// A seed that sustains no rate (0) marks where the search gave up, not a knee.
	positive := slices.DeleteFunc(slices.Clone(seeds), func(k float64) bool { return k <= 0 })
	if len(positive) == 0 {
		t.Errorf("%s: the model sustains no rate for any seed", tier)
		return
	}
	lo, hi := slices.Min(positive), slices.Max(positive)
	soft := hi/lo-1 > 0.1
	if r.Limits == nil || math.Abs(got/truth-1) > 0.10 && !(soft && got >= 0.9*lo && got <= 1.1*hi) {
		t.Errorf("%s: λ* %.3f req/s, the model sustains %.3f (seeds %.3f): off by more than 10%% (%s)", tier, got, truth, seeds, r.Err)
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// startSim serves a simulator of p at speed until the test ends, and returns a target
// for it.
func startSim(t *testing.T, p enginesim.Profile, speed float64) *synth.Target {
	srv, err := enginesim.NewServer(enginesim.Config{Profile: p, Flavor: enginesim.FlavorVLLM, Speed: speed})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		hs.Close()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("simulator: %v", err)
		}
	})
	return &synth.Target{BaseURL: hs.URL, Model: p.Model, Client: &http.Client{Transport: tr}}
}

// Acceptance: on h20x8-flash with 8K/128 requests the measured curve shows the
// inflection of the published H20-3e rate scan (completions barely growing, p95 TTFT
// multiplying between 0.8× and 1.1×) and λ* lands below 1.1×. The scan measured a
// reference of 1.75 req/s with 32 streams, then +19% completions for +37.5% offered from
// 0.8× to 1.1×, with p95 TTFT going from 3.55 s to 26.85 s (docs/simulator.md).
func TestAcceptanceRateScanInflection(t *testing.T) {
	if raceEnabled {
		t.Skip("the simulator's prompt decoding is too slow under -race; run without -race")
	}
	t.Parallel()
	const speed = maxSpeed
	p, err := enginesim.LookupProfile("h20x8-flash")
	if err != nil {
		t.Fatal(err)
	}
	tier := admission.TierConfig{Name: "8k", SLO: measure.NewSLO(5*time.Second/speed, 100*time.Millisecond/speed)}
	plan := Plan{
		Tiers: []TierPlan{{Tier: tier, Shape: synth.Shape{Name: "8k", Input: 8192, Output: 128}}},
		Round: 200 * time.Second / speed, // the published scan's 600 requests in three rounds at 0.5×
	}
	res, err := Run(context.Background(), startSim(t, p, speed), plan, "sglang", nil)
	if err != nil || len(res.Tiers) != 1 {
		t.Fatalf("Run: %v, %d tiers", err, len(res.Tiers))
	}
	r := res.Tiers[0]
	at := func(m float64) Point {
		i := slices.IndexFunc(r.Points, func(p Point) bool { return p.Target == m*r.Reference })
		if i < 0 {
			t.Fatalf("no point at %.1f× the reference", m)
		}
		return r.Points[i]
	}
	lo, hi := at(0.8), at(1.1)
	grew, ttft := hi.Throughput/lo.Throughput-1, hi.TTFTp95.Seconds()/lo.TTFTp95.Seconds()
	t.Logf("reference %.3f req/s (published: 1.750); 0.8× → 1.1×: completions %+.0f%% (published +19%%), p95 TTFT %.2f s → %.2f s, ×%.1f (published 3.55 s → 26.85 s); λ* %.3f req/s = %.2f× the reference",
		r.Reference/speed, 100*grew, lo.TTFTp95.Seconds()*speed, hi.TTFTp95.Seconds()*speed, ttft, r.KneeRate/speed, r.KneeRate/r.Reference)
	if grew > 0.25 || ttft < 3 {
		t.Errorf("from 0.8× to 1.1× completions grew %+.0f%% and p95 TTFT ×%.1f; want at most +25%% and at least ×3", 100*grew, ttft)
	}
	if r.Limits == nil || r.KneeRate >= 1.1*r.Reference {
		t.Errorf("λ* %.3f req/s is not below 1.1× the reference %.3f (%s)", r.KneeRate/speed, r.Reference/speed, r.Rule)
	}
}
