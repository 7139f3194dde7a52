package admission

import (
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/slogate/slogate/measure"
)

// The SLO feedback of a tier's in-flight cap, an AIMD controller like TCP's congestion
// window or Netflix's concurrency-limits AIMD:
//
//   - Every Feedback.Interval, the tier's TTFT and TPOT observations of the last
//     Feedback.Window are summarised as their 95th percentiles (when at least
//     Feedback.MinSamples of either are known). Only requests dispatched since the cap
//     last changed count: a request's TPOT is known only when it ends, many seconds
//     after it was admitted, and judging a new cap by requests admitted under the old
//     one makes the controller overshoot and then back off again and again.
//   - If either p95 exceeds Feedback.Target (default 0.9) of the tier's SLO, the cap is
//     multiplied by Feedback.Backoff (default 0.9), or by aim/p95 when the p95 overshoots
//     by more than that (never by less than 0.5, as Envoy's gradient controller scales
//     its limit by the ratio of the target latency to the measured one), and never
//     below min_in_flight. Aiming below the SLO keeps the cap off the edge where one more
//     request in the batch pushes every request over it; scaling the cut with the
//     overshoot gets far off caps down in a few rounds instead of dozens.
//   - Otherwise, if requests are waiting in the tier's queue or arrivals the cap held back
//     were turned away since the last round (demand above the cap), the cap grows by
//     Feedback.Increase (default 1), never above max_in_flight.
//   - With the SLOs met and no demand above the cap, the cap stays where it is.
//   - With too few requests since the cap last changed to judge it (fewer than
//     MinSamples of each metric in the window), the cap stays, unless a whole Window has
//     passed since it last changed or grew this way: then it grows by Increase while
//     arrivals are turned away for it, one step a Window, and the requests dispatched
//     since its last judged change keep counting. Without this, a cap cut low enough
//     stays there: at a cap of a few, requests that run for longer than the window
//     (2,048 output tokens) end too rarely to fill it, and the cap is never judged
//     again. Growing at once, a step a round, ran the 8K shape's built-in tiers far past
//     their SLOs before a judgement came (docs/benchmarks.md, the seven-shape mix).
//
// A tier with a max_rate above its rate has its token bucket's rate adjusted in the
// same step: cut as the cap is (never below rate) when an SLO is missed, and raised by
// rateIncrease when the SLOs are met while arrivals were turned away for their rate —
// by the tier's own bucket, or by the engine budget the tiers share, where a higher rate
// is a lower cost (shared.go) — never above max_rate. Each tier answers to its own SLOs:
// one that meets them may take more of a shared budget while another, missing its own,
// is cut. (Holding every tier back while any misses was measured, docs/benchmarks.md,
// and served less at the heaviest loads.) A calibrated rate comes from unshaped Poisson arrivals; the
// arrivals admission lets through are smoother, and the engine sustains more of them.
//
// TTFT here is the engine's part (from dispatch), not the time spent in slogate's queue:
// the cap controls the engine's load, and the queue is bounded separately by
// max_queue_wait. Only streams that ended ok with output are observed: the requests and
// latencies of measure.DispatchLatency.

// maxSamples bounds the observations a window keeps per metric.
const maxSamples = 1024

// sample is one observation: of a request dispatched at sent that ended at at.
type sample struct {
	at, sent time.Time
	v        time.Duration
}

// sloWindow keeps a tier's recent TTFT and TPOT observations and the last p95s.
type sloWindow struct {
	ttft, tpot       []sample
	p95TTFT, p95TPOT time.Duration // as of the last adjustment; 0 unknown
}

func (w *sloWindow) observe(now, sent time.Time, ttft, tpot time.Duration) {
	if ttft > 0 {
		w.ttft = appendSample(w.ttft, sample{now, sent, ttft})
	}
	if tpot > 0 {
		w.tpot = appendSample(w.tpot, sample{now, sent, tpot})
	}
}

func appendSample(s []sample, x sample) []sample {
	if len(s) >= maxSamples {
		s = s[1:]
	}
	return append(s, x)
}

