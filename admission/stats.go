package admission

import (
	"time"

	"github.com/slogate/slogate/measure"
)

// TierStats is a tier's state at one moment, for metrics and the status page.
type TierStats struct {
	Name           string
	MaxInputTokens int     // 0: no upper bound
	InFlight       int     // requests in flight (in shadow mode, also those enforce would have held)
	Limit          float64 // the working in-flight cap
	MinInFlight    int
	MaxInFlight    int
	Queued         [numClasses]int // waiting requests by class
	MaxQueue       int
	MaxQueueWait   time.Duration
	Rate           float64 // 0: no rate limit
	Burst          int
	SLO            measure.SLO
	P95TTFT        time.Duration // as of the last feedback round; 0 unknown
	P95TPOT        time.Duration
	ServiceRate    float64 // completions per second over the last 30 s (serviceWindow); 0 unknown
	// PrefillTokens is the estimated prompt tokens of the tier's requests in flight that
	// have had no output yet, and MaxPrefillTokens its bound (0: none).
	PrefillTokens    int64
	MaxPrefillTokens int
	// Offered is the demand on the tier: requests per second classified into it over
	// the last minute (offeredWindow), whatever admission decided (admitted, queued or
	// turned away, in shadow mode the same), slogate's own probes excluded. Divided by
	// the tier's calibrated sustainable rate it is the signal to scale replicas on.
	Offered float64
}

// Stats is the controller's state at one moment.
type Stats struct {
	Mode   Mode
	Engine Reason // NoReason, Saturated or EngineDown, as a new request would see it
	Tiers  []TierStats
	// Tenants, in the tenants section's order with OtherTenant last; nil without one.
	Tenants []TenantStats
	// Identify says how requests are told apart (tenant.Rule's String); "" without a
	// tenants section.
	Identify string
	// Demand is the engine seconds a second the tiers' arrivals ask of the shared budget
	// (Config.SharedRate), and BudgetScale what it refills at; both 0 without one.
	Demand, BudgetScale float64
}

// TenantStats is a tenant's state at one moment.
type TenantStats struct {
	Name     string
	Weight   float64
	MaxClass Class   // the highest class its requests are served at
	Counter  float64 // its virtual token counter: weighted service over weight, lifts included
	Service  float64 // its weighted service in tokens (prompt and output, without lifts)
	Open     int     // requests admitted and not ended: waiting or in flight
	Queued   int     // of those, the ones waiting in a tier's queue
	Budget   Budget
	Quota    Quota // what is left of its per-minute budgets
}

// Stats returns a snapshot of every current tier. Safe for concurrent use.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	st := Stats{Mode: c.opts.Mode, Engine: c.engineState(now, 0)}
	if c.shared != nil {
		st.Demand, st.BudgetScale = c.demand(now), c.shared.scale
	}
	for _, t := range c.tiers {
		t.releasePrefill(now)
		ts := TierStats{
			Name: t.cfg.Name, MaxInputTokens: t.cfg.MaxInputTokens, InFlight: t.inFlight + t.shadowed, Limit: t.limit,
			MinInFlight: t.cfg.MinInFlight, MaxInFlight: t.cfg.MaxInFlight, MaxQueue: t.cfg.MaxQueue,
			MaxQueueWait: time.Duration(t.cfg.MaxQueueWait), Rate: t.rate, Burst: t.cfg.Burst, SLO: t.cfg.SLO,
			P95TTFT: t.slo.p95TTFT, P95TPOT: t.slo.p95TPOT, ServiceRate: t.serviceRate(now), Offered: t.offered.rate(now),
			PrefillTokens: t.prefill.Load(), MaxPrefillTokens: t.cfg.MaxPrefillTokens,
		}
		for k := range t.queue {
			ts.Queued[k] = len(t.queue[k])
		}
		st.Tiers = append(st.Tiers, ts)
	}
	if c.ten != nil {
		st.Identify = c.resolver.Load().rule.String()
		f := c.ten.fair
		for _, s := range append(c.ten.named, c.ten.other) {
			st.Tenants = append(st.Tenants, TenantStats{
				Name: s.cfg.Name, Weight: s.cfg.Weight, MaxClass: s.class, Counter: s.counter(f),
				Service: s.input + f.OutputWeight*float64(s.output.Load()),
				Open:    s.active, Queued: s.queued, Budget: s.cfg.Budget, Quota: s.quota(now),
			})
		}
	}
	return st
}

// Classes lists every class, for pre-creating metric series.
func Classes() []Class { return []Class{Interactive, Batch, Probe} }
