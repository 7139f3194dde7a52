package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/tenant"
)

// The fairness phase: a noisy neighbour. Tenants of equal weight share one engine; all but
// one are well-behaved ("calm"), the last ("flood") sends many times their rate with
// longer prompts, and together they offer a multiple of the engine's knee. The same
// arrivals go side by side to no admission, slogate's tiers alone, and the same tiers with
// a tenants section (fair share only), and optionally with a token budget on every
// tenant as well.

// floodTenant is the name of the tenant that floods.
const floodTenant = "flood"

// fairOpts are the fairness phase's settings.
type fairOpts struct {
	Tenants        int     // how many, the flooder included
	Calm, Flood    class   // input:output:relative rate of a calm tenant's requests and the flooder's
	Load           float64 // the offered load in total, as a multiple of the engine's knee
	Reps           int     // repetitions, each with arrivals of its own seed
	Budget         float64 // the budget variant's input-token budget of each tenant, as a share of the knee's prompt tokens; 0: no budget variant
	Warmup, Window time.Duration
}

// fairWorkload is the fairness phase's workload as derived from the knee.
type fairWorkload struct {
	Tenants []class   // one class per tenant, the flooder last, each with its absolute rate
	Knees   []float64 // the engine's knee (req/s) for each tenant's requests alone
	Model   []float64 // the model's own knee of each tenant's shape (enginesim.SustainableRate)
	Ref     float64   // the model's own knee of the shape of -rate
	// PromptCapacity is the prompt tokens per second the engine serves at its knee with
	// this mix of tenants.
	PromptCapacity float64
}

// fairClasses returns the tenants of the workload: n-1 calm ones named calm-1, calm-2,
// ... and the flooder, each a class whose header names it; knees[i] is the engine's knee
// (req/s) for tenant i's requests alone. The classes' rates are relative (the flooder
// sends flood.Rate/calm.Rate times a calm tenant's rate) and scaled so that the load in
// total, the sum over the tenants of rate/knee, is load.
func fairClasses(n int, calm, flood class, knees []float64, load float64) []class {
	out := make([]class, n)
	for i := range n - 1 {
		out[i] = calm
		out[i].Name = fmt.Sprintf("calm-%d", i+1)
		out[i].Rate = 1
	}
	out[n-1] = flood
	out[n-1].Name = floodTenant
	out[n-1].Rate = flood.Rate / calm.Rate
	units := 0.0
	for i, c := range out {
		units += c.Rate / knees[i]
	}
	for i := range out {
		out[i].Tenant = out[i].Name
		out[i].Rate *= load / units
	}
	return out
}

// promptCapacity returns the prompt tokens per second of the mix of tenants at their
// knee: their prompt tokens per second divided by their load.
func promptCapacity(tenants []class, load float64) float64 {
	tok := 0.0
	for _, c := range tenants {
		tok += c.Rate * float64(c.Input)
	}
	return tok / load
}

// deriveWorkload derives the workload from the knee of -rate, which was measured for
// requests of -input/-output prompt and output tokens: another shape's knee is taken as
// that knee times the ratio of the two shapes' knees in the simulator's model
// (enginesim.SustainableRate), so that the measured knee stays the scale.
func deriveWorkload(o options, p enginesim.Profile) (fairWorkload, error) {
	f := o.fair
	w := fairWorkload{}
	model := func(c class) (float64, error) {
		return enginesim.SustainableRate(p, c.Input, c.Output, o.slo, enginesim.Search{})
	}
	var err error
	if w.Ref, err = model(class{Input: o.input, Output: o.output}); err != nil {
		return w, err
	}
	calm, err := model(f.Calm)
	if err != nil {
		return w, err
	}
	flood, err := model(f.Flood)
	if err != nil {
		return w, err
	}
	if w.Ref <= 0 || calm <= 0 || flood <= 0 {
		return w, fmt.Errorf("the model sustains none of the shapes under the SLO (knees %g, %g, %g)", w.Ref, calm, flood)
	}
	for i := range f.Tenants {
		m := calm
		if i == f.Tenants-1 {
			m = flood
		}
		w.Model = append(w.Model, m)
		w.Knees = append(w.Knees, o.rate*m/w.Ref)
	}
	w.Tenants = fairClasses(f.Tenants, f.Calm, f.Flood, w.Knees, f.Load)
	w.PromptCapacity = promptCapacity(w.Tenants, f.Load)
	return w, nil
}

// tenantsSection is the tenants section of the tenants configurations: identified by
// tenantHeader, every tenant named and of weight 1, fairness at its defaults and, when
// inputPerMinute > 0, that many input tokens a minute for each.
func tenantsSection(tenants []class, inputPerMinute float64) *admission.Tenants {
	ts := &admission.Tenants{Identify: tenant.Rule{Header: tenantHeader}}
	for _, c := range tenants {
		ts.Named = append(ts.Named, admission.TenantConfig{
			Name: c.Name, Weight: 1, Budget: admission.Budget{InputTokensPerMinute: inputPerMinute},
		})
	}
	return ts
}

// The names of the fairness phase's configurations.
const (
	fairNone    = "no admission"
	fairTiers   = "tiers only"
	fairTenants = "tiers + tenants"
	fairBudget  = "tiers + tenants + budget"
)

// fairSetups returns the configurations of the fairness phase: no admission, slogate's
// built-in tiers (as the goodput phase runs them), the same tiers with a tenants section,
// and — with a budget share — with a budget of that share of the knee's prompt tokens on
// every tenant as well.
func fairSetups(o options, w fairWorkload) []setup {
	tiers := slogateConfig(o.slo, o.fb)
	fair := tiers
	fair.Tenants = tenantsSection(w.Tenants, 0)
	out := []setup{
		{Name: fairNone, SLO: o.slo},
		{Name: fairTiers, SLO: o.slo, Admission: &tiers, Engine: true},
		{Name: fairTenants, SLO: o.slo, Admission: &fair, Engine: true},
	}
	if o.fair.Budget > 0 {
		budget := tiers
		budget.Tenants = tenantsSection(w.Tenants, fairBudgetPerMinute(o.fair.Budget, w.PromptCapacity))
		out = append(out, setup{Name: fairBudget, SLO: o.slo, Admission: &budget, Engine: true})
	}
	return out
}

// fairBudgetPerMinute returns the input-token budget a minute of share of the prompt
// tokens a second served at the knee, rounded up to a whole token.
func fairBudgetPerMinute(share, promptCapacity float64) float64 {
	return math.Ceil(share * promptCapacity * 60)
}

// fairness runs the repetitions of the fairness phase, each against stacks of its own
// with the arrivals of its own seed: all at the same time, or one after another with
// -serial.
func fairness(ctx context.Context, o options, p enginesim.Profile, w fairWorkload) ([]*experiment, error) {
	exps := make([]*experiment, o.fair.Reps)
	defer closeAll(exps)
	out := 0
	for _, c := range w.Tenants {
		out = max(out, c.Output)
	}
	for r := range exps {
		e := &experiment{
			// Class i of repetition r draws from seed + r·n + i: no two share arrivals.
			Name: fmt.Sprintf("fairness %d", r+1), Seed: o.seed + uint64(r*len(w.Tenants)), SLO: o.slo,
			Warmup: o.fair.Warmup, Window: o.fair.Window, Grace: grace(o.slo, out), Classes: w.Tenants,
		}
		exps[r] = e
		if err := e.addStacks(fairSetups(o, w), p); err != nil {
			return nil, err
		}
	}
	runEach(ctx, exps, o.serial)
	return exps, ctx.Err()
}
