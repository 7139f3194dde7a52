package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// The compare phase: slogate against every other way of protecting an engine, side by
// side under the same arrivals, from half the knee to five times it, with Poisson and
// with bursty arrivals.
//
//   - no admission: the engine alone behind slogate's proxy;
//   - engine caps: the engine's own caps (vLLM --max-num-queued-reqs and
//     --max-num-queued-tokens, answering 503), sized by their documented rules from the
//     same calibration as slogate's calibrated tiers (calibrate.Result.EngineCaps);
//   - shedder: a gateway's static saturation shedder, rejecting at once while the
//     engine reports a queue of 5 or more or KV usage of 0.8 or more (the Gateway API
//     Inference Extension's default thresholds, pkg/epp/saturationdetector), scraping
//     the engine every 50 ms;
//   - static cap: a fixed in-flight cap by Little's law with a bounded queue;
//   - slogate: the built-in tiers with SLO feedback and engine saturation;
//   - calibrated: slogate with the tiers file slogate calibrate wrote (-tiers).

// compareOpts are the compare phase's settings.
type compareOpts struct {
	Levels         []float64     // load levels, multiples of the knee
	Arrivals       []arrivalKind // the arrival processes, one group of levels each
	Warmup, Window time.Duration
	ShedQueue      float64       // the shedder's engine queue threshold
	ShedKV         float64       // the shedder's KV usage threshold
	ShedScrape     time.Duration // how often the shedder reads the engine's metrics
	// Virtual plays the phase in virtual time (virtual.go) instead of over HTTP in real
	// time: the same arrivals, the engine model and admission's code without the proxy.
	Virtual bool
}

// arrivalKind is an arrival process: its name and the coefficient of variation of its
// inter-arrival times.
type arrivalKind struct {
	Name string
	CV   float64
}

// compareGroup is one arrival process's experiments, one per load level.
type compareGroup struct {
	Arrivals arrivalKind
	Exps     []*experiment
}

// Names of the compare phase's configurations, which its targets refer to.
const (
	nameNone       = "no admission"
	nameEngineCaps = "engine caps"
	nameShedder    = "shedder"
	nameStatic     = "static cap"
	nameSlogate    = "slogate"
	nameCalibrated = "calibrated"
)

// compareSetups returns the configurations of the compare phase, in the order above.
// Without -tiers there is no calibrated configuration and no calibration to size the
// engine's caps from, and the phase refuses to run.
func compareSetups(o options) ([]setup, error) {
	if o.calibrated == nil {
		return nil, fmt.Errorf("the compare phase needs -tiers: a tiers file slogate calibrate wrote (bench/calibrated.sh), for the calibrated configuration and the engine's caps")
	}
	caps, err := engineCapsFrom(*o.calibrated)
	if err != nil {
		return nil, err
	}
	static := staticConfig(o.staticCap, o.staticWait, o.slo)
	slog := slogateConfig(o.slo, o.fb)
	shed := shedderConfig(o.slo)
	c := o.compare
	return []setup{
		{Name: nameNone, SLO: o.slo},
		{Name: nameEngineCaps, SLO: o.slo, Caps: caps},
		{Name: nameShedder, SLO: o.slo, Admission: &shed, Engine: true, SatQueue: c.ShedQueue, SatKV: c.ShedKV, Scrape: c.ShedScrape},
		{Name: nameStatic, SLO: o.slo, Admission: &static},
		{Name: nameSlogate, SLO: o.slo, Admission: &slog, Engine: true},
		{Name: nameCalibrated, SLO: o.slo, Admission: o.calibrated, Engine: true},
	}, nil
}

// shedderConfig is the static shedder's admission: one tier for every request with an
// in-flight cap no load reaches (fixed: the feedback cannot move it) and no queue, so
// that a request is dispatched at once unless the engine is saturated, and then turned
// away at once.
func shedderConfig(s measure.SLO) admission.Config {
	const unlimited = 1 << 16
	return admission.Config{Tiers: []admission.TierConfig{{
		Name: "all", MaxInFlight: unlimited, MinInFlight: unlimited, MaxQueue: 0, SLO: s,
	}}}
}

// compare runs every arrival process's load levels against the configurations: the
// levels of one process at the same time (or one after another with -serial), the
// processes one after another, waiting for a quiet machine before each.
func compare(ctx context.Context, o options, p enginesim.Profile, quiet func()) ([]compareGroup, []string, error) {
	sus, err := compareSetups(o)
	if err != nil {
		return nil, nil, err
	}
	var groups []compareGroup
	var noise []string
	for _, a := range o.compare.Arrivals {
		if !o.compare.Virtual {
			quiet()
		}
		g := compareGroup{Arrivals: a}
		var runErr error
		n := phaseNoise(ctx, func() { g.Exps, runErr = compareLevels(ctx, o, p, a, sus) })
		if runErr != nil {
			return nil, nil, runErr
		}
		groups, noise = append(groups, g), append(noise, n)
		if ctx.Err() != nil {
			break
		}
	}
	return groups, noise, ctx.Err()
}

// compareLevels runs one arrival process at every load level against sus.
func compareLevels(ctx context.Context, o options, p enginesim.Profile, a arrivalKind, sus []setup) ([]*experiment, error) {
	c := o.compare
	exps := make([]*experiment, len(c.Levels))
	defer closeAll(exps)
	for i, m := range c.Levels {
		e := &experiment{
			Name: fmt.Sprintf("compare %s %gx", a.Name, m), Seed: o.seed, SLO: o.slo, Warmup: c.Warmup, Window: c.Window,
			Grace: grace(o.slo, o.output), CV: a.CV,
			Classes: []class{{Name: "8k", Input: o.input, Output: o.output, Rate: m * o.rate}},
		}
		exps[i] = e
		if c.Virtual {
			if err := e.playVirtual(p, sus); err != nil {
				return nil, err
			}
			continue
		}
		if err := e.addStacks(sus, p); err != nil {
			return nil, err
		}
	}
	if c.Virtual {
		return exps, ctx.Err()
	}
	runEach(ctx, exps, o.serial)
	// closeAll stops the stacks; the outcomes and timelines stay.
	return exps, ctx.Err()
}

// parseArrivals parses -compare-arrivals: poisson, bursty (gamma inter-arrival times of
// coefficient of variation cv), or both.
func parseArrivals(s string, cv float64) ([]arrivalKind, error) {
	if !(cv > 0) || math.IsInf(cv, 1) || cv > 100 {
		return nil, fmt.Errorf("-burst-cv %v: want a coefficient of variation in (0, 100]", cv)
	}
	var out []arrivalKind
	for _, name := range splitList(s) {
		switch name {
		case "poisson":
			out = append(out, arrivalKind{Name: name, CV: 1})
		case "bursty":
			out = append(out, arrivalKind{Name: name, CV: cv})
		default:
			return nil, fmt.Errorf("-compare-arrivals %q: want poisson, bursty or both, comma-separated", s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-compare-arrivals %q: want poisson, bursty or both", s)
	}
	return out, nil
}
