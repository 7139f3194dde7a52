package calibrate

import (
	"fmt"
	"math"
	"time"
)

// EngineCaps are the engines' own admission caps sized from a calibration: a second
// line of defence inside the engine, behind slogate's tiers, for traffic that reaches the
// engine some other way or more than slogate let through. Each follows the rule the
// engine's authors document for it, from the measured knees (docs/simulator.md, "The
// engines' admission caps", says what each engine counts):
//
//   - vLLM --max-num-queued-reqs caps the requests waiting or running: Little's law at
//     the knee, λ* × mean E2E there, rounded up;
//   - vLLM --max-num-queued-tokens caps the prompt tokens of the requests not yet past
//     prefill: the TTFT SLO × the prefill throughput, the prompt tokens per second the
//     engine completed at the knee (completions/s × prompt length), rounded up;
//   - SGLang --max-queued-requests caps the waiting queue alone: λ* × the wait the TTFT
//     SLO leaves after the p95 TTFT at the knee, rounded up, at least 1.
//
// The engine has one queue for every tier, so each flag takes the calibrated tier that
// gives the largest value (named in its Basis): a cap sized for the smallest tier would
// refuse the others' load that slogate's tiers admit.
type EngineCaps struct {
	MaxNumQueuedReqs   int // vLLM --max-num-queued-reqs; 0: no tier calibrated
	MaxNumQueuedTokens int // vLLM --max-num-queued-tokens; 0: no tier calibrated
	MaxQueuedRequests  int // SGLang --max-queued-requests; 0: no tier calibrated

	// Basis says, per flag in the order above, how its value was derived.
	Basis [3]string
}

// EngineCaps sizes the engines' admission caps from the calibrated tiers of r (those
// with a knee); zero values where no tier has one. Every value it sets is at least 1.
func (r Result) EngineCaps() EngineCaps {
	var f EngineCaps
	for _, t := range r.Tiers {
		if t.Knee < 0 || t.Knee >= len(t.Points) || !(t.KneeRate > 0) {
			continue
		}
		p := t.Points[t.Knee]
		slo := time.Duration(t.SLO.TTFT)
		reqs := ceilAtLeast1(t.KneeRate * p.MeanE2E.Seconds())
		if reqs > f.MaxNumQueuedReqs {
			f.MaxNumQueuedReqs = reqs
			f.Basis[0] = fmt.Sprintf("Little's law at tier %s's knee: %.3f req/s × %.2f s mean E2E", t.Tier, t.KneeRate, p.MeanE2E.Seconds())
		}
		prefill := p.Throughput * float64(t.Shape.Input)
		if tokens := ceilAtLeast1(slo.Seconds() * prefill); tokens > f.MaxNumQueuedTokens {
			f.MaxNumQueuedTokens = tokens
			f.Basis[1] = fmt.Sprintf("TTFT SLO %s × %.0f prompt tokens/s prefilled at tier %s's knee (%.3f completions/s × %d tokens)", slo, prefill, t.Tier, p.Throughput, t.Shape.Input)
		}
		wait := max(slo-p.TTFTp95, 0)
		if queued := ceilAtLeast1(t.KneeRate * wait.Seconds()); queued > f.MaxQueuedRequests {
			f.MaxQueuedRequests = queued
			f.Basis[2] = fmt.Sprintf("%.3f req/s × %.2f s the TTFT SLO leaves for queueing at tier %s's knee (%s − p95 TTFT %s)", t.KneeRate, wait.Seconds(), t.Tier, slo, p.TTFTp95.Round(time.Millisecond))
		}
	}
	return f
}

// ceilAtLeast1 rounds x up to an int of at least 1, saturating where it would overflow.
func ceilAtLeast1(x float64) int {
	switch {
	case !(x > 1): // NaN too
		return 1
	case x >= math.MaxInt32:
		return math.MaxInt32
	}
	return int(math.Ceil(x - 1e-9))
}

// VLLM returns the vLLM flags, as arguments of vllm serve; nil when none was sized.
func (f EngineCaps) VLLM() []string {
	if f.MaxNumQueuedReqs == 0 {
		return nil
	}
	return []string{"--max-num-queued-reqs", fmt.Sprint(f.MaxNumQueuedReqs), "--max-num-queued-tokens", fmt.Sprint(f.MaxNumQueuedTokens)}
}

// SGLang returns the SGLang flag, as arguments of sglang.launch_server; nil when none
// was sized.
func (f EngineCaps) SGLang() []string {
	if f.MaxQueuedRequests == 0 {
		return nil
	}
	return []string{"--max-queued-requests", fmt.Sprint(f.MaxQueuedRequests)}
}
