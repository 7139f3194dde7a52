package main

import (
	"context"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// experiment is one workload replayed against several stacks at once: every arrival of
// the schedule is sent to every stack at the same moment, with the same body, so the
// stacks are compared side by side under the same noise.
//
// Requests arriving in [0, Warmup) load the stacks but are not measured; those arriving
// in [Warmup, Warmup+Window) are. Arrivals go on through a grace period after the window
// (so the measured requests do not see the load fall away), and at its end every request
// still running is cancelled. Grace is chosen so that a request still running then could
// no longer have met its SLOs.
type experiment struct {
	Name    string
	Classes []class
	Stacks  []*stack
	Seed    uint64
	SLO     measure.SLO

	Warmup, Window, Grace time.Duration
	// CV is the coefficient of variation of the inter-arrival times (schedule); 0 is 1,
	// Poisson arrivals.
	CV float64

	Arrivals []arrival
	Outcomes [][]outcome // by stack, then by arrival
	Timeline [][]sample  // by stack: one sample a second
}

type admStats = admission.TierStats

// sample is a stack's state at one moment: the simulated engine's own gauges and, with
// admission, every tier's state and, with tenants, every tenant's.
type sample struct {
	At               time.Duration
	Running, Waiting int
	KVUsage          float64
	Engine           admission.Reason // as a new request would see it
	Tiers            []admStats
	Tenants          []admission.TenantStats
}

// cv returns the arrivals' coefficient of variation: CV, or 1 (Poisson) when unset.
func (e *experiment) cv() float64 {
	if e.CV == 0 {
		return 1
	}
	return e.CV
}

// run replays the experiment's schedule against its stacks. It returns when the grace
// period ended and every request has been cancelled or finished.
func (e *experiment) run(ctx context.Context) {
	total := e.Warmup + e.Window + e.Grace
	e.Arrivals = schedule(e.Classes, total, e.Seed, e.cv())
	e.Outcomes = make([][]outcome, len(e.Stacks))
	e.Timeline = make([][]sample, len(e.Stacks))
	for k := range e.Stacks {
		e.Outcomes[k] = make([]outcome, len(e.Arrivals))
	}
	reqCtx, cut := context.WithCancel(ctx)
	defer cut()
	start := time.Now()
	var mon sync.WaitGroup
	mon.Go(func() { e.monitor(reqCtx, start) })
	var wg sync.WaitGroup
	model, vocab := e.Stacks[0].profile.Model, e.Stacks[0].profile.Vocab
	for i, a := range e.Arrivals {
		if !sleepUntil(ctx, start.Add(a.At)) {
			break
		}
		c := e.Classes[a.Class]
		body := completionBody(model, c.Input, c.Output, vocab, e.Seed<<32|uint64(i))
		for k, st := range e.Stacks {
			o := &e.Outcomes[k][i]
			o.Arrival, o.Class = a.At, a.Class
			wg.Go(func() { send(reqCtx, st.client, st.url, body, c.Tenant, o) })
		}
	}
	sleepUntil(ctx, start.Add(total))
	cut()
	wg.Wait()
	mon.Wait()
}

// monitor samples every stack once a second until ctx ends.
func (e *experiment) monitor(ctx context.Context, start time.Time) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := time.Since(start)
		for k, st := range e.Stacks {
			s := st.sim.Stats()
			smp := sample{At: at, Running: s.Running, Waiting: s.Waiting}
			smp.KVUsage = float64(s.UsedBlocks) / float64(st.profile.NumBlocks)
			if st.ctrl != nil {
				cs := st.ctrl.Stats()
				smp.Engine, smp.Tiers, smp.Tenants = cs.Engine, cs.Tiers, cs.Tenants
			}
			e.Timeline[k] = append(e.Timeline[k], smp)
		}
	}
}

// sleepUntil waits until t, reporting false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// summary returns stack k's summary of class cls over the measurement window, its
// requests judged by the class's SLO.
func (e *experiment) summary(k, cls int) summary {
	c := e.Classes[cls]
	return summarize(e.Outcomes[k], cls, c.Output, c.SLO.Or(e.SLO), e.Warmup, e.Window)
}

// total returns stack k's summary of every class together: the counts and goodput
// added up, each request judged by its class's SLO. Its percentiles are those of the
// first class alone, and only meaningful for an experiment of one class.
func (e *experiment) total(k int) summary {
	sum := e.summary(k, 0)
	for cls := 1; cls < len(e.Classes); cls++ {
		s := e.summary(k, cls)
		sum.Offered += s.Offered
		sum.Good += s.Good
		sum.Completed += s.Completed
		sum.Rejected += s.Rejected
		sum.Failed += s.Failed
		sum.Unfinished += s.Unfinished
		sum.Goodput += s.Goodput
		for r, n := range s.Reasons {
			sum.Reasons[r] += n
		}
	}
	if sum.Offered > 0 {
		sum.RejectRate = float64(sum.Rejected) / float64(sum.Offered)
	}
	return sum
}

// addStacks starts a stack of profile p for every setup and adds it to e's.
func (e *experiment) addStacks(sus []setup, p enginesim.Profile) error {
	for _, su := range sus {
		st, err := newStack(su, p)
		if err != nil {
			return err
		}
		e.Stacks = append(e.Stacks, st)
	}
	return nil
}

// runEach runs the experiments one after another when serial, else at the same time
// (runAll).
func runEach(ctx context.Context, exps []*experiment, serial bool) {
	if !serial {
		runAll(ctx, exps)
		return
	}
	for _, e := range exps {
		e.run(ctx)
	}
}

// runAll runs the experiments at the same time and waits for all of them.
func runAll(ctx context.Context, exps []*experiment) {
	var wg sync.WaitGroup
	for _, e := range exps {
		wg.Go(func() { e.run(ctx) })
	}
	wg.Wait()
}
