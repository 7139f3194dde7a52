package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The compare phase's targets (issue 18): the calibrated configuration keeps at least
// these shares of the best goodput measured in its group at 2× and 5× the knee, beats
// every other configuration at every level from 1.5× up, and its admitted requests meet
// both SLOs at least this often.
const (
	targetAt2x      = 0.95
	targetAt5x      = 0.90
	targetBeatsFrom = 1.5
	targetAdmitted  = 0.99
)

// cell is one configuration at one load level of a group.
type cell struct {
	Level float64
	Name  string
	Sum   summary
}

// admittedGood returns the share of the admitted requests (all but the rejected) that
// were good; 1 when none was admitted.
func (c cell) admittedGood() float64 {
	adm := c.Sum.Offered - c.Sum.Rejected
	if adm == 0 {
		return 1
	}
	return float64(c.Sum.Good) / float64(adm)
}

// cells returns the group's cells by level, then configuration in stack order.
func (g compareGroup) cells(levels []float64) [][]cell {
	out := make([][]cell, len(g.Exps))
	for i, e := range g.Exps {
		for k, st := range e.Stacks {
			out[i] = append(out[i], cell{Level: levels[i], Name: st.setup.Name, Sum: e.total(k)})
		}
	}
	return out
}

// best returns the highest goodput of any cell.
func best(cs [][]cell) float64 {
	var b float64
	for _, row := range cs {
		for _, c := range row {
			b = max(b, c.Sum.Goodput)
		}
	}
	return b
}

// idealGoodput returns the goodput of an ideal queue on experiment e's arrivals: one
// server that serves good requests at rate mu back to back, first come first served, and
// turns away at once every request that would wait longer than wait. No admission
// policy in front of an engine whose good capacity is mu can keep many more of a
// schedule's requests inside a TTFT SLO that leaves wait for queueing: it is the yardstick
// a shortfall is measured against. Counted over e's window, as the stacks are.
func idealGoodput(e *experiment, mu float64, wait time.Duration) float64 {
	if mu <= 0 || e.Window <= 0 {
		return 0
	}
	service := time.Duration(float64(time.Second) / mu)
	var free time.Duration
	served := 0
	for _, a := range e.Arrivals {
		start := max(a.At, free)
		if start-a.At > wait {
			continue
		}
		free = start + service
		if a.At >= e.Warmup && a.At < e.Warmup+e.Window {
			served++
		}
	}
	return float64(served) / e.Window.Seconds()
}

// verdict is one target's outcome in one group.
type verdict struct {
	Target string
	Met    bool
	Detail string
}

