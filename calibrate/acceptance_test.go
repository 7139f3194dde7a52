package calibrate

import (
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simnet"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// The acceptance tests calibrate over HTTP against the simulator, on virtual time: each
// runs inside a testing/synctest bubble, the simulator's engine and the prober talk over
// an in-memory network (internal/memnet), and the bubble's clock advances only when every
// goroutine waits. The engine's steps, the prober's pacing and its measurement therefore
// keep the model's time exactly, and the real time the machine spends besides the model
// (decoding 8K-token prompts, streaming, waiting for a core on a loaded machine) counts
// for nothing: the curve a calibration measures is the model's, whatever else the
// machine runs, and the knee it finds can be held to the one enginesim computes from the
// model alone. The rounds are as long as a real calibration's (a minute and more of the
// engine's time) and cost only the CPU the requests take. How long a calibration really
// takes on a machine, and what the wall clock adds to its figures, is for the benchmarks
// (bench/calibrated.sh, docs/benchmarks.md).

// window is the engine time a point's round covers at least; low rates get longer
// rounds, to bring 200 requests.
const window = time.Minute

// tierSLOs are the SLOs of the built-in tiers in the acceptance tests: longer prompts
// take longer to prefill, and their tiers promise less.
var tierSLOs = map[string]measure.SLO{
	"short":  measure.NewSLO(2*time.Second, 100*time.Millisecond),
	"medium": measure.NewSLO(5*time.Second, 100*time.Millisecond),
	"long":   measure.NewSLO(10*time.Second, 150*time.Millisecond),
	"xlong":  measure.NewSLO(15*time.Second, 150*time.Millisecond),
}

// skipUnderRace skips an acceptance test under the race detector: on virtual time its
// figures would come out the same, but its thousands of long prompts cost minutes of CPU
// there. make's acceptance step runs it without -race.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("thousands of long prompts cost minutes of CPU under -race; make acceptance runs it without -race")
	}
}

// Acceptance: "against the simulator profiles, whose true sustainable rate per tier is
// known from the model, the derived λ* is within 10% of it for every tier, in a test
// with a short preset." Each tier of the built-in tiers is calibrated over HTTP against a
// simulator of its own, in a bubble of its own, and its λ* compared with
// enginesim.SustainableRate for the same shape, SLO and window.
func TestAcceptanceKneePerTier(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	for _, profile := range []string{"h20x8-flash", "h200-9b"} {
		p, err := enginesim.LookupProfile(profile)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := DefaultPlan(admission.DefaultConfig(), measure.SLO{}, p.MaxModelLen, 128)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range plan.Tiers {
			t.Run(profile+"/"+tp.Tier.Name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) { checkTier(t, p, tp.Tier.Name, tp.Shape) })
			})
		}
	}
}

