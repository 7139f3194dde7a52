// Command goodput measures what admission control does to goodput under overload, with
// the engine simulator's h20x8-flash profile (an SGLang-served 309B MoE on eight H20-3e,
// fitted to a published arrival-rate scan; docs/simulator.md) behind slogate's proxy,
// all in this process.
//
// Goodput is the rate of requests that met both SLOs (TTFT and TPOT), counted over every
// request offered: rejected requests count as offered and not good. Every figure is
// measured at the client: TTFT from sending to the first chunk carrying output (so it
// includes slogate's queue), TPOT = (E2E - TTFT) / (tokens - 1).
//
// Five phases (-mode all runs the first three in turn; -mode takes any of them,
// comma-separated):
//
//   - calibrate: find the sustainable rate, the highest offered rate at which the engine
//     without admission keeps p95 TTFT and p95 TPOT within the SLOs with every request
//     completing: a coarse scan of rates, then rounds of refinement inside the bracket
//     of the last passing and first failing rate. The rates of a round run at once, each
//     against its own engine. From the window at the sustainable rate come the static
//     cap (Little's law: rate x mean E2E) and the queue wait (TTFT SLO - p95 TTFT).
//   - goodput: open-loop Poisson arrivals of 8K-input/128-output requests at multiples of
//     the sustainable rate, each replayed at the same time against three stacks of their
//     own: no admission; a static in-flight cap; slogate's tiers with SLO feedback and
//     engine saturation. By default every load level runs at the same time too.
//   - mixed: short (1K/64) and long (30K/16) prompts together, no admission against
//     slogate's tiers, reported per length class.
//   - compare: slogate against every other way of protecting an engine (compare.go): no
//     admission, the engine's own caps, a gateway's static saturation shedder, a static
//     cap, slogate's built-in tiers and its calibrated tiers (-tiers, required), side by
//     side from 0.5× to 5× the knee, with Poisson and with bursty arrivals; goodput by
//     load and configuration and the targets' verdicts. bench/compare.sh runs it.
//   - fairness: a noisy neighbour. Four tenants of equal weight, three calm ones sending
//     4K/128 requests and one flooding with 10× their rate of 8K/128, offer 1.5× the
//     knee in total (the knee of -rate, scaled to each shape by the simulator's model),
//     side by side against no admission, slogate's tiers alone, and the same tiers with a
//     tenants section (fair share; and with a token budget on every tenant), repeated
//     with arrivals of their own; reported per tenant: goodput, SLO attainment, shares
//     of the tokens served, served ÷ offered, and Jain's index. bench/fairness.sh runs it.
//
// -variants (and -mixed-variants) add slogate configurations with other feedback
// settings, tier SLOs or 32K-tier limits beside the others, under the same arrivals.
//
// Results are printed as Markdown tables; -out writes every request and a once-a-second
// timeline of every stack as JSON lines. bench/goodput.sh builds and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/slogate/slogate/enginesim"
)

