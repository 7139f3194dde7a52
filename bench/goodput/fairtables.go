package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// fairResult is one configuration's figures in one repetition of the fairness phase.
type fairResult struct {
	Uses    []tenantUse // by tenant, the flooder last
	Goodput float64     // good requests per second, every tenant's
	// JainShares is Jain's index over the calm tenants' shares of the tokens served;
	// JainGot over what each got of what it asked for (served ÷ offered), which is the
	// same index over their shares each divided by its share of the demand.
	JainShares, JainGot float64
	FloodOverFair       float64 // the flooder's share of the tokens served ÷ its max-min fair share
	Saturated           float64 // share of the window's samples in which the engine counted as saturated
}

// fairResult returns stack k's figures over e's window; the last class is the flooder.
func (e *experiment) fairResult(k int) fairResult {
	r := fairResult{Uses: e.tenantUses(k)}
	var shares, got []float64
	for i, u := range r.Uses {
		r.Goodput += u.Sum.Goodput
		if i < len(r.Uses)-1 {
			shares, got = append(shares, u.Share), append(got, u.Got())
		}
	}
	r.JainShares, r.JainGot = jain(shares), jain(got)
	f := r.Uses[len(r.Uses)-1]
	r.FloodOverFair = ratio(f.Share, f.Fair)
	n := 0
	for _, s := range e.Timeline[k] {
		if s.At >= e.Warmup && s.At < e.Warmup+e.Window {
			n++
			if s.Engine != 0 {
				r.Saturated++
			}
		}
	}
	r.Saturated = ratio(r.Saturated, float64(n))
	return r
}

// fairTargets are the targets for the tenants configuration.
const (
	targetAttainment = 0.99 // every calm tenant's SLO attainment of its requests sent
	targetGot        = 0.90 // every calm tenant's served ÷ offered tokens
	targetGoodput    = 0.95 // total goodput against the tiers alone, in the same repetition
	// The flooder's share of the tokens served against its max-min fair share: that
	// share is what is left once the calm tenants got what they asked for, so any of
	// their requests turned away puts the flooder above it; 1% is the tolerance.
	targetFlood = 1.01
)

