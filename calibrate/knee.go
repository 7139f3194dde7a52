package calibrate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// Limits from measured inflection points. An engine offered more than it can serve keeps
// its throughput flat while its queue, and every request's TTFT, grows without bound
// (the published H20-3e rate scan, docs/simulator.md: +19% completions for +37.5%
// offered, p95 TTFT 3.55 s → 26.85 s).
// The sustainable rate λ* is the highest offered rate before that happens; a tier's
// limits follow from it.

// Point is one offered arrival rate and what the engine did with it.
type Point struct {
	Target     float64       `yaml:"target_rps,omitempty" json:"target_rps,omitempty"` // requests/s asked for
	Offered    float64       `yaml:"offered_rps" json:"offered_rps"`                   // requests/s sent
	Throughput float64       `yaml:"throughput_rps" json:"throughput_rps"`             // requests/s completed
	Completion float64       `yaml:"completion" json:"completion"`                     // completed / offered requests
	TTFTp50    time.Duration `yaml:"ttft_p50" json:"ttft_p50"`
	TTFTp95    time.Duration `yaml:"ttft_p95" json:"ttft_p95"`
	TPOTp95    time.Duration `yaml:"tpot_p95" json:"tpot_p95"`
	MeanE2E    time.Duration `yaml:"mean_e2e" json:"mean_e2e"`
}

// The sustainability rule (REFERENCE: knee detection).
const (
	minCompletion = 0.95 // completed/offered at a sustainable rate
	minEfficiency = 0.7  // (ΔX/X) / (Δλ/λ) against a sustainable lower rate
	// minStep is how much lower, at least, the rate that a point's marginal efficiency is
	// measured against must be: between rates a bisection left a few percent apart, the
	// noise of a bounded round outweighs the difference in throughput.
	minStep = 1.25
)

// sustainable reports whether the engine kept up at p, given a lower sustainable point
// base (nil for none): p95 TTFT and p95 TPOT within the SLO, at least 95% of the
// offered requests completed, and throughput still growing with the offered rate — a
// marginal efficiency (ΔX/X)/(Δλ/λ) from base of at least 0.7. It returns the reason
// when not.
func sustainable(p Point, base *Point, slo measure.SLO) (bool, string) {
	switch {
	case !slo.MetTTFT(p.TTFTp95):
		return false, fmt.Sprintf("p95 TTFT %s over the SLO %s", p.TTFTp95.Round(time.Millisecond), time.Duration(slo.TTFT))
	case !slo.MetTPOT(p.TPOTp95):
		return false, fmt.Sprintf("p95 TPOT %s over the SLO %s", p.TPOTp95.Round(time.Millisecond), time.Duration(slo.TPOT))
	case p.Completion < minCompletion:
		return false, fmt.Sprintf("%.0f%% of the offered requests completed", 100*p.Completion)
	}
	if eff, ok := efficiency(p, base); ok && eff < minEfficiency {
		return false, fmt.Sprintf("marginal efficiency %.2f from %.3g req/s: throughput no longer grows with the offered rate", eff, base.Offered)
	}
	return true, ""
}

// efficiency returns (ΔX/X)/(Δλ/λ) from base to p, and false when it is undefined.
func efficiency(p Point, base *Point) (float64, bool) {
	if base == nil || base.Throughput <= 0 || base.Offered <= 0 || p.Offered <= base.Offered {
		return 0, false
	}
	return ((p.Throughput - base.Throughput) / base.Throughput) / ((p.Offered - base.Offered) / base.Offered), true
}

// kneeOf returns the index of the knee among points (by increasing offered rate): the
// highest sustainable rate below the first unsustainable one, and the rule that chose
// it; -1 when even the lowest rate was not sustainable. Each point's marginal efficiency
// is measured from the highest sustainable point at least a quarter lower in offered
// rate, or from the lowest sustainable point when none is that far below.
func kneeOf(points []Point, slo measure.SLO) (int, string) {
	best, why := -1, "no measured rate was sustainable"
	for i := range points {
		ok, reason := sustainable(points[i], baseFor(points, best, i), slo)
		if !ok {
			if best >= 0 {
				why = fmt.Sprintf("%.3g req/s is the highest sustainable rate; at %.3g req/s %s", points[best].Offered, points[i].Offered, reason)
			} else {
				why = fmt.Sprintf("at the lowest rate, %.3g req/s, %s", points[i].Offered, reason)
			}
			return best, why
		}
		best = i
		why = fmt.Sprintf("%.3g req/s, the highest rate measured, was sustainable", points[i].Offered)
	}
	return best, why
}

