package admission

import (
	"math"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
)

// twoTiers is a short tier the engine sustains at 10 requests/s alone (burst 10) and a
// long one at 1/s (burst 1), neither capped in flight: the engine budget they share
// holds one engine second.
func twoTiers(shared bool) Config {
	return Config{SharedRate: shared, Tiers: []TierConfig{
		{Name: "short", MaxInputTokens: 100, Rate: 10, Burst: 10, MaxInFlight: 100, MaxQueue: 10},
		{Name: "long", Rate: 1, Burst: 1, MaxInFlight: 100, MaxQueue: 10},
	}}
}

// With shared_rate, a request costs 1/rate of an engine second from a budget the tiers
// share: a long request (1 s) leaves nothing for a short one (0.1 s) until a tenth of a
// second has passed, although the short tier's own bucket is full; without it, each tier
// only answers to its own rate.
func TestSharedRate(t *testing.T) {
	for _, shared := range []bool{false, true} {
		h := newHarness(t, Enforce, twoTiers(shared))
		long := h.admitNow(req(1000))
		if !shared {
			for range 10 {
				h.admitNow(req(10)).Done(ok)
			}
			h.rejectNow(req(10), TierRate) // the short tier's own burst of 10 is spent
			long.Done(ok)
			continue
		}
		rej := h.rejectNow(req(10), EngineBudget)
		if rej.Status() != 429 || rej.RetryAfter <= 0 || rej.RetryAfter > 100*time.Millisecond {
			t.Errorf("rejection %+v: want a 429 with a Retry-After of at most the 100ms a short request costs", rej)
		}
		h.clock.Step(100 * time.Millisecond)
		h.admitNow(req(10)).Done(ok)
		h.rejectNow(req(10), EngineBudget)
		h.clock.Step(500 * time.Millisecond)
		h.rejectNow(req(1000), TierRate) // the long tier's own rate still holds: one a second
		long.Done(ok)
		h.clock.Step(time.Second)
		h.admitNow(req(1000)).Done(ok)
	}
}

// A request turned away after it took its share of the budget, here by a full queue,
// gives it back.
func TestSharedRateRefund(t *testing.T) {
	cfg := twoTiers(true)
	cfg.Tiers[1].MaxInFlight, cfg.Tiers[1].MaxQueue = 1, 0
	cfg.Tiers[1].Rate, cfg.Tiers[1].Burst = 10, 10 // long requests as cheap as short ones
	h := newHarness(t, Enforce, cfg)
	a := h.admitNow(req(1000))
	for range 5 {
		h.rejectNow(req(1000), QueueFull) // each took 0.1 s of the budget and gave it back
	}
	for range 9 { // the 0.9 s the first long request left, had the five not given theirs back
		h.admitNow(req(10)).Done(ok)
	}
	h.rejectNow(req(10), EngineBudget) // the short tier's own bucket still holds one
	a.Done(ok)
}

// A tier alone meets the shared budget exactly where its own bucket ends: the budget
// never turns away what the tier's rate lets through.
func TestSharedRateOneTier(t *testing.T) {
	h := newHarness(t, Enforce, Config{SharedRate: true, Tiers: []TierConfig{
		{Name: "only", Rate: 2, Burst: 3, MaxInFlight: 100, MaxQueue: 10},
	}})
	for step := range 40 {
		h.clock.Step(time.Duration(step%7) * 97 * time.Millisecond)
		tk, err := h.c.Admit(t.Context(), req(10))
		if rej, isRej := err.(*Rejection); isRej && rej.Reason != TierRate {
			t.Fatalf("step %d: rejected for %s", step, rej.Reason)
		}
		if tk != nil {
			tk.Done(ok)
		}
	}
}

// TestSharedUnits: engine seconds become budget units rounded up, at least 1 and at most
// what a bucket counts, whatever rate a tiers file holds.
func TestSharedUnits(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int
	}{{10, 100}, {3, 334}, {1e6, 1}, {1e-300, math.MaxInt32}} {
		if got := cost(tc.rate); got != tc.want {
			t.Errorf("cost(%g) = %d, want %d", tc.rate, got, tc.want)
		}
	}
	if b := newSharedBudget([]TierConfig{{Rate: 1e-300, Burst: 1}}, time.Time{}); b == nil || b.lim.Burst() != math.MaxInt32 {
		t.Errorf("budget for a near-zero rate: %v", b)
	}
}

