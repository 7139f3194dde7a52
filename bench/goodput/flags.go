package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// options are the program's settings, from its flags.
type options struct {
	mode, profile         string
	seed                  uint64
	input, output         int
	slo                   measure.SLO
	scan                  []float64
	refine, points        int
	calWarmup, calWindow  time.Duration
	rate                  float64
	staticCap             int
	staticWait            time.Duration
	levels                []float64
	warmup, window        time.Duration
	serial                bool
	short, long           class
	mixWarmup, mixWindow  time.Duration
	fb                    admission.Feedback
	out                   string
	variants, mixVariants []variant
	quiet                 float64
	quietMax              time.Duration
	tiersFile             string
	calibrated            *admission.Config // the tiers file of -tiers
	fair                  fairOpts
	compare               compareOpts
	shapes                shapesOpts
}

// rawFlags are the flags that need parsing after flag.Parse.
type rawFlags struct {
	scan, levels, short, long string
	variants, mixVariants     string
	fbInterval, fbWindow      time.Duration
	fairCalm, fairFlood       string
	compareLevels, arrivals   string
	burstCV                   float64
}

// parseFlags parses args into options.
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	var r rawFlags
	o.define(fs, &r)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.finish(r)
}

// define registers the flags of the workload and the phases.
func (o *options) define(fs *flag.FlagSet, r *rawFlags) {
	fs.StringVar(&o.mode, "mode", "all", "phases to run, comma-separated: calibrate, goodput, mixed, fairness, compare, shapes; all = the first three")
	fs.StringVar(&o.profile, "profile", "h20x8-flash", "simulator profile")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the arrivals and prompts (the same for every stack)")
	fs.IntVar(&o.input, "input", 8192, "prompt length of the goodput workload, in token ids")
	fs.IntVar(&o.output, "output", 128, "output length of the goodput workload (max_tokens, ignore_eos)")
	fs.TextVar(&o.slo.TTFT, "slo-ttft", measure.Duration(5*time.Second), "TTFT SLO")
	fs.TextVar(&o.slo.TPOT, "slo-tpot", measure.Duration(100*time.Millisecond), "TPOT SLO")
	fs.StringVar(&r.scan, "scan", "0.6,0.8,1.0,1.2,1.4,1.6", "calibration: the coarse scan's rates (req/s)")
	fs.IntVar(&o.refine, "refine", 1, "calibration: rounds of refinement after the scan")
	fs.IntVar(&o.points, "points", 3, "calibration: rates tried in each refinement round")
	fs.DurationVar(&o.calWarmup, "cal-warmup", 30*time.Second, "calibration: unmeasured arrivals before each window")
	fs.DurationVar(&o.calWindow, "cal-window", 90*time.Second, "calibration: measured arrivals at each rate")
	fs.Float64Var(&o.rate, "rate", 0, "sustainable rate (req/s) for the goodput phase without calibrating")
	fs.IntVar(&o.staticCap, "static-cap", 0, "the static in-flight cap for the goodput phase without calibrating")
	fs.DurationVar(&o.staticWait, "static-wait", 0, "the 8K queue wait for the goodput or mixed phase without calibrating")
	fs.StringVar(&r.levels, "levels", "0.5,0.8,1,1.5,2", "goodput: load levels, as multiples of the sustainable rate")
	fs.DurationVar(&o.warmup, "warmup", 60*time.Second, "goodput: unmeasured arrivals before the window")
	fs.DurationVar(&o.window, "window", 120*time.Second, "goodput: measured arrivals")
	fs.BoolVar(&o.serial, "serial", false, "goodput: run the load levels one after another instead of at once")
	fs.StringVar(&r.short, "mixed-short", "1024:64:1.5", "mixed: short requests, input:output:rate")
	fs.StringVar(&r.long, "mixed-long", "30720:16:0.5", "mixed: long requests, input:output:rate")
	fs.DurationVar(&o.mixWarmup, "mixed-warmup", 60*time.Second, "mixed: unmeasured arrivals before the window")
	fs.DurationVar(&o.mixWindow, "mixed-window", 120*time.Second, "mixed: measured arrivals")
	fs.StringVar(&o.tiersFile, "tiers", "", "goodput: a tiers file written by slogate calibrate; adds a \"calibrated\" configuration with its limits and, without -rate, takes the sustainable rate, static cap and wait from the knee of the tier of -input")
	fs.StringVar(&o.out, "out", "", "directory for raw results (JSON lines); empty: none")
	fs.Float64Var(&o.quiet, "quiet", 0.15, "before each phase, wait until other processes use less than this share of the machine's CPU")
	fs.DurationVar(&o.quietMax, "quiet-max", 10*time.Minute, "the longest wait for a quiet machine")
	o.defineSlogate(fs, r)
	o.defineFairness(fs, r)
	o.defineCompare(fs, r)
}