// compareVerdicts judges the targets on one group's cells: the calibrated
// configuration against the best goodput of the group at 2× and 5×, against every other
// configuration from 1.5× up, and its admitted requests' SLO attainment at every level.
// Levels the group did not run are not judged.
//
// ideal holds the ideal queue's goodput at each level (idealGoodput): a share target the
// ideal queue misses too says so, since no policy could have met it on those arrivals.
func compareVerdicts(cs [][]cell, ideal []float64) []verdict {
	top := best(cs)
	var out []verdict
	for i, row := range cs {
		cal, ok := find(row, nameCalibrated)
		if !ok {
			continue
		}
		g := cal.Sum.Goodput
		for _, t := range []struct {
			level, share float64
		}{{2, targetAt2x}, {5, targetAt5x}} {
			if cal.Level == t.level {
				out = append(out, verdict{
					Target: fmt.Sprintf("at %g× keeps ≥ %.0f%% of the best goodput", t.level, 100*t.share),
					Met:    top > 0 && g >= t.share*top,
					Detail: fmt.Sprintf("%.3f req/s = %s of %.3f", g, pctOf(g, top), top),
				})
				v := &out[len(out)-1]
				if offered := float64(cal.Sum.Offered) / cal.Sum.Window.Seconds(); !v.Met && offered < t.share*top {
					v.Detail += fmt.Sprintf("; out of reach: the load offers %.4g req/s in all, %s of the best, so that no policy could meet it", offered, pctOf(offered, top))
				}
				if i < len(ideal) {
					v.Detail += fmt.Sprintf("; the ideal queue keeps %.3f = %s", ideal[i], pctOf(ideal[i], top))
					if !v.Met && ideal[i] < t.share*top {
						v.Detail += ", short of the target too: the arrivals leave the engine idle between bursts, and a request of a burst cannot wait its turn inside the TTFT SLO"
					}
				}
			}
		}
		if cal.Level >= targetBeatsFrom {
			var rival cell
			for _, c := range row {
				if c.Name != nameCalibrated && c.Sum.Goodput >= rival.Sum.Goodput {
					rival = c
				}
			}
			v := verdict{
				Target: fmt.Sprintf("at %g× beats every other configuration", cal.Level),
				Met:    g > rival.Sum.Goodput,
				Detail: fmt.Sprintf("%.3f req/s against %s's %.3f (%s)", g, rival.Name, rival.Sum.Goodput, signedPct(g, rival.Sum.Goodput)),
			}
			if !v.Met && rival.Name == nameSlogate {
				// The runner-up is slogate itself, with its built-in tiers: say by how many
				// requests, and how calibrated fares against every other way of protecting
				// the engine.
				var other cell
				for _, c := range row {
					if c.Name != nameCalibrated && c.Name != nameSlogate && c.Sum.Goodput >= other.Sum.Goodput {
						other = c
					}
				}
				v.Detail += fmt.Sprintf(", %s in %s; against the best of the others, %s's %.3f: %s",
					requests(rival.Sum.Good-cal.Sum.Good), rival.Sum.Window, other.Name, other.Sum.Goodput, signedPct(g, other.Sum.Goodput))
			}
			out = append(out, v)
		}
		a := cal.admittedGood()
		out = append(out, verdict{
			Target: fmt.Sprintf("at %g× admitted requests meet both SLOs ≥ %.0f%%", cal.Level, 100*targetAdmitted),
			Met:    a >= targetAdmitted,
			Detail: fmt.Sprintf("%d good of %d admitted = %.1f%%", cal.Sum.Good, cal.Sum.Offered-cal.Sum.Rejected, 100*a),
		})
	}
	return out
}

// calibratedWait returns how long the calibrated tier of the workload's prompts lets a
// request queue (its max_queue_wait), or half the TTFT SLO, admission's default.
func calibratedWait(o options) time.Duration {
	if o.calibrated != nil {
		name := tierOf(*o.calibrated, o.input)
		for _, t := range o.calibrated.Tiers {
			if t.Name == name && t.MaxQueueWait > 0 {
				return time.Duration(t.MaxQueueWait)
			}
		}
	}
	return time.Duration(o.slo.TTFT) / 2
}

// requests words a count of requests.
func requests(n int) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d request", n)
	}
	return fmt.Sprintf("%d requests", n)
}

// find returns the cell of the named configuration.
func find(row []cell, name string) (cell, bool) {
	for _, c := range row {
		if c.Name == name {
			return c, true
		}
	}
	return cell{}, false
}

// signedPct words x against of as a signed percentage difference.
func signedPct(x, of float64) string {
	if of == 0 {
		if x == 0 {
			return "±0%"
		}
		return "ahead of 0"
	}
	return fmt.Sprintf("%+.1f%%", 100*(x/of-1))
}

