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

// longPrefillRatio is how many times the shortest tier's prompt bound a tier's prompts
// must reach before LongPrefillThreshold advises the flag: a prefill that long holds the
// short prompts behind it for several steps.
const longPrefillRatio = 4

// LongPrefillThreshold advises vLLM's --long-prefill-token-threshold for the calibrated
// tiers of r, and says why; 0 and "" when no tier's prompts reach longPrefillRatio times
// the shortest tier's bound. vLLM's scheduler gives each step's token budget to the
// running requests first, a long prompt's prefill chunks among them, so a short prompt
// that arrives during a long prefill waits for all of it (vllm/v1/core/sched/scheduler.py,
// Scheduler.schedule); the flag caps one request's prefill tokens per step, and at the
// shortest tier's bound leaves the rest of the step to the prompts behind it. On the
// seven-shape mix (docs/benchmarks.md) it is what lets the short tier's TTFT SLO hold.
// The step's budget, --max-num-batched-tokens, should then be at least twice it.
func (r Result) LongPrefillThreshold() (int, string) {
	shortest, longest := math.MaxInt, 0
	var short, long string
	for _, t := range r.Tiers {
		if t.Knee < 0 || t.Limits == nil {
			continue
		}
		bound := t.Shape.Input
		if b := t.Limits.MaxInputTokens; b > 0 {
			bound = b
		}
		if bound < shortest {
			shortest, short = bound, t.Tier
		}
		if t.Shape.Input > longest {
			longest, long = t.Shape.Input, t.Tier
		}
	}
	if longest == 0 || longest < longPrefillRatio*shortest {
		return 0, ""
	}
	return shortest, fmt.Sprintf("tier %s's %d-token prompts are %.0f times tier %s's bound of %d: a prefill that long would hold the short prompts behind it; at %d tokens a step, the rest of the step goes to them (keep --max-num-batched-tokens at least %d)",
		long, longest, float64(longest)/float64(shortest), short, shortest, shortest, 2*shortest)
}