// defineCompare registers the flags of the compare phase.
func (o *options) defineCompare(fs *flag.FlagSet, r *rawFlags) {
	c := &o.compare
	fs.StringVar(&r.compareLevels, "compare-levels", "0.5,0.8,1,1.5,2,3,5", "compare: load levels, as multiples of the knee")
	fs.StringVar(&r.arrivals, "compare-arrivals", "poisson,bursty", "compare: arrival processes, one after another: poisson, bursty (gamma inter-arrival times, -burst-cv)")
	fs.Float64Var(&r.burstCV, "burst-cv", 3, "compare: coefficient of variation of the bursty arrivals' inter-arrival times")
	fs.DurationVar(&c.Warmup, "compare-warmup", 60*time.Second, "compare: unmeasured arrivals before the window")
	fs.DurationVar(&c.Window, "compare-window", 120*time.Second, "compare: measured arrivals")
	fs.Float64Var(&c.ShedQueue, "shed-queue", 5, "compare: the shedder turns requests away while the engine has this many waiting")
	fs.Float64Var(&c.ShedKV, "shed-kv", 0.8, "compare: the shedder turns requests away at this KV-cache usage")
	fs.DurationVar(&c.ShedScrape, "shed-scrape", 50*time.Millisecond, "compare: how often the shedder reads the engine's metrics")
	fs.BoolVar(&c.Virtual, "compare-virtual", false, "compare: play the phase in virtual time (the engine model and admission's code, without the proxy) instead of in real time")
	fs.StringVar(&o.shapes.Profile, "shapes-profile", "h200-9b", "shapes: simulator profile, whose context must hold the longest shape (131,072 + 2,048 tokens)")
	fs.DurationVar(&o.shapes.Warmup, "shapes-warmup", 10*time.Minute, "shapes: unmeasured arrivals before the window, in virtual time")
	fs.DurationVar(&o.shapes.Window, "shapes-window", time.Hour, "shapes: measured arrivals, in virtual time")
	fs.IntVar(&o.shapes.LongPrefill, "shapes-long-prefill", 0, "shapes: the engine's --long-prefill-token-threshold, vLLM's cap on one request's prefill tokens per step; 0: off")
	fs.Uint64Var(&o.shapes.ArrivalSeed, "shapes-arrival-seed", 0, "shapes: seed of the measured arrivals and prompts only (the calibration and the knee keep -seed); 0: -seed")
}

