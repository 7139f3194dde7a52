package admission

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// The engine budget the tiers share (Config.SharedRate). Each tier's rate is what the
// engine sustains of that tier's requests alone (slogate calibrate measures it so), so a
// request of a tier at rate r costs 1/r of a second of the engine: a tier alone may take
// r requests a second, and tiers together may take no more than one second of the engine
// per second, however they mix. The bucket counts in budgetUnits per engine second.
//
// One engine second per second is a lower bound of what the engine serves of a mix: it
// holds exactly where one tier runs alone, but tiers bound by different resources (short
// prompts by prefill, long ones by the KV cache) overlap in the engine, and the mix then
// takes more than the sum of its shares. So the budget lends: while the demand — every
// tier's arrivals at the cost of its working rate, averaged over the last minute and
// over the last sustainedWindow, the higher of the two — is at most maxBudgetScale
// engine seconds a second, the budget refills at maxBudgetScale, and a moderate
// overload is served whole (within each tier's own rate, in-flight cap and prefill bound,
// which still hold it to its SLOs). Past that, the budget refills at one engine second a
// second again: under a heavy overload it chooses which requests the engine serves, the
// cheapest first, and what it lent there would go to the costliest requests, the ones it
// turns away. The long average keeps the quiet spells between the clumps of a heavy
// bursty load from reading as a light one; the short one stops the lending within a
// minute of a surge. The guarantee: as of the last Tick, the refill is maxBudgetScale
// while both averages of the demand are at most that and the budget has counted a whole
// sustainedWindow of it, and one engine second a second otherwise. (docs/benchmarks.md
// measured the alternatives: a refill raised while every tier meets its SLOs, and the
// minute's average alone.)

// budgetUnits is the bucket's resolution: a thousandth of an engine second.
const budgetUnits = 1000

// maxBudgetScale is the most the budget lends: the engine seconds a second it refills
// while the demand is at most that. Two: on the seven-shape mix, Poisson arrivals at
// 1.5× the knee read 1.72 engine seconds a second on average (0.9–3.4 as the minute's
// arrivals vary), so that a bound of 1.5 lent a quarter of the time and lost half of
// what lending gains there (docs/benchmarks.md).
const maxBudgetScale = 2

// sharedBudget is the engine budget and what it lends. Guarded by the Controller's lock
// (its limiter is safe on its own).
type sharedBudget struct {
	lim   *rate.Limiter
	scale float64   // engine seconds a second: 1 or maxBudgetScale
	born  time.Time // when it was made: the demand is known a whole sustainedWindow later
}

// newSharedBudget returns the shared budget for tiers, or nil when none has a rate: it
// refills one engine second per second and holds the largest burst any tier allows
// alone (its burst ÷ its rate, in engine seconds).
func newSharedBudget(tiers []TierConfig, now time.Time) *sharedBudget {
	burst := 0.0
	for _, t := range tiers {
		if t.Rate > 0 {
			burst = max(burst, float64(t.Burst)/t.Rate)
		}
	}
	if burst == 0 {
		return nil
	}
	return &sharedBudget{lim: rate.NewLimiter(budgetUnits, units(burst)), scale: 1, born: now}
}

// lend sets the budget's refill at now for a demand of that many engine seconds a second.
// It lends nothing until the demand has been counted over a whole sustainedWindow: a
// window partly empty reads low.
func (b *sharedBudget) lend(now time.Time, demand float64) {
	scale := 1.0
	if demand <= maxBudgetScale && now.Sub(b.born) >= sustainedWindow {
		scale = maxBudgetScale
	}
	if scale != b.scale {
		b.scale = scale
		b.lim.SetLimitAt(now, rate.Limit(budgetUnits*scale))
	}
}

// demand returns the engine seconds a second the tiers' users ask for: each tier's
// arrivals at the cost of its working rate (tiers without a rate cost nothing of the
// budget), over the last minute or over the last sustainedWindow, whichever is higher.
// Under the lock.
func (c *Controller) demand(now time.Time) float64 {
	minute, sustained := 0.0, 0.0
	for _, t := range c.tiers {
		if t.limiter != nil {
			minute += t.offered.rate(now) / t.rate
			sustained += t.sustained.rate(now) / t.rate
		}
	}
	return max(minute, sustained)
}

// cost returns what one request of a tier at the working rate r takes of the shared
// budget, in budgetUnits.
func cost(r float64) int { return units(1 / r) }

// units converts engine seconds to budgetUnits, rounded up, within [1, MaxInt32]: a rate
// near zero, which a tiers file may hold, costs the most a bucket can count, not an
// integer overflow.
func units(seconds float64) int {
	if u := math.Ceil(seconds * budgetUnits); u < math.MaxInt32 { // NaN too: Validate keeps rates finite and positive
		return max(int(u), 1)
	}
	return math.MaxInt32
}

// reserveShared takes a request of tier t's cost from the shared budget at now. It
// returns the reservation, to give back if the request is turned away later, or how long
// until the budget would hold it.
func (c *Controller) reserveShared(now time.Time, t *tierState) (*rate.Reservation, time.Duration) {
	if c.shared == nil || t.limiter == nil {
		return nil, 0
	}
	res := c.shared.lim.ReserveN(now, cost(t.rate))
	if delay := res.DelayFrom(now); !res.OK() || delay > 0 {
		res.CancelAt(now)
		if !res.OK() {
			delay = time.Second
		}
		return nil, delay
	}
	return res, 0
}
