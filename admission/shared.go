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

// budgetUnits is the bucket's resolution: a thousandth of an engine second.
const budgetUnits = 1000

// newSharedBudget returns the shared bucket for tiers, or nil when none has a rate: it
// refills one engine second per second and holds the largest burst any tier allows
// alone (its burst ÷ its rate, in engine seconds).
func newSharedBudget(tiers []TierConfig) *rate.Limiter {
	burst := 0.0
	for _, t := range tiers {
		if t.Rate > 0 {
			burst = max(burst, float64(t.Burst)/t.Rate)
		}
	}
	if burst == 0 {
		return nil
	}
	return rate.NewLimiter(budgetUnits, units(burst))
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
	res := c.shared.ReserveN(now, cost(t.rate))
	if delay := res.DelayFrom(now); !res.OK() || delay > 0 {
		res.CancelAt(now)
		if !res.OK() {
			delay = time.Second
		}
		return nil, delay
	}
	return res, 0
}
