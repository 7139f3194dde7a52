package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// The shapes phase: the compare phase's six configurations on a mix of the seven
// workload shapes of the 8×H200 write-up (synth's "shapes" preset, API-S 2,048/256 …
// BATCH-D 4,096/8,192), an equal share of requests each, on a profile whose context holds
// them all (h200-9b by default), in virtual time (virtual.go): its longest requests run
// for minutes, which the real-time phases cannot afford at seven load levels.
//
// Everything the compare phase takes from a calibration comes from one here too, made by
// slogate calibrate's own rules (calibrate.Measure) on the engine model's rounds in
// virtual time rather than over HTTP: the calibrated tiers, the engine's caps
// (calibrate.Result.EngineCaps) and, from the mix's own knee, the static cap.

// shapesOpts are the shapes phase's settings; the levels, arrivals and the shedder's
// thresholds are the compare phase's.
type shapesOpts struct {
	Profile        string
	Warmup, Window time.Duration // virtual
	// LongPrefill is the engine's --long-prefill-token-threshold (vLLM's); 0: off.
	LongPrefill int
	// ArrivalSeed seeds the measured arrivals and prompts only, so that runs on other
	// arrivals compare the same configurations: the calibration and the knee keep the
	// program's -seed. 0: -seed for both.
	ArrivalSeed uint64
}

// arrivalSeed returns the seed of the measured arrivals: ArrivalSeed, or seed without one.
func (o shapesOpts) arrivalSeed(seed uint64) uint64 {
	if o.ArrivalSeed != 0 {
		return o.ArrivalSeed
	}
	return seed
}

// mixTiers are slogate's built-in tiers (admission.DefaultConfig) with the SLOs a user
// of the mix would give them: 2.5 to 4.5 times the TTFT an idle engine of the h200-9b
// profile needs for the tier's longest prompt (API-S 0.36 s, BATCH-D 0.44 s, CHAT-L 1.57
// s, DOC-L 6.0 s), and 100 ms per output token everywhere (idle: 6 to 9 ms).
func mixTiers() admission.Config {
	cfg := admission.DefaultConfig()
	ttft := map[string]time.Duration{"short": time.Second, "medium": 2 * time.Second, "long": 4 * time.Second, "xlong": 15 * time.Second}
	for i := range cfg.Tiers {
		t := &cfg.Tiers[i]
		t.SLO = measure.NewSLO(ttft[t.Name], 100*time.Millisecond)
	}
	return cfg
}

// mixClasses returns the mix's classes at a total rate, each shape an equal share, each
// judged by the SLO of its tier in tiers.
func mixClasses(tiers admission.Config, rate float64) []class {
	shapes := synth.Presets["shapes"].Shapes
	out := make([]class, len(shapes))
	for i, s := range shapes {
		out[i] = class{Name: s.Name, Input: s.Input, Output: s.Output, Rate: rate / float64(len(shapes)), SLO: tierSLO(tiers, s.Input)}
	}
	return out
}

// tierSLO returns the SLO of the tier of cfg that takes prompts of n tokens.
func tierSLO(cfg admission.Config, n int) measure.SLO {
	name := tierOf(cfg, n)
	for _, t := range cfg.Tiers {
		if t.Name == name {
			return t.SLO
		}
	}
	return measure.SLO{}
}

// mixGrace is how long after the window arrivals go on, and the longest any request of
// the mix may still run: the longest grace of its classes (their TTFT SLO and their
// output at the TPOT SLO), after which no request still running could be good.
func mixGrace(classes []class) time.Duration {
	var g time.Duration
	for _, c := range classes {
		g = max(g, grace(c.SLO, c.Output))
	}
	return g
}

// calibrateMix calibrates the mix's tiers on the engine model by slogate calibrate's
// rules: each tier's shape is the mean of the mix's shapes it takes (the prompts and the
// outputs averaged), measured with the full plan's rounds in virtual time.
func calibrateMix(ctx context.Context, p enginesim.Profile, tiers admission.Config, seed uint64) (calibrate.Result, error) {
	var plan calibrate.Plan
	for _, t := range tiers.Tiers {
		var in, out, n int
		for _, c := range mixClasses(tiers, 1) {
			if tierOf(tiers, c.Input) == t.Name {
				in, out, n = in+c.Input, out+c.Output, n+1
			}
		}
		if n == 0 {
			continue
		}
		plan.Tiers = append(plan.Tiers, calibrate.TierPlan{Tier: t, Shape: synth.Shape{Name: t.Name, Input: in / n, Output: out / n}})
	}
	// The full plan's rules with rounds long enough for the mix's requests, which run for
	// minutes (BATCH-D's 8,192 tokens): a 30-minute reference and 10-minute rounds of at
	// least 200 requests, drained for up to twice their window. Virtual time makes them
	// cheap.
	plan.RefDuration, plan.Round, plan.Drain = 30*time.Minute, 10*time.Minute, 20*time.Minute
	plan.MinRequests, plan.MaxRound, plan.Seed = 200, time.Hour, seed
	plan.PrefillRound = 2 * time.Minute // DOC-L's prompt alone takes 6 s
	res, err := calibrate.Measure(ctx, modelRounds{p}, plan, nil)
	res.Target, res.Model, res.Engine = "enginesim profile "+p.Name+" (virtual time)", p.Model, "sglang"
	return res, err
}

