package calibrate

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// Acceptance: "slogate calibrate --quick finishes in about a minute on slogate sim
// --profile tiny, and its first line's estimate is within 20% of what it then takes."
// The quick plan of the built-in tiers, with the sidecar's default SLOs, calibrates a
// tiny simulator over HTTP on virtual time: the bubble's clock is the engine's, so the
// time the calibration takes is the plan's and the model's, whatever the machine runs
// besides (docs/benchmarks.md has the same on the wall clock, against slogate sim).
func TestAcceptanceQuickCalibration(t *testing.T) {
	skipUnderRace(t)
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, err := enginesim.LookupProfile("tiny")
		if err != nil {
			t.Fatal(err)
		}
		slo := measure.NewSLO(2*time.Second, 100*time.Millisecond)
		target := startSim(t, p)
		plan, err := PlanFor(t.Context(), target, admission.DefaultConfig(), slo, 128)
		if err != nil {
			t.Fatal(err)
		}
		plan = plan.Quick()
		est := plan.Estimate()
		start := time.Now()
		res, err := Run(t.Context(), target, plan, "vllm", nil)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		t.Logf("%d tiers in %s of the engine's time; estimate %s (%+.0f%%)", len(res.Tiers), took.Round(time.Millisecond), est, 100*(est.Seconds()/took.Seconds()-1))
		for _, r := range res.Tiers {
			truth, err := enginesim.SustainableRate(p, r.Shape.Input, r.Shape.Output, slo, enginesim.Search{Window: time.Minute, Drain: 2 * time.Minute, Seeds: []uint64{1}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %d/%d: λ* %.1f req/s in %d rates, the model sustains %.1f over a minute (%+.0f%%); %s", r.Tier, r.Shape.Input, r.Shape.Output,
				r.KneeRate, len(r.Points), truth, 100*(r.KneeRate/truth-1), r.Rule)
			for _, pt := range r.Points {
				t.Logf("  %7.1f offered  %7.1f completed/s  %3.0f%%  TTFT p95 %6.3fs  TPOT p95 %5.1fms", pt.Offered, pt.Throughput, 100*pt.Completion, pt.TTFTp95.Seconds(), pt.TPOTp95.Seconds()*1000)
			}
			if r.Limits == nil {
				t.Errorf("%s: not calibrated: %s", r.Tier, r.Err)
				continue
			}
			// What the quick plan gives up (Plan.Quick): λ* up to 20% under the knee, or more
			// where the bracket did not close, so the knee lies below the first unsustainable
			// rate; and a rate some 10% past the knee passing for sustainable in 4 s rounds.
			upper := math.Inf(1)
			if r.Knee+1 < len(r.Points) {
				upper = r.Points[r.Knee+1].Offered
			}
			if r.KneeRate > 1.2*truth || truth >= 1.1*upper {
				t.Errorf("%s: λ* %.1f req/s and the first unsustainable rate %.1f do not bracket the model's %.1f as Plan.Quick says", r.Tier, r.KneeRate, upper, truth)
			}
		}
		if res.Precision != plan.Precision() {
			t.Errorf("the calibration records its precision as %q, want the plan's %q", res.Precision, plan.Precision())
		}
		if len(res.Tiers) != 2 {
			t.Errorf("%d tiers calibrated, want the 2 of the built-in tiers that fit the tiny engine's context", len(res.Tiers))
		}
		if off := est.Seconds()/took.Seconds() - 1; off < -0.2 || off > 0.2 {
			t.Errorf("the estimate %s is %+.0f%% off the %s it took; want within 20%%", est, 100*off, took.Round(time.Millisecond))
		}
		if took > 90*time.Second {
			t.Errorf("a quick calibration of the tiny engine took %s, want about a minute (at most 90s)", took.Round(time.Second))
		}
	})
}
