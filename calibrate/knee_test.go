package calibrate

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

var kneeSLO = measure.NewSLO(5*time.Second, 100*time.Millisecond)

// pt is a point that meets kneeSLO unless changed: throughput equal to the offered rate.
func pt(offered, throughput float64) Point {
	return Point{
		Offered: offered, Throughput: throughput, Completion: 1,
		TTFTp50: time.Second, TTFTp95: 2 * time.Second, TPOTp95: 50 * time.Millisecond, MeanE2E: 8 * time.Second,
	}
}

func TestSustainable(t *testing.T) {
	base := pt(1, 1)
	slowTTFT, slowTPOT, lost := pt(1.2, 1.2), pt(1.2, 1.2), pt(1.2, 1.2)
	slowTTFT.TTFTp95 = 6 * time.Second
	slowTPOT.TPOTp95 = 120 * time.Millisecond
	lost.Completion = 0.9
	cases := []struct {
		name   string
		p      Point
		base   *Point
		ok     bool
		reason string
	}{
		{"first point within the SLO", pt(1, 1), nil, true, ""},
		{"throughput keeps up", pt(1.5, 1.5), &base, true, ""},
		{"efficiency just at 0.7", pt(2, 1.7), &base, true, ""},
		{"throughput flat", pt(2, 1.1), &base, false, "marginal efficiency 0.10"},
		{"TTFT over", slowTTFT, &base, false, "p95 TTFT 6s over the SLO 5s"},
		{"TPOT over", slowTPOT, &base, false, "p95 TPOT 120ms over the SLO 100ms"},
		{"requests lost", lost, &base, false, "90% of the offered requests completed"},
		{"base not lower: no efficiency", pt(1, 0.5), &base, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := sustainable(tc.p, tc.base, kneeSLO)
			if ok != tc.ok || !strings.Contains(reason, tc.reason) || (tc.ok && reason != "") {
				t.Errorf("sustainable = %v %q, want %v %q", ok, reason, tc.ok, tc.reason)
			}
		})
	}
}

func TestKnee(t *testing.T) {
	over := pt(1.65, 1.2)
	over.TTFTp95 = 27 * time.Second
	cases := []struct {
		name   string
		points []Point
		want   int
		rule   string
	}{
		{"none measured", nil, -1, "no measured rate"},
		{"all sustainable", []Point{pt(0.5, 0.5), pt(0.8, 0.8), pt(1.1, 1.1)}, 2, "highest rate measured"},
		{"lowest already over", []Point{over}, -1, "at the lowest rate, 1.65 req/s, p95 TTFT"},
		// The shape of the published H20-3e rate scan (docs/simulator.md): completions
		// grow 19% for 37.5% more offered and p95 TTFT multiplies.
		{"rate scan inflection", []Point{pt(0.6, 0.6), pt(1.2, 1.1), over}, 1, "1.2 req/s is the highest sustainable rate; at 1.65 req/s p95 TTFT"},
		// Bisection leaves points a few percent apart; a round's noise in throughput must
		// not read as the throughput flattening between them.
		{"noise between close points", []Point{pt(0.5, 0.5), pt(0.8, 0.8), pt(0.85, 0.82), pt(0.9, 0.86), pt(1.1, 0.88)}, 3, "at 1.1 req/s marginal efficiency"},
		{"flat throughput under a lax SLO", []Point{pt(1, 1), pt(1.5, 1.5), pt(2, 1.55), pt(3, 1.6)}, 1, "marginal efficiency"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, rule := kneeOf(tc.points, kneeSLO)
			if got != tc.want || !strings.Contains(rule, tc.rule) {
				t.Errorf("kneeOf = %d %q, want %d %q", got, rule, tc.want, tc.rule)
			}
		})
	}
}

// TestScanKnee: the knee of a calibration's own report cells, under the tier's SLO, is
// the knee the calibration chose, whatever the cells' order; only valid cells enter.
func TestScanKnee(t *testing.T) {
	over := pt(1.65, 1.2)
	over.TTFTp95 = 27 * time.Second
	tr := TierResult{Tier: "t", Shape: synth.Shape{Name: "t", Input: 8192, Output: 128}, SLO: kneeSLO, Reference: 1.5,
		Points: []Point{pt(0.6, 0.6), pt(1.2, 1.1), over}}
	tr.Knee, tr.Rule = kneeOf(tr.Points, kneeSLO)
	cells := Result{Tiers: []TierResult{tr}}.Reports()[0].Cells
	reversed := slices.Clone(cells)
	slices.Reverse(reversed)
	failed := slices.Clone(cells)
	failed[2].State = synth.Failed
	none := slices.Clone(failed)
	none[0].State, none[1].State = synth.NotCompleted, synth.LoopedState
	cases := []struct {
		name  string
		cells []synth.Cell
		want  int
		rule  string
	}{
		{"the calibration's cells", cells, tr.Knee, tr.Rule},
		{"in reverse order", reversed, 1, tr.Rule},
		{"an invalid cell does not enter", failed, 1, "1.2 req/s, the highest rate measured, was sustainable"},
		{"no valid cell", none, -1, "no measured rate was sustainable"},
		{"none", nil, -1, "no measured rate was sustainable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, rule := ScanKnee(tc.cells, kneeSLO); got != tc.want || rule != tc.rule {
				t.Errorf("ScanKnee = %d %q, want %d %q", got, rule, tc.want, tc.rule)
			}
		})
	}
}