// mixKnee returns the mix's knee: the total rate of Poisson arrivals at which the
// engine alone delivers the most goodput, each request judged by its tier's SLO, over
// kneeWindow; and the run there. It scans rates 10% apart, from one that brings a
// request a minute, until the engine's goodput falls under half its best: past the knee,
// the queue the engine alone builds costs more good requests than the extra load brings.
// For one shape this is λ*, the highest rate it sustains inside its SLO; for a mix whose
// tiers collide in the engine (a short request waiting behind a long prompt's prefill),
// a strict rule of p95 per tier would put it far below what the engine can serve.
func mixKnee(p enginesim.Profile, tiers admission.Config, o shapesOpts, seed uint64) (float64, *experiment, error) {
	none := setup{Name: nameNone}
	var knee, top float64
	var at *experiment
	for r := 1.0 / 60; r < 1000; r *= 1.1 {
		cl := mixClasses(tiers, r)
		e := &experiment{Name: fmt.Sprintf("mix knee %.4f", r), Seed: seed, Warmup: o.Warmup, Window: kneeWindow, Grace: mixGrace(cl), Classes: cl}
		if err := e.playVirtual(p, []setup{none}); err != nil {
			return 0, nil, err
		}
		g := e.total(0).Goodput
		if g > top {
			knee, top, at = r, g, e
		}
		if g < top/2 {
			return knee, at, nil
		}
	}
	return 0, nil, fmt.Errorf("the engine alone still delivered %.4g good req/s at 1000 req/s: no knee", top)
}

// kneeWindow is what the runs of the knee's scan measure: a few thousand requests.
const kneeWindow = 6 * time.Hour

// shapesRun is the shapes phase's result.
type shapesRun struct {
	Profile enginesim.Profile
	Knee    float64
	Cal     calibrate.Result
	Setups  []setup
	Groups  []compareGroup
}

// shapes runs the shapes phase: the calibration and the mix's knee, then every arrival
// process at every load level against the six configurations.
func shapes(ctx context.Context, o options) (shapesRun, error) {
	p, err := enginesim.LookupProfile(o.shapes.Profile)
	if err != nil {
		return shapesRun{}, err
	}
	p.LongPrefillTokenThreshold = o.shapes.LongPrefill
	run := shapesRun{Profile: p}
	tiers := mixTiers()
	if run.Cal, err = calibrateMix(ctx, p, tiers, o.seed); err != nil {
		return run, err
	}
	cal, err := run.Cal.Config(tiers)
	if err != nil {
		return run, err
	}
	caps := run.Cal.EngineCaps()
	knee, at, err := mixKnee(p, tiers, o.shapes, o.seed)
	if err != nil {
		return run, err
	}
	run.Knee = knee
	// The static cap: Little's law at the mix's knee, and the wait the strictest tier's
	// TTFT SLO leaves after its p95 at the knee.
	var e2e time.Duration
	var done int
	strict := measure.SLO{TTFT: measure.Duration(time.Hour)}
	var strictP95 time.Duration
	for i, c := range at.Classes {
		s := at.summary(0, i)
		e2e += s.MeanE2E * time.Duration(s.Completed)
		done += s.Completed
		if c.SLO.TTFT < strict.TTFT {
			strict, strictP95 = c.SLO, s.P95TTFT
		}
	}
	limit, wait := staticCap(knee, e2e/time.Duration(max(done, 1)), strictP95, time.Duration(strict.TTFT))
	static := staticConfig(limit, wait, strict)
	slog := slogateConfig(measure.SLO{}, o.fb)
	for i := range slog.Tiers {
		slog.Tiers[i].SLO = tiers.Tiers[i].SLO
	}
	shed := shedderConfig(strict)
	c := o.compare
	// The profile's engine is SGLang's, with its cap; --long-prefill-token-threshold is
	// vLLM's, and with it the engine is vLLM, with vLLM's caps.
	flavor, engCaps := enginesim.FlavorSGLang, engineCaps{Queued: caps.MaxQueuedRequests}
	if p.LongPrefillTokenThreshold > 0 {
		flavor, engCaps = enginesim.FlavorVLLM, engineCaps{Reqs: caps.MaxNumQueuedReqs, Tokens: caps.MaxNumQueuedTokens}
	}
	run.Setups = []setup{
		{Name: nameNone},
		{Name: nameEngineCaps, Caps: engCaps},
		{Name: nameShedder, Admission: &shed, Engine: true, SatQueue: c.ShedQueue, SatKV: c.ShedKV, Scrape: c.ShedScrape},
		{Name: nameStatic, Admission: &static},
		{Name: nameSlogate, Admission: &slog, Engine: true},
		{Name: nameCalibrated, Admission: &cal, Engine: true},
	}
	for i := range run.Setups {
		run.Setups[i].Flavor = flavor
	}
	for _, a := range c.Arrivals {
		g := compareGroup{Arrivals: a}
		for _, m := range c.Levels {
			cl := mixClasses(tiers, m*knee)
			e := &experiment{
				Name: fmt.Sprintf("shapes %s %gx", a.Name, m), Seed: o.shapes.arrivalSeed(o.seed), Warmup: o.shapes.Warmup, Window: o.shapes.Window,
				Grace: mixGrace(cl), CV: a.CV, Classes: cl,
			}
			if err := e.playVirtual(p, run.Setups); err != nil {
				return run, err
			}
			g.Exps = append(g.Exps, e)
			if ctx.Err() != nil {
				return run, ctx.Err()
			}
		}
		run.Groups = append(run.Groups, g)
	}
	return run, nil
}

