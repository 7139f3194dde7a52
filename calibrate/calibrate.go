// Package calibrate measures where each admission tier's engine throughput stops growing
// while TTFT explodes, and derives the tier's limits from that knee: it drives the
// prober (package synth, which measures) and writes admission control's tier limits,
// so that an operator never has to guess a tier's numbers. It owns slogate's one knee
// rule, which the probe reports apply to rate scans too (ScanKnee).
//
// For each tier, with a representative request shape: a closed-loop run at a
// concurrency that saturates the engine gives a reference rate; open-loop Poisson
// arrivals at 0.5×, 0.8× and 1.1× of it (as the published H20-3e rate scan did; see
// docs/simulator.md) give the first
// points of the throughput and latency curve; then the bracket between the highest
// sustainable rate and the first unsustainable one is bisected until it is within 5%
// (λ* is its lower end, so a bracket of 10% would leave λ* up to 10% under the knee).
//
// The rule: a rate is sustainable when p95 TTFT and p95 TPOT are within the tier's SLO,
// at least 95% of the offered requests completed, and throughput still grows with the
// offered rate (a marginal efficiency (ΔX/X)/(Δλ/λ) of at least 0.7 from a sustainable
// rate at least a quarter lower, or else the lowest). The knee λ* is the highest
// sustainable rate below the first unsustainable one, and a tier's limits follow from
// the point measured there (TierResult.Limits, which Result.Config writes into a tiers
// file).
package calibrate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// Plan is what a calibration measures and how long it may take.
type Plan struct {
	Tiers []TierPlan

	RefConcurrency int           // streams of the closed-loop reference run; default 32
	RefDuration    time.Duration // length of the reference run; default Round
	Multiples      []float64     // first offered rates, as multiples of the reference; default 0.5, 0.8, 1.1
	Round          time.Duration // arrival window of each point; default 60s
	Drain          time.Duration // how long after the window requests may finish; default 2 × Round
	// MinRequests is the fewest arrivals a point's window should expect, for its p95 to
	// mean something: at low rates the window grows to bring them, up to MaxRound, and
	// the drain with it. Defaults 100 and 5 × Round.
	MinRequests int
	MaxRound    time.Duration
	// Climb is the factor to the next rate when every rate measured was sustainable;
	// default 1.4.
	Climb     float64
	Bracket   float64 // stop when the unsustainable rate is within this share above λ*; default 0.05
	MaxPoints int     // points per tier at most; default 10
	Seed      uint64  // of the Poisson arrivals, the same at every rate of a tier
	// PrefillRound is the length of each of a tier's two prefill rounds (run.prefillRate);
	// default 15s, or Round where that is shorter.
	PrefillRound time.Duration
}

// TierPlan is one tier to calibrate: its configuration (name, input bound, SLO) and the
// request shape that stands for its traffic.
type TierPlan struct {
	Tier  admission.TierConfig
	Shape synth.Shape
}

// Only returns the plan with only the named tiers (comma-separated), each once, in the
// order first named; all of them for "".
func (p Plan) Only(names string) (Plan, error) {
	if strings.TrimSpace(names) == "" {
		return p, nil
	}
	var tiers []TierPlan
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(p.Tiers, func(t TierPlan) bool { return t.Tier.Name == n })
		if i < 0 {
			return Plan{}, fmt.Errorf("calibrate: no tier %q to calibrate (or the engine's context is too short for it)", n)
		}
		if !slices.ContainsFunc(tiers, func(t TierPlan) bool { return t.Tier.Name == n }) {
			tiers = append(tiers, p.Tiers[i]) // a tier named twice is calibrated once
		}
	}
	p.Tiers = tiers
	return p, nil
}

// withDefaults fills a plan's zero values.
func (p Plan) withDefaults() Plan {
	if p.RefConcurrency <= 0 {
		p.RefConcurrency = 32
	}
	if p.Round <= 0 {
		p.Round = time.Minute
	}
	if p.RefDuration <= 0 {
		p.RefDuration = p.Round
	}
	if len(p.Multiples) == 0 {
		p.Multiples = []float64{0.5, 0.8, 1.1}
	}
	if p.Drain <= 0 {
		p.Drain = 2 * p.Round
	}
	if p.MinRequests <= 0 {
		p.MinRequests = 100
	}
	if p.MaxRound < p.Round {
		p.MaxRound = 5 * p.Round
	}
	if p.Climb <= 1 {
		p.Climb = 1.4
	}
	if p.Bracket <= 0 {
		p.Bracket = 0.05
	}
	if p.MaxPoints <= 0 {
		p.MaxPoints = 10
	}
	if p.PrefillRound <= 0 {
		p.PrefillRound = min(15*time.Second, p.Round)
	}
	return p
}

