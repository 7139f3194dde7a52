package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// trial is one offered rate tried during calibration, without admission.
type trial struct {
	Rate float64
	Sum  summary
	OK   bool
}

// sustainable reports whether a window met the knee criteria of the calibration: every
// request completed, p95 TTFT within the SLO (with no request cut before its first token
// at or above it) and p95 TPOT within the SLO.
func sustainable(s summary, o measure.SLO) bool {
	return s.Offered > 0 && s.Completed == s.Offered && !s.TTFTCensored && o.Met(s.P95TTFT, s.P95TPOT)
}

// bracket returns the lowest rate that failed (hi; 0 when none did) and the highest rate
// below it that passed (lo; 0 when none did). A pass above a failure is ignored: the
// sustainable rate is bounded by the lowest failure.
func bracket(ts []trial) (lo, hi float64) {
	for _, t := range ts {
		if !t.OK && (hi == 0 || t.Rate < hi) {
			hi = t.Rate
		}
	}
	for _, t := range ts {
		if t.OK && (hi == 0 || t.Rate < hi) && t.Rate > lo {
			lo = t.Rate
		}
	}
	return lo, hi
}

// probes returns n rates evenly spaced strictly inside (lo, hi), rounded to 0.001.
func probes(lo, hi float64, n int) []float64 {
	out := make([]float64, 0, n)
	for i := 1; i <= n; i++ {
		r := lo + (hi-lo)*float64(i)/float64(n+1)
		out = append(out, math.Round(r*1000)/1000)
	}
	return slices.Compact(out)
}

// calibration is the outcome of the calibration: the sustainable rate and what was
// measured there.
type calibration struct {
	Rate   float64
	At     summary // the window at Rate
	Trials []trial
	Noise  []string // the machine during each round
}

// calibrateOpts says how to look for the sustainable rate.
type calibrateOpts struct {
	Profile        enginesim.Profile
	Input, Output  int
	SLO            measure.SLO
	Scan           []float64 // the coarse scan's rates
	Refine, Points int       // rounds of refinement, and rates tried in each
	Warmup, Window time.Duration
	Seed           uint64
	Quiet          func() // waits for a quiet machine
}

// findRate finds the highest offered rate at which the engine without admission keeps
// p95 TTFT and p95 TPOT within the SLO with every request completing: a coarse scan,
// then rounds that try Points rates evenly inside the bracket of the last passing and
// the first failing rate. The rates of one round run at the same time, each against its
// own simulated engine, with the same seed (the same arrivals, scaled in time).
func findRate(ctx context.Context, o calibrateOpts, log io.Writer) (calibration, error) {
	var cal calibration
	rates := o.Scan
	for round := 0; ; round++ {
		o.Quiet()
		var ts []trial
		var err error
		noise := phaseNoise(ctx, func() { ts, err = trials(ctx, o, rates) })
		if err != nil {
			return cal, err
		}
		cal.Noise = append(cal.Noise, fmt.Sprintf("round %d: %s", round, noise))
		cal.Trials = append(cal.Trials, ts...)
		for _, t := range ts {
			fmt.Fprintf(log, "calibration round %d: %.3f req/s: %s -> %s\n", round, t.Rate, brief(t.Sum), passFail(t.OK))
		}
		lo, hi := bracket(cal.Trials)
		switch {
		case ctx.Err() != nil:
			return cal, ctx.Err()
		case hi == 0:
			return cal, fmt.Errorf("every rate up to %.3f req/s was sustainable: scan higher", slices.Max(rates))
		case lo == 0:
			return cal, fmt.Errorf("the lowest rate tried, %.3f req/s, was not sustainable: scan lower", hi)
		}
		if round == o.Refine {
			for _, t := range cal.Trials {
				if t.Rate == lo {
					cal.Rate, cal.At = lo, t.Sum
				}
			}
			return cal, nil
		}
		rates = probes(lo, hi, o.Points)
	}
}

// trials runs one window at each rate, all at the same time, without admission.
func trials(ctx context.Context, o calibrateOpts, rates []float64) ([]trial, error) {
	exps := make([]*experiment, len(rates))
	defer closeAll(exps)
	for i, r := range rates {
		st, err := newStack(setup{Name: "none", SLO: o.SLO}, o.Profile)
		if err != nil {
			return nil, err
		}
		exps[i] = &experiment{
			Name: fmt.Sprintf("calibration %.3f", r), Stacks: []*stack{st}, Seed: o.Seed, SLO: o.SLO,
			Classes: []class{{Name: "8k", Input: o.Input, Output: o.Output, Rate: r}},
			Warmup:  o.Warmup, Window: o.Window, Grace: grace(o.SLO, o.Output),
		}
	}
	runAll(ctx, exps)
	out := make([]trial, len(rates))
	for i, e := range exps {
		s := e.summary(0, 0)
		out[i] = trial{Rate: rates[i], Sum: s, OK: sustainable(s, o.SLO)}
	}
	return out, nil
}

// grace is how long after the window requests may run on: a request still running then
// has been running longer than a request that met both SLOs can (TTFT SLO + (output - 1)
// x TPOT SLO), plus a second.
func grace(o measure.SLO, output int) time.Duration {
	return time.Duration(o.TTFT) + time.Duration(output-1)*time.Duration(o.TPOT) + time.Second
}

func closeAll(exps []*experiment) {
	for _, e := range exps {
		if e == nil {
			continue
		}
		for _, st := range e.Stacks {
			st.Close()
		}
	}
}

func passFail(ok bool) string {
	if ok {
		return "sustainable"
	}
	return "not sustainable"
}

// brief is a one-line account of a window.
func brief(s summary) string {
	return fmt.Sprintf("offered %d, completed %d, p95 TTFT %s%s, p95 TPOT %s, mean E2E %s",
		s.Offered, s.Completed, ge(s.TTFTCensored), fmtDur(s.P95TTFT), fmtDur(s.P95TPOT), fmtDur(s.MeanE2E))
}