// An arrival the shared budget turns away counts, like one the tier's own bucket turns
// away, as demand above the tier's rate: while the tier meets its SLOs, the feedback
// raises its working rate towards max_rate, which lowers what each of its requests
// costs of the budget — whatever the other tiers' SLOs, which hold back their own rates.
// Without such an arrival the rate stays.
func TestSharedRateFeedback(t *testing.T) {
	fast := measure.Result{Status: 200, Outcome: measure.OK, Stream: true, OutputChunks: 8, TTFT: 100 * time.Millisecond, TPOT: 10 * time.Millisecond}
	slow := fast
	slow.TTFT = 5 * time.Second // the harness's TTFT SLO is 1 s
	for _, tc := range []struct {
		name       string
		turnedAway bool
		longMisses bool
		want       float64
	}{
		{"nobody turned away", false, false, 10},
		{"turned away by the budget", true, false, 10.5},
		{"turned away while the long tier misses its SLO", true, true, 10.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := twoTiers(true)
			cfg.Tiers[0].MaxRate = 20
			cfg.Feedback = Feedback{Interval: measure.Duration(time.Second), MinSamples: 2}
			h := newHarness(t, Enforce, cfg)
			for range 2 { // the short tier meets its SLOs
				h.admitNow(req(10)).Done(fast)
			}
			if tc.longMisses {
				for range 2 {
					h.clock.Step(time.Second) // the long tier's rate: one a second
					h.admitNow(req(1000)).Done(slow)
				}
			}
			h.clock.Step(time.Second)
			h.c.Tick()                // a first round: every tier's p95s are known
			h.clock.Step(time.Second) // the budget refills
			long := h.admitNow(req(1000))
			if tc.turnedAway {
				h.rejectNow(req(10), EngineBudget)
			}
			h.clock.Step(time.Second)
			h.c.Tick()
			if got := h.tierStats("short").Rate; math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("the short tier's rate is %v, want %v", got, tc.want)
			}
			long.Done(fast)
		})
	}
}

// The budget lends: once it has counted the demand over a whole sustainedWindow, it
// refills at maxBudgetScale while the tiers' arrivals ask for at most that many engine
// seconds a second (each at the cost of its tier's working rate) over the last minute and
// over the last sustainedWindow, and at one otherwise. Arrivals count whatever admission
// decides: here the long tier's own bucket turns most of them away.
func TestSharedBudgetLends(t *testing.T) {
	const bound = int(60 * maxBudgetScale) // a minute's long arrivals that ask for the bound
	for _, tc := range []struct {
		name        string
		early       int           // long arrivals at once, a minute after the start
		wait        time.Duration // from the start to the other arrivals
		long, short int           // arrivals, at once: a long one costs 1 s, a short one 0.1 s
		want        float64
	}{
		{"before a whole window", 0, sustainedWindow - time.Second, 0, 0, 1},
		{"no demand", 0, sustainedWindow, 0, 0, maxBudgetScale},
		{"the minute's at the bound", 0, sustainedWindow, bound - 30, 300, maxBudgetScale}, // (bound − 30 + 300 × 0.1) / 60 s = maxBudgetScale
		{"the minute's past the bound", 0, sustainedWindow, bound - 30, 310, 1},
		{"a heavy load nine minutes ago", 10*bound + 10, sustainedWindow, 0, 0, 1}, // 600 s × (maxBudgetScale + 1/60) over ten minutes, none in the last
		{"a lighter load nine minutes ago", 10*bound - 10, sustainedWindow, 0, 0, maxBudgetScale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Enforce, twoTiers(true))
			arrive := func(long, short int) {
				for i := range long + short {
					n := 1000
					if i >= long {
						n = 10
					}
					if tk, err := h.c.Admit(t.Context(), req(n)); err == nil {
						tk.Done(ok)
					}
				}
			}
			h.clock.Step(time.Minute)
			arrive(tc.early, 0)
			h.clock.Step(tc.wait - time.Minute)
			arrive(tc.long, tc.short)
			h.c.Tick()
			st := h.c.Stats()
			h.c.mu.Lock()
			refill := float64(h.c.shared.lim.Limit())
			h.c.mu.Unlock()
			if st.BudgetScale != tc.want || math.Abs(refill-budgetUnits*tc.want) > 1e-9 {
				t.Errorf("demand %.3f: scale %v refilling %v units/s, want %v", st.Demand, st.BudgetScale, refill, tc.want)
			}
		})
	}
}