// baseFor returns the point that point i's efficiency is measured from, among the
// sustainable points 0..best: the highest one at least minStep below it, else the first.
func baseFor(points []Point, best, i int) *Point {
	if best < 0 {
		return nil
	}
	for j := best; j >= 0; j-- {
		if points[j].Offered*minStep <= points[i].Offered {
			return &points[j]
		}
	}
	return &points[0]
}

// kneedle returns the offered rate at the knee of the throughput curve by the Kneedle
// method (Satopää et al., 2011): normalise both axes to [0,1] and take the point
// farthest above the line from the first point to the last. It needs at least five
// points, and reports false with fewer or with a flat curve.
func kneedle(points []Point) (float64, bool) {
	if len(points) < 5 {
		return 0, false
	}
	ps := slices.Clone(points)
	slices.SortFunc(ps, func(a, b Point) int { return cmp.Compare(a.Offered, b.Offered) })
	x0, x1 := ps[0].Offered, ps[len(ps)-1].Offered
	ys := make([]float64, len(ps))
	for i, p := range ps {
		ys[i] = p.Throughput
	}
	y0, y1 := slices.Min(ys), slices.Max(ys)
	if x1 <= x0 || y1 <= y0 {
		return 0, false
	}
	best, at := math.Inf(-1), 0
	for i, p := range ps {
		d := (p.Throughput-y0)/(y1-y0) - (p.Offered-x0)/(x1-x0)
		if d > best {
			best, at = d, i
		}
	}
	return ps[at].Offered, best > 0
}

// deriveLimits returns a tier's limits from its knee point k:
//
//   - a token bucket at 0.9 λ*, which the SLO feedback may raise to MaxRate = 1.5 λ*
//     while the SLOs hold: λ* is measured with unshaped Poisson arrivals, and the
//     smoother arrivals admission lets through are sustained at higher rates (slogate's
//     goodput benchmark, docs/benchmarks.md, measured 1.3 λ*). Its burst holds the
//     arrivals of one TTFT SLO at that rate, so that Poisson bursts below λ* are not
//     turned away, and at least as many requests as the engine, nearly idle, answers one
//     after another inside the TTFT SLO (the SLO ÷ idle, the median TTFT at the lowest
//     rate measured): a tier of long requests has a knee so low that one SLO's worth of
//     its arrivals rounds to one request, and a burst of 1 would turn away any two that
//     arrive close together on an engine that can start both in time;
//   - an in-flight cap of twice Little's law at the knee, 2 λ* × mean E2E (at least 1):
//     Little's law gives the mean in flight at λ*, and the SLO feedback, which starts at
//     the cap, cuts it (down to 1) where the engine cannot take that many;
//   - a queue wait of the TTFT SLO minus the typical (median) TTFT at λ*, the time the
//     engine itself needs for the first token, at least 100 ms; and a queue of rate ×
//     wait requests, at least 1;
//   - where the prefill rate is known (prefill, in prompt tokens per second; 0 when
//     not), a bound on the tier's prompts in prefill of 0.9 × the TTFT SLO × that rate
//     (max_prefill_tokens): the prompts the engine prefills in nine tenths of the SLO,
//     the share of it the SLO feedback aims at. It bounds a clump of the tier's requests
//     where it would miss its TTFT, whatever its size in requests, so the bucket need not:
//     its burst is then at least the in-flight cap, and a clump after a quiet spell
//     is held by the engine's prefill and the in-flight cap rather than turned away by
//     a rate measured under steady arrivals.
func deriveLimits(k Point, idle time.Duration, prefill float64, slo measure.SLO) admission.TierConfig {
	rate := 0.9 * k.Offered
	burst := max(int(math.Ceil(rate*time.Duration(slo.TTFT).Seconds())), 1)
	if idle > 0 {
		burst = max(burst, int(time.Duration(slo.TTFT)/idle))
	}
	inFlight := max(int(math.Ceil(2*k.Offered*k.MeanE2E.Seconds())), 1)
	wait := max(time.Duration(slo.TTFT)-k.TTFTp50, 100*time.Millisecond)
	var maxPrefill int
	if tokens := prefillShare * time.Duration(slo.TTFT).Seconds() * prefill; tokens >= 1 && tokens < math.MaxInt32 {
		maxPrefill = int(tokens)
		burst = max(burst, inFlight)
	}
	return admission.TierConfig{
		Rate: round3(rate), MaxRate: round3(1.5 * k.Offered),
		Burst:       burst,
		MaxInFlight: inFlight, MinInFlight: 1,
		MaxQueue: max(int(math.Ceil(rate*wait.Seconds())), 1), MaxQueueWait: measure.Duration(wait.Round(time.Millisecond)),
		MaxPrefillTokens: maxPrefill,
		SLO:              slo,
	}
}

// prefillShare is the share of the TTFT SLO the bound on prompts in prefill fills: the
// SLO feedback's default target (admission.Feedback.Target).
const prefillShare = 0.9

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
