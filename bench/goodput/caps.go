package main

import (
	"fmt"
	"math"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// engineCaps are the engine's own admission caps, as vLLM's flags set them: zero is off.
type engineCaps struct {
	Reqs   int // --max-num-queued-reqs: requests waiting or running
	Tokens int // --max-num-queued-tokens: prompt tokens not yet prefilled
}

// apply sets the caps in a simulated engine's configuration.
func (c engineCaps) apply(cfg enginesim.Config) enginesim.Config {
	cfg.MaxNumQueuedReqs, cfg.MaxNumQueuedTokens = c.Reqs, c.Tokens
	return cfg
}

// engineCapsFrom sizes the engine's caps from the calibration a tiers file records, by
// the flags' documented rules.
func engineCapsFrom(cfg admission.Config, slo measure.SLO) (engineCaps, error) {
	out, ok := calibrate.FromConfig(cfg)
	if !ok {
		return engineCaps{}, fmt.Errorf("the tiers file records no calibration to size the engine's caps from")
	}
	for _, t := range out.Result.Tiers {
		if t.Knee < 0 {
			continue
		}
		k := t.Points[t.Knee]
		return engineCaps{
			Reqs:   int(math.Ceil(t.KneeRate * k.MeanE2E.Seconds())),
			Tokens: int(math.Ceil(time.Duration(slo.TTFT).Seconds() * t.KneeRate * float64(t.Shape.Input))),
		}, nil
	}
	return engineCaps{}, fmt.Errorf("the tiers file's calibration found no knee")
}