// defineFairness registers the flags of the fairness phase.
func (o *options) defineFairness(fs *flag.FlagSet, r *rawFlags) {
	fs.IntVar(&o.fair.Tenants, "fair-tenants", 4, "fairness: tenants of equal weight, the flooder included")
	fs.StringVar(&r.fairCalm, "fair-calm", "4096:128:1", "fairness: a calm tenant's requests, input:output:relative rate")
	fs.StringVar(&r.fairFlood, "fair-flood", "8192:128:10", "fairness: the flooder's requests, input:output:relative rate")
	fs.Float64Var(&o.fair.Load, "fair-load", 1.5, "fairness: the load offered in total, as a multiple of the knee (-rate, for -input/-output requests)")
	fs.IntVar(&o.fair.Reps, "fair-reps", 3, "fairness: repetitions, each with arrivals of its own")
	fs.Float64Var(&o.fair.Budget, "fair-budget", 0.25, "fairness: a configuration with this share of the knee's prompt tokens a minute as every tenant's input-token budget; 0: none")
	fs.DurationVar(&o.fair.Warmup, "fair-warmup", 60*time.Second, "fairness: unmeasured arrivals before the window")
	fs.DurationVar(&o.fair.Window, "fair-window", 300*time.Second, "fairness: measured arrivals")
}

// defineSlogate registers the flags of slogate's feedback and its variants.
func (o *options) defineSlogate(fs *flag.FlagSet, r *rawFlags) {
	fs.DurationVar(&r.fbInterval, "fb-interval", 0, "slogate feedback interval (0: admission's default)")
	fs.DurationVar(&r.fbWindow, "fb-window", 0, "slogate feedback window (0: default)")
	fs.IntVar(&o.fb.MinSamples, "fb-min-samples", 0, "slogate feedback min samples (0: default)")
	fs.Float64Var(&o.fb.Backoff, "fb-backoff", 0, "slogate feedback backoff (0: default)")
	fs.Float64Var(&o.fb.Increase, "fb-increase", 0, "slogate feedback increase (0: default)")
	fs.StringVar(&r.variants, "variants", "", "goodput: extra slogate configurations beside the three, label:key=value,...;... (keys interval, window, min-samples, backoff, increase, tier-ttft, tier-tpot, long-in-flight, long-queue, long-wait)")
	fs.StringVar(&r.mixVariants, "mixed-variants", "", "mixed: extra slogate configurations beside the two, as -variants")
}

// finish parses what the flags left as text and checks the mode.
func (o *options) finish(r rawFlags) error {
	o.fb.Interval, o.fb.Window = measure.Duration(r.fbInterval), measure.Duration(r.fbWindow)
	if err := slogateConfig(measure.SLO{}, o.fb).Validate(); err != nil {
		return fmt.Errorf("-fb-*: %w", err)
	}
	for _, m := range strings.Split(o.mode, ",") {
		if m = strings.TrimSpace(m); m != "all" && m != "calibrate" && m != "goodput" && m != "mixed" && m != "fairness" && m != "compare" && m != "shapes" {
			return fmt.Errorf("-mode %q: want calibrate, goodput, mixed, fairness, compare, shapes or all", o.mode)
		}
	}
	if err := o.fair.finish(r); err != nil {
		return err
	}
	if err := o.compare.finish(r); err != nil {
		return err
	}
	if o.shapes.Warmup < 0 || o.shapes.Window <= 0 {
		return fmt.Errorf("-shapes-warmup %v, -shapes-window %v: want a warm-up >= 0 and a window > 0", o.shapes.Warmup, o.shapes.Window)
	}
	if o.shapes.LongPrefill < 0 {
		return fmt.Errorf("-shapes-long-prefill %d: want 0 (off) or more tokens", o.shapes.LongPrefill)
	}
	var err error
	if o.scan, err = floats(r.scan); err != nil {
		return err
	}
	if o.levels, err = floats(r.levels); err != nil {
		return err
	}
	if o.short, err = parseClass("short", r.short); err != nil {
		return err
	}
	if o.long, err = parseClass("long", r.long); err != nil {
		return err
	}
	if o.variants, err = parseVariants(r.variants, o.fb); err != nil {
		return err
	}
	o.mixVariants, err = parseVariants(r.mixVariants, o.fb)
	return err
}