// modelRounds runs a calibration's rounds on the engine model in virtual time
// (enginesim.OfferClosed, OfferPoisson): a calibrate.Rounds.
type modelRounds struct{ p enginesim.Profile }

func (m modelRounds) ClosedRound(_ context.Context, s synth.Shape, conc int, dur time.Duration) synth.Round {
	l, err := enginesim.OfferClosed(m.p, s.Input, s.Output, conc, dur)
	if err != nil {
		return synth.Round{Failures: map[string]int{err.Error(): 1}}
	}
	return synth.Round{
		Sent: l.Sent, Succeeded: l.Completed, Completed: l.Completed, Seconds: dur.Seconds(),
		TTFTp50: l.TTFTp50.Seconds(), TTFTp95: l.TTFTp95.Seconds(), TPOTp95: l.TPOTp95.Seconds(), E2Emean: l.MeanE2E.Seconds(),
	}
}

func (m modelRounds) OpenRound(_ context.Context, s synth.Shape, rate float64, dur time.Duration, _ bool, seed uint64, drain time.Duration) synth.Round {
	l, err := enginesim.OfferPoisson(m.p, s.Input, s.Output, rate, dur, drain, seed)
	if err != nil {
		return synth.Round{Failures: map[string]int{err.Error(): 1}}
	}
	return synth.Round{
		Sent: l.Sent, Succeeded: l.Completed, Completed: l.Completed, Seconds: l.Span.Seconds(), Offered: l.Rate,
		TTFTp50: l.TTFTp50.Seconds(), TTFTp95: l.TTFTp95.Seconds(), TPOTp95: l.TPOTp95.Seconds(), E2Emean: l.MeanE2E.Seconds(),
	}
}