// checkTier calibrates tier, of requests of shape, against a simulator of p and holds
// its λ* to the model's. It runs inside a synctest bubble.
func checkTier(t *testing.T, p enginesim.Profile, tier string, shape synth.Shape) {
	slo := tierSLOs[tier]
	plan := Plan{
		Tiers: []TierPlan{{Shape: shape, Tier: admission.TierConfig{
			Name: tier, SLO: slo,
		}}},
		Round: window, MaxRound: 10 * time.Minute, MinRequests: 200,
	}
	res, err := Run(t.Context(), startSim(t, p), plan, "vllm", nil)
	if err != nil || len(res.Tiers) != 1 {
		t.Fatalf("Run: %v, %d tiers", err, len(res.Tiers))
	}
	r := res.Tiers[0]
	got := r.KneeRate
	// The truth over the window the calibration's rounds had at that rate.
	w, d := plan.withDefaults().window(r.KneeRate)
	var seeds []float64
	for seed := range uint64(5) {
		k, err := enginesim.SustainableRate(p, shape.Input, shape.Output, slo, enginesim.Search{Window: w, Drain: d, Seeds: []uint64{seed + 1}})
		if err != nil {
			t.Fatalf("SustainableRate: %v", err)
		}
		seeds = append(seeds, k)
	}
	truth := median(seeds)
	t.Logf("%s %d/%d: λ* %.3f req/s, model %.3f req/s (%+.1f%%; seeds %.3f); %s; %s of the engine's time",
		tier, shape.Input, shape.Output, got, truth, 100*(got/truth-1), seeds, r.Rule, res.Finished.Sub(res.Started).Round(time.Second))
	for _, pt := range r.Points {
		t.Logf("  %7.3f offered  %7.3f completed/s  %3.0f%%  TTFT p50 %6.2fs p95 %6.2fs  TPOT p95 %5.1fms", pt.Offered, pt.Throughput, 100*pt.Completion,
			pt.TTFTp50.Seconds(), pt.TTFTp95.Seconds(), pt.TPOTp95.Seconds()*1000)
	}
	// Where the model's own knee moves by more than 10% from one arrival seed to the
	// next, one calibration cannot be closer than that: λ* must then lie within 10% of
	// the seeds' range.
	// A seed that sustains no rate (0) marks where the search gave up, not a knee.
	positive := slices.DeleteFunc(slices.Clone(seeds), func(k float64) bool { return k <= 0 })
	if len(positive) == 0 {
		t.Fatalf("the model sustains no rate for any seed")
	}
	lo, hi := slices.Min(positive), slices.Max(positive)
	soft := hi/lo-1 > 0.1
	if r.Limits == nil || math.Abs(got/truth-1) > 0.10 && !(soft && got >= 0.9*lo && got <= 1.1*hi) {
		t.Errorf("λ* %.3f req/s, the model sustains %.3f (seeds %.3f): off by more than 10%% (%s)", got, truth, seeds, r.Err)
	}
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// startSim serves a simulator of p on an in-memory network until the test ends, and
// returns a target for it. Inside a synctest bubble it runs on the bubble's clock.
func startSim(t *testing.T, p enginesim.Profile) *synth.Target {
	t.Helper()
	_, hs := simnet.Start(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorVLLM}, nil)
	return &synth.Target{BaseURL: hs.URL, Model: p.Model, Client: hs.Client}
}

// Acceptance: on h20x8-flash with 8K/128 requests the measured curve shows the
// inflection of the published H20-3e rate scan (docs/simulator.md: completions barely
// growing, p95 TTFT multiplying between 0.8× and 1.1×) and λ* lands below 1.1×. The
// published scan measured a reference of 1.75 req/s with
// 32 streams, then +19% completions for +37.5% offered from 0.8× to 1.1×, with p95 TTFT
// going from 3.55 s to 26.85 s.
func TestAcceptanceRateScanInflection(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := enginesim.LookupProfile("h20x8-flash")
		if err != nil {
			t.Fatal(err)
		}
		tier := admission.TierConfig{Name: "8k", SLO: measure.NewSLO(5*time.Second, 100*time.Millisecond)}
		plan := Plan{
			Tiers: []TierPlan{{Tier: tier, Shape: synth.Shape{Name: "8k", Input: 8192, Output: 128}}},
			Round: 200 * time.Second, // the seed's 600 requests in three rounds at 0.5×
		}
		res, err := Run(t.Context(), startSim(t, p), plan, "sglang", nil)
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
		t.Logf("reference %.3f req/s (seed: 1.750); 0.8× → 1.1×: completions %+.0f%% (seed +19%%), p95 TTFT %.2f s → %.2f s, ×%.1f (seed 3.55 s → 26.85 s); λ* %.3f req/s = %.2f× the reference",
			r.Reference, 100*grew, lo.TTFTp95.Seconds(), hi.TTFTp95.Seconds(), ttft, r.KneeRate, r.KneeRate/r.Reference)
		if grew > 0.25 || ttft < 3 {
			t.Errorf("from 0.8× to 1.1× completions grew %+.0f%% and p95 TTFT ×%.1f; want at most +25%% and at least ×3", 100*grew, ttft)
		}
		if r.Limits == nil || r.KneeRate >= 1.1*r.Reference {
			t.Errorf("λ* %.3f req/s is not below 1.1× the reference %.3f (%s)", r.KneeRate, r.Reference, r.Rule)
		}
	})
}