// adjust runs the controller for tier t at now if Interval has passed since it last
// did, and reports whether the cap changed.
func (t *tierState) adjust(now time.Time, fb Feedback) bool {
	if now.Sub(t.adjusted) < time.Duration(fb.Interval) {
		return false
	}
	t.adjusted = now
	capHits := t.capHits
	t.capHits = 0
	w := &t.slo
	cutoff := now.Add(-time.Duration(fb.Window))
	w.ttft, w.tpot = dropBefore(w.ttft, cutoff), dropBefore(w.tpot, cutoff)
	w.p95TTFT, w.p95TPOT = p95(w.ttft, t.changed, fb.MinSamples), p95(w.tpot, t.changed, fb.MinSamples)
	old := t.limit
	if w.p95TTFT == 0 && w.p95TPOT == 0 {
		// Too few requests since the cap last changed to judge it: once a whole window
		// has passed without a judgement (or this growth), it grows while arrivals are
		// turned away for it, and the requests it lets through still count for the
		// round that will judge it (t.changed stays).
		if capHits > 0 && now.Sub(later(t.changed, t.grown)) >= time.Duration(fb.Window) {
			t.limit = min(t.limit+fb.Increase, float64(t.cfg.MaxInFlight))
			t.grown = now
		}
		return t.limit != old
	}
	slo := t.cfg.SLO // an SLO of 0 is none (not "every observation misses")
	factor := min(overshoot(w.p95TTFT, slo.TTFT, fb.Target), overshoot(w.p95TPOT, slo.TPOT, fb.Target))
	switch {
	case factor < 1:
		t.limit = max(t.limit*max(min(factor, fb.Backoff), minBackoff), float64(t.cfg.MinInFlight))
	case t.queued > 0 || capHits > 0:
		t.limit = min(t.limit+fb.Increase, float64(t.cfg.MaxInFlight))
	}
	t.adjustRate(now, factor, fb)
	if t.limit != old {
		t.changed = now
		return true
	}
	return false
}

// rateIncrease is the share by which the feedback raises a tier's rate in one step.
const rateIncrease = 0.05

// adjustRate moves the working rate of a tier with a max_rate: down by the cap's factor
// when an SLO was missed (factor < 1), up by rateIncrease when arrivals were turned away
// for their rate since the last step; within [Rate, MaxRate].
func (t *tierState) adjustRate(now time.Time, factor float64, fb Feedback) {
	hits := t.rateHits + t.budgetHits
	t.rateHits, t.budgetHits = 0, 0
	if t.limiter == nil || t.cfg.MaxRate <= t.cfg.Rate {
		return
	}
	old := t.rate
	switch {
	case factor < 1:
		t.rate = max(t.rate*max(min(factor, fb.Backoff), minBackoff), t.cfg.Rate)
	case hits > 0:
		t.rate = min(t.rate*(1+rateIncrease), t.cfg.MaxRate)
	}
	if t.rate != old {
		t.limiter.SetLimitAt(now, rate.Limit(t.rate))
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// minBackoff is the deepest single cut of the cap.
const minBackoff = 0.5

// overshoot returns aim/p95 when p95 is over the aim (target × slo), else 1. An SLO or a
// p95 of 0 is unknown: 1.
func overshoot(p95 time.Duration, slo measure.Duration, target float64) float64 {
	aim := target * float64(slo)
	if slo <= 0 || p95 <= 0 || float64(p95) <= aim {
		return 1
	}
	return aim / float64(p95)
}

func dropBefore(s []sample, cutoff time.Time) []sample {
	i := 0
	for i < len(s) && s[i].at.Before(cutoff) {
		i++
	}
	return s[i:]
}

// p95 returns the 95th percentile (nearest rank) of the samples of requests dispatched
// at or after since, or 0 with fewer than min of them.
func p95(s []sample, since time.Time, min int) time.Duration {
	vs := make([]time.Duration, 0, len(s))
	for _, x := range s {
		if !x.sent.Before(since) {
			vs = append(vs, x.v)
		}
	}
	if len(vs) == 0 || len(vs) < min {
		return 0
	}
	slices.Sort(vs)
	rank := (len(vs)*95 + 99) / 100 // ceil(0.95 n)
	return vs[rank-1]
}