// printShapes prints the shapes phase: the mix and its tiers, the calibration, and for
// each arrival process goodput by load and configuration, the details of every cell with
// its good requests by tier, and the targets' verdicts.
func printShapes(w io.Writer, o options, sr shapesRun, took time.Duration) {
	c := o.compare
	tiers := mixTiers()
	fmt.Fprintf(w, "## Shapes (took %s of wall time)\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "Profile %s, in virtual time: %s warm-up, %s measured, arrivals (seed %d) going on through the grace after it; the seven shapes an equal share of the requests each, judged by their tier's SLO:\n\n",
		sr.Profile.Name, o.shapes.Warmup, o.shapes.Window, o.shapes.arrivalSeed(o.seed))
	var rows [][]string
	for _, cl := range mixClasses(tiers, 1) {
		rows = append(rows, []string{cl.Name, fmt.Sprintf("%d / %d", cl.Input, cl.Output), tierOf(tiers, cl.Input), fmt.Sprintf("%s / %s", cl.SLO.TTFT, cl.SLO.TPOT)})
	}
	table(w, []string{"shape", "input / output tokens", "tier", "SLO TTFT / TPOT"}, rows)
	fmt.Fprintf(w, "The mix's knee λ\\* = %.4f req/s: the total rate of Poisson arrivals at which the engine alone delivers the most goodput, over %s (rates 10%% apart).\n\n", sr.Knee, kneeWindow)
	fmt.Fprintln(w, "Calibration by slogate calibrate's rules on the model's rounds (each tier's shape the mean of its shapes):")
	fmt.Fprintln(w)
	rows = nil
	for _, t := range sr.Cal.Tiers {
		lim := "–"
		if t.Limits != nil {
			l := t.Limits
			lim = fmt.Sprintf("rate %g–%g req/s, burst %d, in flight ≤ %d, queue %d for %s", l.Rate, l.MaxRate, l.Burst, l.MaxInFlight, l.MaxQueue, l.MaxQueueWait)
			if l.MaxPrefillTokens > 0 {
				lim += fmt.Sprintf(", prompts in prefill ≤ %d tokens (prefill %.0f tokens/s)", l.MaxPrefillTokens, t.Prefill)
			}
		}
		rule := t.Rule
		if t.Err != "" {
			rule = t.Err
		}
		rows = append(rows, []string{t.Tier, fmt.Sprintf("%d / %d", t.Shape.Input, t.Shape.Output), fmt.Sprintf("%.4f", t.KneeRate), rule, lim})
	}
	table(w, []string{"tier", "shape", "knee req/s", "rule", "limits"}, rows)
	for _, su := range sr.Setups {
		fmt.Fprintf(w, "- %s: %s\n", su.Name, describe(su))
	}
	if n, why := sr.Cal.LongPrefillThreshold(); n > 0 {
		fmt.Fprintf(w, "\nslogate calibrate advises vLLM's --long-prefill-token-threshold %d: %s.\n", n, why)
	}
	f := sr.Cal.EngineCaps()
	if t := sr.Profile.LongPrefillTokenThreshold; t > 0 {
		fmt.Fprintf(w, "\nThe engine is vLLM with --long-prefill-token-threshold %d; its caps come from %s, and %s.\n\n", t, f.Basis[0], f.Basis[1])
	} else {
		fmt.Fprintf(w, "\nThe engine's cap comes from %s.\n\n", f.Basis[2])
	}
	for _, g := range sr.Groups {
		cs := g.cells(c.Levels)
		top := best(cs)
		fmt.Fprintf(w, "### %s arrivals (inter-arrival CV %g)\n\n", g.Arrivals.Name, g.Arrivals.CV)
		head := []string{"load", "offered req/s"}
		for _, cl := range cs[0] {
			head = append(head, cl.Name)
		}
		var rows, detail [][]string
		for i, row := range cs {
			r := []string{fmt.Sprintf("%g×", row[0].Level), fmt.Sprintf("%.4f", float64(row[0].Sum.Offered)/row[0].Sum.Window.Seconds())}
			for k, cl := range row {
				r = append(r, fmt.Sprintf("%.4f (%s)", cl.Sum.Goodput, pctOf(cl.Sum.Goodput, top)))
				s := cl.Sum
				detail = append(detail, []string{fmt.Sprintf("%g×", cl.Level), cl.Name, fmt.Sprintf("%.4f", s.Goodput),
					fmt.Sprintf("%.1f%%", 100*cl.admittedGood()), goodByTier(g.Exps[i], k, tiers),
					pct(s.RejectRate), reasons(s.Reasons), fmt.Sprintf("%d / %d", s.Completed, s.Offered), fmt.Sprint(s.Unfinished + s.Failed)})
			}
			rows = append(rows, r)
		}
		fmt.Fprintf(w, "Goodput, req/s (%% of the best, %.4f, measured in this group):\n\n", top)
		table(w, head, rows)
		table(w, []string{"load", "configuration", "goodput req/s", "admitted good", "good / offered by tier", "reject rate",
			"rejections by reason", "completed / offered", "unfinished or failed"}, detail)
		fmt.Fprintln(w, "Targets (calibrated):")
		fmt.Fprintln(w)
		for _, v := range compareVerdicts(cs, nil) {
			fmt.Fprintf(w, "- %s: %s, %s\n", v.Target, word(v.Met), v.Detail)
		}
		fmt.Fprintln(w)
	}
}

// goodByTier words stack k's good and offered requests of e per tier of tiers.
func goodByTier(e *experiment, k int, tiers admission.Config) string {
	var parts []string
	for _, t := range tiers.Tiers {
		good, offered := 0, 0
		for cls, c := range e.Classes {
			if tierOf(tiers, c.Input) == t.Name {
				s := e.summary(k, cls)
				good, offered = good+s.Good, offered+s.Offered
			}
		}
		if offered > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", t.Name, good, offered))
		}
	}
	return strings.Join(parts, ", ")
}
