package main

import (
	"fmt"
	"io"
	"time"
)

func printCalibration(w io.Writer, o options, cal calibration, took time.Duration) {
	fmt.Fprintf(w, "## Calibration (took %s)\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "Each rate: its own engine without admission, %d-token prompts / %d output tokens, Poisson arrivals (seed %d), %s warm-up then %s measured; rates of one round at the same time.\n\n",
		o.input, o.output, o.seed, o.calWarmup, o.calWindow)
	var rows [][]string
	for _, t := range cal.Trials {
		s := t.Sum
		rows = append(rows, []string{fmt.Sprintf("%.3f", t.Rate), fmt.Sprint(s.Offered), fmt.Sprint(s.Completed),
			ge(s.TTFTCensored) + fmtDur(s.P95TTFT), fmtDur(s.P95TPOT), fmtDur(s.MeanE2E), passFail(t.OK)})
	}
	table(w, []string{"offered req/s", "requests", "completed", "p95 TTFT", "p95 TPOT", "mean E2E", "verdict"}, rows)
	for _, n := range cal.Noise {
		fmt.Fprintf(w, "Machine, %s.\n\n", n)
	}
	fmt.Fprintf(w, "**Sustainable rate λ\\* = %.3f req/s**: the highest rate tried below the lowest failing one with p95 TTFT ≤ %s, p95 TPOT ≤ %s and every request completed.\n\n",
		cal.Rate, o.slo.TTFT, o.slo.TPOT)
	fmt.Fprintf(w, "Static cap = ⌈λ\\* × mean E2E⌉ = ⌈%.3f × %.2f s⌉ = **%d**; queue wait = TTFT SLO − p95 TTFT at λ\\* (%s), rounded down to 0.5 s = **%s**.\n\n",
		cal.Rate, cal.At.MeanE2E.Seconds(), o.staticCap, fmtDur(cal.At.P95TTFT), o.staticWait)
}

func printGoodput(w io.Writer, o options, exps []*experiment, took time.Duration, noise string) {
	how := "all load levels at the same time"
	if o.serial {
		how = "load levels one after another"
	}
	fmt.Fprintf(w, "## Goodput (took %s)\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "λ\\* = %.3f req/s; static cap %d in flight, queue wait %s; %s warm-up, %s measured, %s grace; %s, the three configurations of a level side by side.\n\n",
		o.rate, o.staticCap, o.staticWait, o.warmup, o.window, exps[0].Grace, how)
	fmt.Fprintf(w, "Machine: %s.\n\n", noise)
	nst := len(exps[0].Stacks)
	best := make([]float64, nst)
	var bestAll float64
	for _, e := range exps {
		for k := range e.Stacks {
			g := e.summary(k, 0).Goodput
			best[k] = max(best[k], g)
			bestAll = max(bestAll, g)
		}
	}
	var rows, ctl [][]string
	for i, e := range exps {
		for k, st := range e.Stacks {
			s := e.summary(k, 0)
			rows = append(rows, []string{fmt.Sprintf("%g×", o.levels[i]), fmt.Sprintf("%.3f", float64(s.Offered)/s.Window.Seconds()),
				st.setup.Name, fmt.Sprintf("%.3f", s.Goodput), pctOf(s.Goodput, best[k]), pctOf(s.Goodput, bestAll),
				ge(s.TTFTCensored) + fmtDur(s.P95TTFT), fmtDur(s.P95TPOT), pct(s.RejectRate),
				fmt.Sprintf("%d / %d", s.Completed, s.Offered), fmt.Sprint(s.Unfinished + s.Failed)})
			ctl = append(ctl, controlRow(e, k, fmt.Sprintf("%g×", o.levels[i]), "medium", s))
		}
	}
	table(w, []string{"load", "offered req/s", "configuration", "goodput req/s", "% of its best", "% of best overall",
		"p95 TTFT admitted", "p95 TPOT", "reject rate", "completed / offered", "unfinished or failed"}, rows)
	fmt.Fprintln(w, "What the engine and admission did over the measured window (sampled once a second; cap = the 8K tier's working in-flight cap for slogate):")
	fmt.Fprintln(w)
	table(w, []string{"load", "configuration", "engine running (mean)", "engine waiting (mean)", "cap start → end (min / median / max)",
		"in flight (mean)", "at cap", "engine saturated", "rejections by reason"}, ctl)
	last := exps[len(exps)-1]
	top := o.levels[len(o.levels)-1]
	fmt.Fprintf(w, "Targets at %g×: slogate keeps ≥ 90%% of the best goodput measured at any load, no admission falls below 30%%.\n\n", top)
	for k, st := range last.Stacks {
		g := last.summary(k, 0).Goodput
		verdict := ""
		switch {
		case st.setup.Name == "no admission":
			verdict = metIf(g < 0.3*best[k] || best[k] == 0, g < 0.3*bestAll)
		case st.setup.Admission != nil && st.setup.Engine:
			verdict = metIf(g >= 0.9*best[k], g >= 0.9*bestAll)
		}
		fmt.Fprintf(w, "- %s: %.3f req/s = %s of its own best, %s of the best overall%s\n", st.setup.Name, g, pctOf(g, best[k]), pctOf(g, bestAll), verdict)
	}
	fmt.Fprintln(w)
}