func TestKneedle(t *testing.T) {
	// Throughput grows with the offered rate up to 1.0 and then stays flat.
	curve := []Point{pt(2, 1.02), pt(0.25, 0.25), pt(0.5, 0.5), pt(1, 1), pt(0.75, 0.75), pt(1.5, 1.01)}
	if k, ok := kneedle(curve); !ok || k != 1 {
		t.Errorf("kneedle = %v %v, want 1 true", k, ok)
	}
	cases := []struct {
		name   string
		points []Point
	}{
		{"too few points", curve[:4]},
		{"flat", []Point{pt(1, 1), pt(2, 1), pt(3, 1), pt(4, 1), pt(5, 1)}},
		{"straight line", []Point{pt(1, 1), pt(2, 2), pt(3, 3), pt(4, 4), pt(5, 5)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if k, ok := kneedle(tc.points); ok {
				t.Errorf("kneedle = %v true, want no knee", k)
			}
		})
	}
}

func TestDeriveLimits(t *testing.T) {
	cases := []struct {
		name    string
		knee    Point
		idle    time.Duration // the median TTFT at the lowest rate measured
		prefill float64       // the engine's prefill rate, prompt tokens/s; 0 unknown
		want    admission.TierConfig
	}{
		{
			// 0.9 λ* = 1.08 up to 1.5 λ* = 1.8, burst 1.08 × 5 s; twice Little: 2 × 1.2 × 8 s =
			// 19.2 → 20; wait 5 s − 1 s; queue 1.08 × 4.
			"rate scan knee", pt(1.2, 1.2), 2 * time.Second, 0,
			admission.TierConfig{Rate: 1.08, MaxRate: 1.8, Burst: 6, MaxInFlight: 20, MinInFlight: 1, MaxQueue: 5, MaxQueueWait: measure.Duration(4 * time.Second), SLO: kneeSLO},
		},
		{
			// The engine's own TTFT exceeds the SLO: the wait keeps its 100 ms floor.
			"no room to queue", Point{Offered: 0.05, TTFTp50: 6 * time.Second, MeanE2E: time.Second}, 6 * time.Second, 0,
			admission.TierConfig{Rate: 0.045, MaxRate: 0.075, Burst: 1, MaxInFlight: 1, MinInFlight: 1, MaxQueue: 1, MaxQueueWait: measure.Duration(100 * time.Millisecond), SLO: kneeSLO},
		},
		{
			// Long requests of a low knee: one SLO's arrivals, 0.27 × 5 s, round to 1, but
			// an engine that answers in 1.2 s when idle starts 4 of them inside the 5 s.
			"low knee", Point{Offered: 0.3, TTFTp50: 2 * time.Second, MeanE2E: time.Minute}, 1200 * time.Millisecond, 0,
			admission.TierConfig{Rate: 0.27, MaxRate: 0.45, Burst: 4, MaxInFlight: 36, MinInFlight: 1, MaxQueue: 1, MaxQueueWait: measure.Duration(3 * time.Second), SLO: kneeSLO},
		},
		{
			// The same with the prefill rate known, 20,000 tokens/s: the prompts in prefill
			// are bounded at 0.9 × 5 s of it, and the burst grows to the in-flight cap.
			"low knee, prefill rate known", Point{Offered: 0.3, TTFTp50: 2 * time.Second, MeanE2E: time.Minute}, 1200 * time.Millisecond, 20000,
			admission.TierConfig{Rate: 0.27, MaxRate: 0.45, Burst: 36, MaxInFlight: 36, MinInFlight: 1, MaxQueue: 1, MaxQueueWait: measure.Duration(3 * time.Second), MaxPrefillTokens: 90000, SLO: kneeSLO},
		},
		{
			// A rate no bound can hold (a round's arithmetic gone wrong) sets none.
			"prefill rate out of range", pt(1.2, 1.2), 2 * time.Second, math.Inf(1),
			admission.TierConfig{Rate: 1.08, MaxRate: 1.8, Burst: 6, MaxInFlight: 20, MinInFlight: 1, MaxQueue: 5, MaxQueueWait: measure.Duration(4 * time.Second), SLO: kneeSLO},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := deriveLimits(tc.knee, tc.idle, tc.prefill, kneeSLO)
			if got != tc.want {
				t.Errorf("deriveLimits =\n %+v, want\n %+v", got, tc.want)
			}
		})
	}
}
