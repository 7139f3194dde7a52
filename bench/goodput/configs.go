package main

import (
	"math"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// staticCap derives the static configuration from the sustainable rate: the in-flight
// cap by Little's law, rate x mean E2E at that rate (rounded up), and the longest queue
// wait that still leaves room for the engine's TTFT inside the SLO: the TTFT SLO minus
// the p95 TTFT measured at the sustainable rate, rounded down to 0.5 s and kept within
// [0.5 s, SLO - 0.5 s].
func staticCap(rate float64, meanE2E, p95TTFT, sloTTFT time.Duration) (int, time.Duration) {
	limit := max(int(math.Ceil(rate*meanE2E.Seconds()-1e-9)), 1)
	const step = 500 * time.Millisecond
	wait := (sloTTFT - p95TTFT) / step * step
	wait = min(max(wait, step), sloTTFT-step)
	return limit, wait
}

// staticConfig is the static cap: one tier for every request, a fixed in-flight cap (the
// feedback cannot move it: min = max), a queue whose wait is bounded, no rate limit.
func staticConfig(limit int, wait time.Duration, s measure.SLO) admission.Config {
	return admission.Config{Tiers: []admission.TierConfig{{
		Name: "all", MaxInFlight: limit, MinInFlight: limit,
		MaxQueue: 64, MaxQueueWait: measure.Duration(wait),
		SLO: s,
	}}}
}

// slogateConfig is slogate's built-in tiers (admission.DefaultConfig: at most 2K, 8K and
// 32K input tokens and one above, caps and queues that shrink as prompts grow, queue
// waits of half the TTFT SLO, no rate limits) with the benchmark's SLOs on every tier and
// min_in_flight 1, so that the feedback has to find each tier's working cap: the 8K
// tier starts at 32 in flight, about three times the static cap.
//
// fb is the feedback; zero fields take admission's defaults.
func slogateConfig(s measure.SLO, fb admission.Feedback) admission.Config {
	cfg := admission.DefaultConfig()
	cfg.Feedback = fb
	for i := range cfg.Tiers {
		t := &cfg.Tiers[i]
		t.SLO = s
		t.MinInFlight = 1
	}
	return cfg
}
