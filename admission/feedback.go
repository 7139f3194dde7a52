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
//   - Otherwise, if requests are waiting in the tier's queue (demand above the cap), the
//     cap grows by Feedback.Increase (default 1), never above max_in_flight.
//   - With the SLOs met and nobody waiting, the cap stays where it is.
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
	w := &t.slo
	cutoff := now.Add(-time.Duration(fb.Window))
	w.ttft, w.tpot = dropBefore(w.ttft, cutoff), dropBefore(w.tpot, cutoff)
	w.p95TTFT, w.p95TPOT = p95(w.ttft, t.changed, fb.MinSamples), p95(w.tpot, t.changed, fb.MinSamples)
	if w.p95TTFT == 0 && w.p95TPOT == 0 {
		return false
	}
	old := t.limit
	slo := t.cfg.SLO // an SLO of 0 is none (not "every observation misses")
	factor := min(overshoot(w.p95TTFT, slo.TTFT, fb.Target), overshoot(w.p95TPOT, slo.TPOT, fb.Target))
	switch {
	case factor < 1:
		t.limit = max(t.limit*max(min(factor, fb.Backoff), minBackoff), float64(t.cfg.MinInFlight))
	case t.queued > 0:
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