// printCompare prints the compare phase: for each arrival process, goodput by load and
// configuration, the details of every cell, and the targets' verdicts.
func printCompare(w io.Writer, o options, groups []compareGroup, noise []string, took time.Duration) {
	c := o.compare
	how := "the load levels at the same time"
	if o.serial {
		how = "the load levels one after another"
	}
	fmt.Fprintf(w, "## Compare (took %s)\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "λ\\* = %.3f req/s (%d/%d requests); %s warm-up, %s measured, %s grace; %s, every configuration of a level side by side under the same arrivals.\n\n",
		o.rate, o.input, o.output, c.Warmup, c.Window, grace(o.slo, o.output), how)
	if len(groups) > 0 && len(groups[0].Exps) > 0 {
		for _, st := range groups[0].Exps[0].Stacks {
			fmt.Fprintf(w, "- %s: %s\n", st.setup.Name, describe(st.setup))
		}
		fmt.Fprintln(w)
	}
	// The ideal queue's server runs at the best goodput measured in any group (the
	// engine's good capacity, as near as the run measured it), and a request may wait as
	// long as the calibrated tier lets it queue: what the TTFT SLO leaves after the
	// engine's own TTFT at the knee.
	var mu float64
	for _, g := range groups {
		mu = max(mu, best(g.cells(c.Levels)))
	}
	wait := calibratedWait(o)
	for gi, g := range groups {
		cs := g.cells(c.Levels)
		top := best(cs)
		fmt.Fprintf(w, "### %s arrivals (inter-arrival CV %g)\n\n", g.Arrivals.Name, g.Arrivals.CV)
		if gi < len(noise) {
			fmt.Fprintf(w, "Machine: %s.\n\n", noise[gi])
		}
		head := []string{"load", "offered req/s"}
		for _, cl := range cs[0] {
			head = append(head, cl.Name)
		}
		head = append(head, "ideal queue")
		ideal := make([]float64, len(cs))
		var rows, detail [][]string
		for i, row := range cs {
			ideal[i] = idealGoodput(g.Exps[i], mu, wait)
			r := []string{fmt.Sprintf("%g×", row[0].Level), fmt.Sprintf("%.3f", float64(row[0].Sum.Offered)/row[0].Sum.Window.Seconds())}
			for _, cl := range row {
				r = append(r, fmt.Sprintf("%.3f (%s)", cl.Sum.Goodput, pctOf(cl.Sum.Goodput, top)))
				s := cl.Sum
				detail = append(detail, []string{fmt.Sprintf("%g×", cl.Level), cl.Name, fmt.Sprintf("%.3f", s.Goodput),
					fmt.Sprintf("%.1f%%", 100*cl.admittedGood()), ge(s.TTFTCensored) + fmtDur(s.P95TTFT), fmtDur(s.P95TPOT),
					pct(s.RejectRate), reasons(s.Reasons), fmt.Sprintf("%d / %d", s.Completed, s.Offered), fmt.Sprint(s.Unfinished + s.Failed)})
			}
			rows = append(rows, append(r, fmt.Sprintf("%.3f (%s)", ideal[i], pctOf(ideal[i], top))))
		}
		fmt.Fprintf(w, "Goodput, req/s (%% of the best, %.3f, measured in this group); *ideal queue*: one server serving good requests back to back at %.3f req/s (the best goodput measured in the run), turning away every request that would wait over %s, on the same arrivals:\n\n", top, mu, wait)
		table(w, head, rows)
		table(w, []string{"load", "configuration", "goodput req/s", "admitted good", "p95 TTFT admitted", "p95 TPOT",
			"reject rate", "rejections by reason", "completed / offered", "unfinished or failed"}, detail)
		fmt.Fprintln(w, "Targets (calibrated):")
		fmt.Fprintln(w)
		for _, v := range compareVerdicts(cs, ideal) {
			fmt.Fprintf(w, "- %s: %s, %s\n", v.Target, word(v.Met), v.Detail)
		}
		fmt.Fprintln(w)
	}
}

// describe says what a configuration is, for the report.
func describe(su setup) string {
	var parts []string
	switch {
	case su.Caps.Queued > 0:
		parts = append(parts, fmt.Sprintf("engine --max-queued-requests %d", su.Caps.Queued))
	case su.Caps != (engineCaps{}):
		parts = append(parts, fmt.Sprintf("engine --max-num-queued-reqs %d --max-num-queued-tokens %d", su.Caps.Reqs, su.Caps.Tokens))
	}
	if a := su.Admission; a != nil {
		for _, t := range a.Tiers {
			d := fmt.Sprintf("tier %s: in flight %d–%d, queue %d", t.Name, max(t.MinInFlight, 1), t.MaxInFlight, t.MaxQueue)
			if t.Rate > 0 {
				d += fmt.Sprintf(", rate %g–%g req/s, burst %d", t.Rate, max(t.MaxRate, t.Rate), t.Burst)
			}
			if t.MaxPrefillTokens > 0 {
				d += fmt.Sprintf(", prompts in prefill ≤ %d tokens", t.MaxPrefillTokens)
			}
			parts = append(parts, d)
		}
		if a.SharedRate {
			parts = append(parts, "the rates one engine budget (shared_rate)")
		}
		switch {
		case !su.Engine:
			parts = append(parts, "no engine signals")
		case su.SatQueue > 0 || su.SatKV > 0:
			parts = append(parts, fmt.Sprintf("saturated at engine queue ≥ %g or KV ≥ %g, scraped every %s", su.SatQueue, su.SatKV, su.Scrape))
		default:
			parts = append(parts, "engine saturation at the sidecar's defaults")
		}
	}
	if len(parts) == 0 {
		return "nothing between the client and the engine but the proxy"
	}
	return strings.Join(parts, "; ")
}
