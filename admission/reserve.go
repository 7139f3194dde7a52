package admission

import (
	"fmt"
	"time"

	"github.com/slogate/slogate/measure"
)

// reservation is what a ticket reserved of its tenant's budgets.
type reservation struct {
	held          bool
	input, output float64
}

// reserve checks tk's tenant's budgets at now and, when they allow the request, reserves
// its estimated cost; it runs under the lock. A request over a budget gets the
// rejection, for the budget that holds it back longest and with a Retry-After of when
// all of them would allow it; in shadow mode it is recorded as rejected and let through
// without reserving anything (enforce would not have run it).
func (c *Controller) reserve(now time.Time, t *tierState, tk *Ticket, d *Decision) *Rejection {
	ts := tk.ten
	if ts == nil {
		return nil
	}
	in, out := float64(tk.tokens), float64(tk.output)
	if tk.output == 0 {
		out = ts.meanOutput
	}
	b := ts.cfg.Budget
	var reason Reason
	var retry time.Duration
	var msg string
	never := false // a budget can never hold the request
	over := func(r Reason, wait time.Duration, format string, args ...any) {
		if reason == NoReason || wait > retry {
			reason, retry, msg = r, wait, fmt.Sprintf(format, args...)
		}
	}
	if b.MaxConcurrent > 0 && ts.active >= b.MaxConcurrent {
		over(TenantConcurrency, time.Second, "has %d requests open, its limit", b.MaxConcurrent)
	}
	for _, k := range []struct {
		b      *bucket
		n      float64
		reason Reason
		what   string
	}{
		{&ts.requests, 1, TenantRequests, "requests"},
		{&ts.inputTok, in, TenantInputTokens, "input tokens"},
		{&ts.outputTok, out, TenantOutputTokens, "output tokens"},
	} {
		switch wait := k.b.need(k.n, now); {
		case wait < 0:
			never = true
			over(k.reason, time.Minute, "needs %.0f %s, more than its budget of %.0f a minute", k.n, k.what, k.b.perMinute)
		case wait > 0:
			over(k.reason, wait, "is over its budget of %.0f %s a minute (this request needs %.0f, %.0f left)", k.b.perMinute, k.what, k.n, max(k.b.level, 0))
		}
	}
	if reason != NoReason {
		d.Verdict, d.Reason = Rejected, reason
		c.bypass(d, t, tk)
		rej := reject(t, reason, retry, "tenant %s %s", ts.cfg.Name, msg)
		rej.Final = never
		return rej
	}
	ts.requests.take(1, now)
	ts.inputTok.take(in, now)
	ts.outputTok.take(out, now)
	ts.active++
	tk.res = reservation{held: true, input: in, output: out}
	return nil
}

// unreserve gives back all of a reservation whose request never ran (turned away by
// its tier, shed, timed out in the queue, or its client left), under the lock.
func (c *Controller) unreserve(tk *Ticket) {
	if !tk.res.held {
		return
	}
	now := c.opts.Clock.Now()
	ts := tk.ten
	ts.requests.take(-1, now)
	ts.inputTok.take(-tk.res.input, now)
	ts.outputTok.take(-tk.res.output, now)
	ts.active--
	tk.res.held = false
}

// settle ends the reservation of a request that ran, under the lock: the budgets are
// charged what the engine reported it used (its estimates where it reported nothing),
// refunding what the reservation held beyond that — or charging the excess, which the
// next requests wait for. The tenant's mean output learns from requests without
// max_tokens, and its counter gets the engine's input count in place of the estimate.
func (c *Controller) settle(tk *Ticket, res measure.Result) {
	ts := tk.ten
	if ts == nil {
		return
	}
	input := float64(tk.tokens)
	if res.InputTokens > 0 {
		input = float64(res.InputTokens)
		if tk.dispatched {
			ts.input += ts.fair.InputWeight * (input - float64(tk.tokens))
		}
	}
	if !tk.res.held {
		return
	}
	now := c.opts.Clock.Now()
	ts.inputTok.take(input-tk.res.input, now)
	ts.outputTok.take(float64(res.OutputTokens)-tk.res.output, now)
	ts.active--
	tk.res.held = false
	if tk.output == 0 && res.Outcome == measure.OK {
		ts.meanOutput = 0.9*ts.meanOutput + 0.1*float64(res.OutputTokens)
	}
}

// quota returns the tenant's budgets at now, under the lock.
func (ts *tenantState) quota(now time.Time) Quota {
	return Quota{Requests: ts.requests.allowance(now), InputTokens: ts.inputTok.allowance(now), OutputTokens: ts.outputTok.allowance(now)}
}