func main() {
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "goodput:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "goodput:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	p, err := enginesim.LookupProfile(o.profile)
	if err != nil {
		return err
	}
	w := os.Stdout
	fmt.Fprintf(w, "# %d CPUs, GOMAXPROCS %d, %s, %s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.Version(), time.Now().UTC().Format(time.DateOnly))
	fmt.Fprintf(w, "# profile %s (vllm flavour), seed %d, SLO TTFT %s TPOT %s\n\n", p.Name, o.seed, o.slo.TTFT, o.slo.TPOT)
	quiet := func() { waitQuiet(ctx, o.quiet, o.quietMax, os.Stderr) }
	if o.runs("calibrate") {
		start := time.Now()
		cal, err := findRate(ctx, calibrateOpts{
			Profile: p, Input: o.input, Output: o.output, SLO: o.slo, Scan: o.scan, Refine: o.refine, Points: o.points,
			Warmup: o.calWarmup, Window: o.calWindow, Seed: o.seed, Quiet: quiet,
		}, os.Stderr)
		if err != nil {
			return err
		}
		o.rate = cal.Rate
		o.staticCap, o.staticWait = staticCap(cal.Rate, cal.At.MeanE2E, cal.At.P95TTFT, time.Duration(o.slo.TTFT))
		printCalibration(w, o, cal, time.Since(start))
	}
	if o.tiersFile != "" {
		if err := o.loadCalibrated(w); err != nil {
			return err
		}
	}
	if o.runs("goodput") {
		if o.rate <= 0 || o.staticCap <= 0 || o.staticWait <= 0 {
			return fmt.Errorf("the goodput phase needs -rate, -static-cap and -static-wait (or the calibrate phase)")
		}
		quiet()
		start := time.Now()
		var exps []*experiment
		noise := phaseNoise(ctx, func() { exps, err = goodput(ctx, o, p) })
		if err != nil {
			return err
		}
		printGoodput(w, o, exps, time.Since(start), noise)
		if err := raw(o.out, exps); err != nil {
			return err
		}
	}
	if o.runs("fairness") {
		if err := runFairness(ctx, o, p, w, quiet); err != nil {
			return err
		}
	}
	if o.runs("compare") {
		start := time.Now()
		groups, noise, err := compare(ctx, o, p, quiet)
		if err != nil {
			return err
		}
		printCompare(w, o, groups, noise, time.Since(start))
		for _, g := range groups {
			if err := raw(o.out, g.Exps); err != nil {
				return err
			}
		}
	}
	if o.runs("shapes") {
		start := time.Now()
		sr, err := shapes(ctx, o)
		if err != nil {
			return err
		}
		printShapes(w, o, sr, time.Since(start))
		for _, g := range sr.Groups {
			if err := raw(o.out, g.Exps); err != nil {
				return err
			}
		}
	}
	if o.runs("mixed") {
		if o.staticWait <= 0 {
			return fmt.Errorf("the mixed phase needs -static-wait (the 8K tier's queue wait) or the calibrate phase")
		}
		quiet()
		start := time.Now()
		var e *experiment
		noise := phaseNoise(ctx, func() { e, err = mixed(ctx, o, p) })
		if err != nil {
			return err
		}
		printMixed(w, o, e, time.Since(start), noise)
		if err := raw(o.out, []*experiment{e}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// runFairness runs the fairness phase and prints its tables.
func runFairness(ctx context.Context, o options, p enginesim.Profile, w io.Writer, quiet func()) error {
	if o.rate <= 0 {
		return fmt.Errorf("the fairness phase needs the knee: -rate (or -tiers, or the calibrate phase)")
	}
	wl, err := deriveWorkload(o, p)
	if err != nil {
		return err
	}
	quiet()
	start := time.Now()
	var exps []*experiment
	noise := phaseNoise(ctx, func() { exps, err = fairness(ctx, o, p, wl) })
	if err != nil {
		return err
	}
	printFairness(w, o, wl, exps, time.Since(start), noise)
	return raw(o.out, exps)
}

func raw(dir string, exps []*experiment) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, e := range exps {
		if err := writeRaw(dir, e); err != nil {
			return err
		}
	}
	return nil
}

// setups returns the three configurations of the goodput phase, and the variants.
func setups(o options, variants []variant) []setup {
	static := staticConfig(o.staticCap, o.staticWait, o.slo)
	slog := slogateConfig(o.slo, o.fb)
	out := []setup{
		{Name: "no admission", SLO: o.slo},
		{Name: "static cap", SLO: o.slo, Admission: &static},
		{Name: "slogate", SLO: o.slo, Admission: &slog, Engine: true},
	}
	for _, v := range variants {
		out = append(out, v.setup(o))
	}
	return out
}

// goodputSetups are the configurations of the goodput phase: setups, and the calibrated
// tiers of -tiers.
func goodputSetups(o options) []setup {
	out := setups(o, o.variants)
	if o.calibrated != nil {
		out = append(out, setup{Name: "calibrated", SLO: o.slo, Admission: o.calibrated, Engine: true})
	}
	return out
}

// goodput runs every load level against the three configurations.
func goodput(ctx context.Context, o options, p enginesim.Profile) ([]*experiment, error) {
	exps := make([]*experiment, len(o.levels))
	defer closeAll(exps)
	for i, m := range o.levels {
		e := &experiment{
			Name: fmt.Sprintf("goodput %gx", m), Seed: o.seed, SLO: o.slo, Warmup: o.warmup, Window: o.window,
			Grace:   grace(o.slo, o.output),
			Classes: []class{{Name: "8k", Input: o.input, Output: o.output, Rate: m * o.rate}},
		}
		exps[i] = e
		if err := e.addStacks(goodputSetups(o), p); err != nil {
			return nil, err
		}
	}
	runEach(ctx, exps, o.serial)
	return exps, ctx.Err()
}

// mixed runs short and long prompts together against no admission and slogate's tiers.
func mixed(ctx context.Context, o options, p enginesim.Profile) (*experiment, error) {
	e := &experiment{
		Name: "mixed", Seed: o.seed, SLO: o.slo, Warmup: o.mixWarmup, Window: o.mixWindow,
		Grace:   grace(o.slo, max(o.short.Output, o.long.Output)),
		Classes: []class{o.short, o.long},
	}
	defer closeAll([]*experiment{e})
	sus := slices.DeleteFunc(setups(o, o.mixVariants), func(su setup) bool { return su.Name == "static cap" })
	if err := e.addStacks(sus, p); err != nil {
		return nil, err
	}
	e.run(ctx)
	return e, ctx.Err()
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
