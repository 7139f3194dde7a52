package main

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"time"
)

// tenantUse is what one tenant asked of one stack over the measurement window and what
// it got. Tokens are prompt plus output tokens, unweighted.
type tenantUse struct {
	Name     string
	Sum      summary // its requests' summary: goodput, rejections by reason, ...
	Admitted int     // its requests not rejected
	Offered  float64 // tokens asked for: prompt + max_tokens of every request it sent
	Served   float64 // tokens served: prompt + output of its requests that got a first token
	Share    float64 // its share of the tokens served to every tenant
	Fair     float64 // its max-min fair share of those tokens, given what every tenant asked for
	// Waiting is how many of its requests waited in slogate on average over the window
	// (Little's law: the sum of their waits, to the response's headers, over the window).
	Waiting float64
	Misses  misses
}

// Attainment returns the share of its requests sent that met both SLOs.
func (u tenantUse) Attainment() float64 { return ratio(float64(u.Sum.Good), float64(u.Sum.Offered)) }

// AdmittedAttainment returns the share of its admitted requests that met both SLOs.
func (u tenantUse) AdmittedAttainment() float64 {
	return ratio(float64(u.Sum.Good), float64(u.Admitted))
}

// Got returns how much of what it asked for it got: served ÷ offered tokens.
func (u tenantUse) Got() float64 { return ratio(u.Served, u.Offered) }

// misses says why a tenant's admitted requests were not good, and how long they waited
// in slogate's queue (the time to the response's headers).
type misses struct {
	TTFT, TPOT int // completed, but the first token came late; or in time and the tokens were slow
	Unfinished int // cut at the cut-off, or failed
	// LateQueue and LateEngine are the mean queue wait and the mean rest of the TTFT (the
	// engine's queue and prefill) of the requests that missed their TTFT.
	LateQueue, LateEngine time.Duration
	// QueueP50, QueueP95 and QueueMax are over the admitted requests that got headers.
	QueueP50, QueueP95, QueueMax time.Duration
}

// ratio returns x/of, or NaN when of is 0.
func ratio(x, of float64) float64 {
	if of == 0 {
		return math.NaN()
	}
	return x / of
}

// served returns the tokens a request was served: its prompt and its output once a first
// token arrived (the usage report's count, or the output chunks that arrived where the
// stream ended before the report), none before.
func (o outcome) served(input int) int {
	if !o.FirstTok {
		return 0
	}
	out := o.Tokens
	if out == 0 {
		out = o.Chunks
	}
	return input + out
}

// tenantUses returns every tenant's use of stack k over e's window: each class of e is a
// tenant.
func (e *experiment) tenantUses(k int) []tenantUse {
	out := make([]tenantUse, len(e.Classes))
	for c, cl := range e.Classes {
		out[c] = use(e.Outcomes[k], c, cl, e)
	}
	shareOut(out)
	return out
}

// use returns what the requests of class c (tenant cl) among os asked and got over e's
// window.
func use(os []outcome, c int, cl class, e *experiment) tenantUse {
	u := tenantUse{Name: cl.Name, Sum: summarize(os, c, cl.Output, e.SLO, e.Warmup, e.Window)}
	u.Admitted = u.Sum.Offered - u.Sum.Rejected
	var queue []time.Duration
	var lateQ, lateE time.Duration
	for _, o := range os {
		if o.Class != c || o.Arrival < e.Warmup || o.Arrival >= e.Warmup+e.Window {
			continue
		}
		u.Offered += float64(cl.Input + cl.Output)
		u.Served += float64(o.served(cl.Input))
		wait := o.Headers
		if o.Status == 0 { // no response by the cut-off
			wait = o.E2E
		}
		u.Waiting += wait.Seconds()
		if o.rejected() {
			continue
		}
		if o.Status == http.StatusOK {
			queue = append(queue, o.Headers)
		}
		switch {
		case !o.completed(cl.Output):
			u.Misses.Unfinished++
		case !e.SLO.MetTTFT(o.TTFT):
			u.Misses.TTFT++
			lateQ += o.Headers
			lateE += o.TTFT - o.Headers
		case !o.good(cl.Output, e.SLO):
			u.Misses.TPOT++
		}
	}
	u.Waiting /= e.Window.Seconds()
	if n := time.Duration(u.Misses.TTFT); n > 0 {
		u.Misses.LateQueue, u.Misses.LateEngine = lateQ/n, lateE/n
	}
	u.Misses.QueueP50, u.Misses.QueueP95, u.Misses.QueueMax = percentile(queue, 0.5), percentile(queue, 0.95), percentile(queue, 1)
	return u
}

// shareOut sets every tenant's share of the tokens served and its max-min fair share of
// them.
func shareOut(us []tenantUse) {
	served, demand := 0.0, make([]float64, len(us))
	for i, u := range us {
		served += u.Served
		demand[i] = u.Offered
	}
	fair := maxMinShares(demand, served)
	for i := range us {
		us[i].Share, us[i].Fair = ratio(us[i].Served, served), ratio(fair[i], served)
	}
}

// maxMinShares divides capacity among claimants of equal weight asking for demand by
// max-min fairness (water-filling): nobody gets more than it asks for, and what one does
// not need goes in equal parts to those that want more. The result sums to the lesser of
// capacity and the total demand.
func maxMinShares(demand []float64, capacity float64) []float64 {
	out := make([]float64, len(demand))
	order := make([]int, len(demand))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(demand[a], demand[b]) })
	left := max(capacity, 0)
	for n, i := range order {
		level := left / float64(len(order)-n)
		out[i] = min(max(demand[i], 0), level)
		left -= out[i]
	}
	return out
}

// jain returns Jain's fairness index of xs, (Σx)² / (n Σx²): 1 when all are equal, 1/n
// when one has everything; NaN for no values, all zero, or any NaN.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 || math.IsNaN(sq) {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// median returns the median of xs (the mean of the middle two for an even count),
// leaving out NaNs; NaN when none is left. xs is not modified.
func median(xs []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