// finish parses and checks the fairness phase's flags.
func (f *fairOpts) finish(r rawFlags) error {
	var err error
	if f.Calm, err = parseClass("-fair-calm", r.fairCalm); err != nil {
		return err
	}
	if f.Flood, err = parseClass("-fair-flood", r.fairFlood); err != nil {
		return err
	}
	switch ratio := f.Flood.Rate / f.Calm.Rate; {
	case !(ratio >= 1e-6 && ratio <= 1e6):
		return fmt.Errorf("-fair-flood %s, -fair-calm %s: the flooder's rate is %g times a calm one's; want 1e-6 to 1e6", r.fairFlood, r.fairCalm, ratio)
	case f.Tenants < 2 || f.Tenants > maxFairTenants:
		return fmt.Errorf("-fair-tenants %d: want 2 to %d", f.Tenants, maxFairTenants)
	case !(f.Load > 0 && f.Load <= maxFairLoad):
		return fmt.Errorf("-fair-load %v: want a multiple of the knee above 0, at most %d", f.Load, maxFairLoad)
	case f.Reps < 1:
		return fmt.Errorf("-fair-reps %d: want at least 1", f.Reps)
	case !(f.Budget >= 0) || f.Budget > 1:
		return fmt.Errorf("-fair-budget %v: want a share in [0, 1]", f.Budget)
	case f.Warmup < 0 || f.Window <= 0:
		return fmt.Errorf("-fair-warmup %v, -fair-window %v: want a warm-up >= 0 and a window > 0", f.Warmup, f.Window)
	}
	return nil
}

// finish parses and checks the compare phase's flags.
func (c *compareOpts) finish(r rawFlags) error {
	var err error
	if c.Levels, err = floats(r.compareLevels); err != nil {
		return fmt.Errorf("-compare-levels: %w", err)
	}
	if c.Arrivals, err = parseArrivals(r.arrivals, r.burstCV); err != nil {
		return err
	}
	switch {
	case c.Warmup < 0 || c.Window <= 0:
		return fmt.Errorf("-compare-warmup %v, -compare-window %v: want a warm-up >= 0 and a window > 0", c.Warmup, c.Window)
	case !(c.ShedQueue > 0) || math.IsInf(c.ShedQueue, 1):
		return fmt.Errorf("-shed-queue %v: want a queue depth above 0", c.ShedQueue)
	case !(c.ShedKV > 0 && c.ShedKV <= 1):
		return fmt.Errorf("-shed-kv %v: want a KV-cache usage in (0, 1]", c.ShedKV)
	case c.ShedScrape <= 0:
		return fmt.Errorf("-shed-scrape %v: want an interval above 0", c.ShedScrape)
	}
	return nil
}

// maxFairTenants bounds -fair-tenants (admission takes at most 64 named tenants), and
// maxFairLoad -fair-load.
const (
	maxFairTenants = 64
	maxFairLoad    = 100
)

// runs reports whether -mode asks for the phase: "all" asks for every phase but
// fairness, compare and shapes.
func (o options) runs(phase string) bool {
	for _, m := range strings.Split(o.mode, ",") {
		if m = strings.TrimSpace(m); m == "all" && phase != "fairness" && phase != "compare" && phase != "shapes" || m == phase {
			return true
		}
	}
	return false
}

// splitList splits a comma-separated list, trimming its items and dropping empty ones.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 1) { // NaN and +Inf parse, but are no rate
			return nil, fmt.Errorf("%q: want positive numbers separated by commas", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseClass parses input:output:rate.
func parseClass(name, s string) (class, error) {
	parts := strings.Split(s, ":")
	if len(parts) == 3 {
		in, err1 := strconv.Atoi(parts[0])
		out, err2 := strconv.Atoi(parts[1])
		rate, err3 := strconv.ParseFloat(parts[2], 64)
		if err1 == nil && err2 == nil && err3 == nil && in > 0 && out > 0 && rate > 0 && !math.IsInf(rate, 1) {
			return class{Name: name, Input: in, Output: out, Rate: rate}, nil
		}
	}
	return class{}, fmt.Errorf("%s class %q: want input:output:rate, e.g. 1024:64:1.5", name, s)
}
