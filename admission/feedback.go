package admission

import (
	"slices"
	"time"
)

// The SLO feedback of a tier's in-flight cap, an AIMD controller like TCP's congestion
// window or Netflix's concurrency-limits AIMD:
//
//   - Every Feedback.Interval, the tier's TTFT and TPOT observations of the last
//     Feedback.Window are summarised as their 95th percentiles (when at least
//     Feedback.MinSamples of either are known).
//   - If either p95 exceeds the tier's SLO, the cap is multiplied by Feedback.Backoff
//     (default 0.9), never below min_in_flight, and the window is cleared, so the next
//     decision rests on what happened under the new cap.
//   - Otherwise, if requests are waiting in the tier's queue (demand above the cap), the
//     cap grows by Feedback.Increase (default 1), never above max_in_flight.
//   - With the SLOs met and nobody waiting, the cap stays where it is.
//
// TTFT here is the engine's part (from dispatch), not the time spent in slogate's queue:
// the cap controls the engine's load, and the queue is bounded separately by
// max_queue_wait. Only streams that ended ok are observed.

// maxSamples bounds the observations a window keeps per metric.
const maxSamples = 1024

// sample is one observation.
type sample struct {
	at time.Time
	v  time.Duration
}

// sloWindow keeps a tier's recent TTFT and TPOT observations and the last p95s.
type sloWindow struct {
	ttft, tpot       []sample
	p95TTFT, p95TPOT time.Duration // as of the last adjustment; 0 unknown
}

func (w *sloWindow) observe(now time.Time, ttft, tpot time.Duration) {
	if ttft > 0 {
		w.ttft = appendSample(w.ttft, sample{now, ttft})
	}
	if tpot > 0 {
		w.tpot = appendSample(w.tpot, sample{now, tpot})
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
	w.p95TTFT, w.p95TPOT = p95(w.ttft, fb.MinSamples), p95(w.tpot, fb.MinSamples)
	if w.p95TTFT == 0 && w.p95TPOT == 0 {
		return false
	}
	old := t.limit
	slo := t.cfg.SLO // an SLO of 0 is none (not "every observation misses")
	missed := slo.TTFT > 0 && w.p95TTFT > time.Duration(slo.TTFT) || slo.TPOT > 0 && w.p95TPOT > time.Duration(slo.TPOT)
	switch {
	case missed:
		t.limit = max(t.limit*fb.Backoff, float64(t.cfg.MinInFlight))
		w.ttft, w.tpot = w.ttft[:0], w.tpot[:0]
	case t.queued > 0:
		t.limit = min(t.limit+fb.Increase, float64(t.cfg.MaxInFlight))
	}
	return t.limit != old
}

func dropBefore(s []sample, cutoff time.Time) []sample {
	i := 0
	for i < len(s) && s[i].at.Before(cutoff) {
		i++
	}
	return s[i:]
}

// p95 returns the 95th percentile (nearest rank) of the samples, or 0 with fewer than
// min of them.
func p95(s []sample, min int) time.Duration {
	if len(s) == 0 || len(s) < min {
		return 0
	}
	vs := make([]time.Duration, len(s))
	for i, x := range s {
		vs[i] = x.v
	}
	slices.Sort(vs)
	rank := (len(vs)*95 + 99) / 100 // ceil(0.95 n)
	return vs[rank-1]
}