// metIf words a target's verdict against the configuration's own best and the best
// overall.
func metIf(own, overall bool) string {
	word := func(b bool) string {
		if b {
			return "met"
		}
		return "not met"
	}
	return fmt.Sprintf(": target %s against its own best, %s against the best overall", word(own), word(overall))
}

// controlRow describes stack k of e over the window: the engine, and the tier's cap.
func controlRow(e *experiment, k int, load, tier string, s summary) []string {
	st := e.Stacks[k]
	run, wait := e.engineLoad(k)
	row := []string{load, st.setup.Name, fmt.Sprintf("%.1f", run), fmt.Sprintf("%.1f", wait)}
	if st.setup.Admission != nil && len(st.setup.Admission.Tiers) == 1 {
		tier = st.setup.Admission.Tiers[0].Name
	}
	if tr, ok := e.trace(k, tier); ok {
		row = append(row, fmt.Sprintf("%.1f → %.1f (%.1f / %.1f / %.1f)", tr.Start, tr.End, tr.Min, tr.Median, tr.Max),
			fmt.Sprintf("%.1f", tr.MeanInFlight), pct(tr.AtCap), pct(tr.Saturated))
	} else {
		row = append(row, "–", "–", "–", "–")
	}
	return append(row, reasons(s.Reasons))
}

func pctOf(x, of float64) string {
	if of == 0 {
		return "–"
	}
	return pct(x / of)
}

func printMixed(w io.Writer, o options, e *experiment, took time.Duration, noise string) {
	fmt.Fprintf(w, "## Mixed lengths (took %s)\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "Short: %d-token prompts / %d output at %.2f req/s; long: %d / %d at %.2f req/s; Poisson, seed %d; %s warm-up, %s measured, %s grace.\n\n",
		o.short.Input, o.short.Output, o.short.Rate, o.long.Input, o.long.Output, o.long.Rate, o.seed, e.Warmup, e.Window, e.Grace)
	fmt.Fprintf(w, "Machine: %s.\n\n", noise)
	var rows, ctl [][]string
	for k, st := range e.Stacks {
		for c, cl := range e.Classes {
			s := e.summary(k, c)
			rows = append(rows, []string{st.setup.Name, cl.Name, fmt.Sprint(s.Offered), fmt.Sprintf("%.3f", s.Goodput),
				ge(s.TTFTCensored) + fmtDur(s.P50TTFT), ge(s.TTFTCensored) + fmtDur(s.P95TTFT), fmtDur(s.P95TPOT),
				pct(s.RejectRate), reasons(s.Reasons), fmt.Sprintf("%d / %d", s.Completed, s.Offered), fmt.Sprint(s.Unfinished + s.Failed)})
			if st.ctrl != nil {
				ctl = append(ctl, controlRow(e, k, cl.Name, cl.Name, s))
			}
		}
	}
	table(w, []string{"configuration", "class", "offered", "goodput req/s", "p50 TTFT admitted", "p95 TTFT admitted", "p95 TPOT",
		"reject rate", "rejections by reason", "completed / offered", "unfinished or failed"}, rows)
	for k, st := range e.Stacks {
		short, long := e.summary(k, 0), e.summary(k, 1)
		fmt.Fprintf(w, "- %s: short p95 TTFT %s%s (SLO %s: %s); long: %s rejected",
			st.setup.Name, ge(short.TTFTCensored), fmtDur(short.P95TTFT), o.slo.TTFT, withinWord(!short.TTFTCensored && o.slo.MetTTFT(short.P95TTFT)), pct(long.RejectRate))
		if tr, ok := e.trace(k, "long"); ok {
			fmt.Fprintf(w, ", long tier at its cap %s of the time", pct(tr.AtCap))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if len(ctl) > 0 {
		fmt.Fprintln(w, "slogate's tiers over the window (cap = the tier's working in-flight cap):")
		fmt.Fprintln(w)
		table(w, []string{"tier", "configuration", "engine running (mean)", "engine waiting (mean)", "cap start → end (min / median / max)",
			"in flight (mean)", "at cap", "engine saturated", "rejections by reason"}, ctl)
	}
}

func withinWord(ok bool) string {
	if ok {
		return "within"
	}
	return "over"
}