// Quick returns p as a quick calibration, for trying slogate calibrate out on a fast
// engine (slogate sim's tiny profile calibrates its two tiers in about a minute): a
// reference and rounds of 4 s, drained for at most 4 s, each with at least 50 requests
// (up to 20 s at low rates); first rates at 0.5× and 1.1× the reference, doubled while
// every rate is sustainable; and the bracket closed to 20%, in 6 rates per tier at most.
//
// What it gives up, against a full calibration's 60 s rounds, 5% bracket, 10 rates and
// 100 requests:
//   - λ* may lie up to 20% under the knee, more where a tier runs out of rates before
//     its bracket closes (the tiny simulator's short tier, on the model's time: between 940
//     and 1,821 req/s);
//     each tier's rule names the bracket's upper end, the first unsustainable rate.
//   - A 4 s round leaves a queue little time to build, so p95 TTFT shows an overload only
//     once the queue of 4 s waits longer than the SLO, and the knee rests more on
//     throughput no longer growing: a rate some 10% past the knee may pass for
//     sustainable (the tiny simulator's medium tier: λ* 11% over the rate its model
//     sustains for a minute).
//   - A p95 of 50 requests, and 4 s of a machine's noise, move more from one calibration
//     to the next.
//   - A 4 s reference of 32 streams completes nothing on an engine whose requests take
//     longer than that: calibrate such an engine in full.
func (p Plan) Quick() Plan {
	p.RefDuration, p.Round, p.Drain = quickRound, quickRound, quickRound
	p.MinRequests, p.MaxRound = 50, 5*quickRound
	p.Multiples = []float64{0.5, 1.1}
	p.Climb, p.Bracket, p.MaxPoints = 2, 0.2, 6
	return p
}

// quickRound is the rounds' length in a quick calibration.
const quickRound = 4 * time.Second

// waitShare is how long a round waits after its arrival window for the requests still
// in flight, in the mean over a tier's rates, as a share of the window: a sustainable
// rate waits for its last requests (their E2E), an unsustainable one for the queue it
// built to drain, about (λ/X − 1) × the window. Calibrations of the tiny simulator
// (docs/benchmarks.md) waited 0.26 of the window with the quick plan's 4 s rounds on a
// quiet machine and 0.29 on a busy one; 0.11 and 0.29 with the full plan's search in
// 10 s rounds.
const waitShare = 0.25

// Precision says, in words, how precise a calibration by the plan is: its rounds, the
// requests a p95 rests on, and how close to the knee its bisection goes.
func (p Plan) Precision() string {
	p = p.withDefaults()
	return fmt.Sprintf("a %s reference, then rounds of %s (longer where they would bring fewer than %d requests, up to %s) drained for at most %s; "+
		"the bracket above λ* closed to %.0f%%, in %d rates per tier at most: λ* may be up to %.0f%% under the knee, more where a tier ran out of rates first (its rule names the bracket's upper end); "+
		"an overload shows in p95 TTFT only once the queue it builds in %s waits longer than the SLO, and a rate a little past the knee may pass for sustainable, more so the shorter the rounds",
		p.RefDuration, p.Round, p.MinRequests, p.MaxRound, p.Drain, 100*p.Bracket, p.MaxPoints, 100*p.Bracket, p.Round)
}

// Estimate returns how long a calibration by the plan takes when every tier measures
// MaxPoints rates and every rate brings MinRequests within Round: for each tier, the
// reference run and the two prefill rounds, then MaxPoints rounds, each its window and the wait for its last
// requests (a quarter of the window, at most its drain; see waitShare). A tier whose
// knee lies far above its reference measures all MaxPoints rates (the tiny simulator's
// do); one whose knee lies near it closes its bracket sooner, in about len(Multiples)+3;
// and a tier that sustains fewer than MinRequests per Round gets longer rounds.
func (p Plan) Estimate() time.Duration {
	p = p.withDefaults()
	point := p.Round + min(time.Duration(waitShare*float64(p.Round)), p.Drain)
	return time.Duration(len(p.Tiers)) * (p.RefDuration + 2*p.PrefillRound + time.Duration(p.MaxPoints)*point)
}

// DefaultPlan returns a plan for the tiers of cfg (with the sidecar's SLOs where a tier
// has none): each tier's shape has three quarters of its input bound (the last tier,
// unbounded, twice the previous bound), at most the engine's context length minus the
// output, and output tokens of output (at least 1).
func DefaultPlan(cfg admission.Config, slo measure.SLO, maxModelLen, output int) (Plan, error) {
	if err := cfg.Validate(); err != nil {
		return Plan{}, err
	}
	if output < 1 {
		return Plan{}, fmt.Errorf("%d output tokens per request: want at least 1", output)
	}
	var p Plan
	prev := 0
	for _, t := range cfg.Tiers {
		t.SLO = t.SLO.Or(slo)
		input := t.MaxInputTokens * 3 / 4
		if t.MaxInputTokens == 0 {
			input = max(2*prev, 1024)
		}
		if maxModelLen > 0 {
			input = min(input, maxModelLen-output)
		}
		if input <= prev*3/4 && prev > 0 || input < 1 {
			break // the engine's context ends below this tier: nothing of it can be sent
		}
		p.Tiers = append(p.Tiers, TierPlan{Tier: t, Shape: synth.Shape{Name: t.Name, Input: input, Output: output}})
		prev = t.MaxInputTokens
	}
	if len(p.Tiers) == 0 {
		return Plan{}, fmt.Errorf("calibrate: no tier fits the engine's context of %d tokens", maxModelLen)
	}
	return p, nil
}