func printFairness(w io.Writer, o options, wl fairWorkload, exps []*experiment, took time.Duration, noise string) {
	f := o.fair
	n := len(wl.Tenants)
	calm, flood := wl.Tenants[0], wl.Tenants[n-1]
	how := "at the same time"
	if o.serial {
		how = "one after another"
	}
	fmt.Fprintf(w, "## Noisy neighbour (took %s)\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "%d tenants of weight 1 (header %s): %d calm ones each sending %d/%d-token requests at %.3f req/s, and %s sending %d/%d at %.3f req/s (%g× a calm one's rate); Poisson, seeds from %d.\n\n",
		n, tenantHeader, n-1, calm.Input, calm.Output, calm.Rate, floodTenant, flood.Input, flood.Output, flood.Rate, flood.Rate/calm.Rate, o.seed)
	fmt.Fprintf(w, "Load: the knee of %d/%d requests is %.3f req/s (-rate); the model's own knees (enginesim.SustainableRate) are %.3f req/s for it, %.3f for %d/%d and %.3f for %d/%d, so those are taken as %.3f and %.3f req/s; in total the tenants offer Σ rate ÷ knee = **%g× the knee**, %.0f prompt tokens/s against %.0f at the knee.\n\n",
		o.input, o.output, o.rate, wl.Ref, wl.Model[0], calm.Input, calm.Output, wl.Model[n-1], flood.Input, flood.Output, wl.Knees[0], wl.Knees[n-1],
		f.Load, f.Load*wl.PromptCapacity, wl.PromptCapacity)
	fmt.Fprintf(w, "Configurations, side by side under the same arrivals: %s; %s (slogate's built-in tiers, SLO feedback and saturation, as in the goodput phase); %s (the same tiers and a tenants section: identify by %s, every tenant named, weight 1, no budgets)",
		fairNone, fairTiers, fairTenants, tenantHeader)
	if f.Budget > 0 {
		fmt.Fprintf(w, "; %s (as %s, and %.0f input tokens a minute for every tenant: %g of the knee's prompt tokens)", fairBudget, fairTenants, fairBudgetPerMinute(f.Budget, wl.PromptCapacity), f.Budget)
	}
	fmt.Fprintf(w, ".\n\n%d repetitions %s, %s warm-up, %s measured, %s grace; figures are medians over the repetitions, ratios taken within each. Machine: %s.\n\n",
		len(exps), how, exps[0].Warmup, exps[0].Window, exps[0].Grace, noise)

	res := make([][]fairResult, len(exps)) // by repetition, then configuration
	for r, e := range exps {
		for k := range e.Stacks {
			res[r] = append(res[r], e.fairResult(k))
		}
	}
	stacks := exps[0].Stacks
	med := func(k int, f func(fairResult) float64) float64 {
		xs := make([]float64, len(res))
		for r := range res {
			xs[r] = f(res[r][k])
		}
		return median(xs)
	}
	tiersOnly := -1
	for k, st := range stacks {
		if st.setup.Name == fairTiers {
			tiersOnly = k
		}
	}
	vsTiers := func(k int) float64 {
		if tiersOnly < 0 {
			return math.NaN()
		}
		return medianRatio(res, k, tiersOnly)
	}

	var rows [][]string
	for k, st := range stacks {
		for i, t := range wl.Tenants {
			u := func(f func(tenantUse) float64) float64 {
				return med(k, func(fr fairResult) float64 { return f(fr.Uses[i]) })
			}
			why := map[string]int{}
			for r := range res {
				addCounts(why, res[r][k].Uses[i].Sum.Reasons)
			}
			rows = append(rows, []string{st.setup.Name, t.Name,
				fmt.Sprintf("%.3f", u(func(x tenantUse) float64 { return float64(x.Sum.Offered) / x.Sum.Window.Seconds() })),
				fmt.Sprintf("%.3f", u(func(x tenantUse) float64 { return x.Sum.Goodput })),
				pctNaN(u(tenantUse.Attainment)), pctNaN(u(tenantUse.AdmittedAttainment)),
				pct1(u(func(x tenantUse) float64 { return x.Share })), pct1(u(func(x tenantUse) float64 { return x.Fair })),
				pctNaN(u(tenantUse.Got)), fmt.Sprintf("%.1f", u(func(x tenantUse) float64 { return x.Waiting })),
				reasons(why)})
		}
	}
	fmt.Fprintln(w, "Per tenant (medians; rejections summed over the repetitions; waiting = mean requests of the tenant waiting in slogate, by Little's law over the time to the response's headers):")
	fmt.Fprintln(w)
	table(w, []string{"configuration", "tenant", "offered req/s", "goodput req/s", "SLO attainment of sent", "of admitted",
		"share of served tokens", "max-min fair share", "served ÷ offered", "waiting", "rejections by reason"}, rows)

	rows = nil
	for k, st := range stacks {
		rows = append(rows, []string{st.setup.Name, fmt.Sprintf("%.3f", med(k, func(fr fairResult) float64 { return fr.Goodput })),
			pctNaN(vsTiers(k)),
			fmt.Sprintf("%.3f", med(k, func(fr fairResult) float64 { return fr.JainGot })),
			fmt.Sprintf("%.3f", med(k, func(fr fairResult) float64 { return fr.JainShares })),
			fmt.Sprintf("%.3f", med(k, func(fr fairResult) float64 { return fr.FloodOverFair })),
			pctNaN(med(k, func(fr fairResult) float64 { return fr.Saturated }))})
	}
	fmt.Fprintf(w, "Per configuration (medians; %% of %s is the median of the ratios within each repetition):\n\n", fairTiers)
	table(w, []string{"configuration", "goodput req/s, all tenants", "% of " + fairTiers, "Jain, calm: served ÷ offered",
		"Jain, calm: shares", flood.Name + "'s share ÷ its fair share", "engine saturated"}, rows)

	printFairTargets(w, wl, stacks, res, med, vsTiers)
	printFairMisses(w, wl, stacks, res)
	printFairReps(w, stacks, res)
}

// medianRatio returns the median over the repetitions of configuration k's goodput
// divided by configuration of's in the same repetition.
func medianRatio(res [][]fairResult, k, of int) float64 {
	xs := make([]float64, len(res))
	for r := range res {
		xs[r] = ratio(res[r][k].Goodput, res[r][of].Goodput)
	}
	return median(xs)
}

func printFairTargets(w io.Writer, wl fairWorkload, stacks []*stack, res [][]fairResult, med func(int, func(fairResult) float64) float64, vsTiers func(int) float64) {
	k := -1
	for i, st := range stacks {
		if st.setup.Name == fairTenants {
			k = i
		}
	}
	if k < 0 {
		return
	}
	n := len(wl.Tenants)
	fmt.Fprintf(w, "Targets with tenants on (%s, medians): every calm tenant keeps ≥ %.0f%% SLO attainment and gets ≥ %.0f%% of what it asked for; %s gets no more than its max-min fair share of the tokens served (within %.0f%%); total goodput ≥ %.0f%% of %s.\n\n",
		fairTenants, 100*targetAttainment, 100*targetGot, floodTenant, 100*(targetFlood-1), 100*targetGoodput, fairTiers)
	for i := range n - 1 {
		att := med(k, func(fr fairResult) float64 { return fr.Uses[i].Attainment() })
		got := med(k, func(fr fairResult) float64 { return fr.Uses[i].Got() })
		fmt.Fprintf(w, "- %s: SLO attainment %s (%s), served ÷ offered %s (%s)\n", wl.Tenants[i].Name,
			pct1(att), word(att >= targetAttainment), pct1(got), word(got >= targetGot))
	}
	ff := med(k, func(fr fairResult) float64 { return fr.FloodOverFair })
	fmt.Fprintf(w, "- %s: share %s of the tokens served against a fair share of %s: ×%.3f (%s)\n", floodTenant,
		pct1(med(k, func(fr fairResult) float64 { return fr.Uses[n-1].Share })), pct1(med(k, func(fr fairResult) float64 { return fr.Uses[n-1].Fair })),
		ff, word(ff <= targetFlood))
	g := vsTiers(k)
	fmt.Fprintf(w, "- total goodput %.3f req/s, %s of %s's (%s)\n\n", med(k, func(fr fairResult) float64 { return fr.Goodput }), pct1(g), fairTiers, word(g >= targetGoodput))
}

func word(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// printFairMisses says, for every configuration with admission, why the calm tenants'
// requests were not good, summed over the repetitions.
func printFairMisses(w io.Writer, wl fairWorkload, stacks []*stack, res [][]fairResult) {
	var rows [][]string
	for k, st := range stacks {
		for i, t := range wl.Tenants {
			var sent, good, adm int
			var m misses
			why := map[string]int{}
			var lateQ, lateE time.Duration
			var q50, q95, qmax []float64
			for r := range res {
				u := res[r][k].Uses[i]
				sent, good, adm = sent+u.Sum.Offered, good+u.Sum.Good, adm+u.Admitted
				m.TTFT, m.TPOT, m.Unfinished = m.TTFT+u.Misses.TTFT, m.TPOT+u.Misses.TPOT, m.Unfinished+u.Misses.Unfinished
				lateQ += u.Misses.LateQueue * time.Duration(u.Misses.TTFT)
				lateE += u.Misses.LateEngine * time.Duration(u.Misses.TTFT)
				addCounts(why, u.Sum.Reasons)
				q50, q95 = append(q50, u.Misses.QueueP50.Seconds()), append(q95, u.Misses.QueueP95.Seconds())
				qmax = append(qmax, u.Misses.QueueMax.Seconds())
			}
			late := fmt.Sprint(m.TTFT)
			if m.TTFT > 0 {
				late += fmt.Sprintf(" (%s queue + %s engine)", fmtDur(lateQ/time.Duration(m.TTFT)), fmtDur(lateE/time.Duration(m.TTFT)))
			}
			rows = append(rows, []string{st.setup.Name, t.Name, fmt.Sprint(sent), fmt.Sprint(good), fmt.Sprint(sent - adm), reasons(why),
				late, fmt.Sprint(m.TPOT), fmt.Sprint(m.Unfinished),
				fmt.Sprintf("%s / %s / %s", secs(median(q50)), secs(median(q95)), secs(median(qmax)))})
		}
	}
	fmt.Fprintln(w, "Why requests were not good (summed over the repetitions; TTFT missed: completed with the first token late, with its mean wait in slogate's queue and the rest; queue wait = time to the response's headers of admitted requests, medians of p50 / p95 / max):")
	fmt.Fprintln(w)
	table(w, []string{"configuration", "tenant", "sent", "good", "rejected", "by reason", "TTFT missed", "TPOT missed", "unfinished or failed", "queue wait p50 / p95 / max"}, rows)
}

// addCounts adds b's counts to a.
func addCounts(a, b map[string]int) {
	for k, v := range b {
		a[k] += v
	}
}

func printFairReps(w io.Writer, stacks []*stack, res [][]fairResult) {
	var rows [][]string
	for r := range res {
		for k, st := range stacks {
			fr := res[r][k]
			minAtt, minGot := math.Inf(1), math.Inf(1)
			for _, u := range fr.Uses[:len(fr.Uses)-1] {
				minAtt, minGot = min(minAtt, u.Attainment()), min(minGot, u.Got())
			}
			rows = append(rows, []string{fmt.Sprint(r + 1), st.setup.Name, fmt.Sprintf("%.3f", fr.Goodput), pctNaN(minAtt), pctNaN(minGot),
				fmt.Sprintf("%.3f", fr.FloodOverFair), fmt.Sprintf("%.3f", fr.JainGot)})
		}
	}
	fmt.Fprintln(w, "Each repetition:")
	fmt.Fprintln(w)
	table(w, []string{"repetition", "configuration", "goodput req/s", "lowest calm attainment", "lowest calm served ÷ offered", floodTenant + " share ÷ fair", "Jain, calm: served ÷ offered"}, rows)
}

func pctNaN(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return pct(x)
}

func pct1(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

func secs(s float64) string {
	if math.IsNaN(s) {
		return "–"
	}
	return fmtDur(time.Duration(s * float64(time.Second)))
}
