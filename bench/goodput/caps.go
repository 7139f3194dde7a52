package main

import (
	"fmt"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/enginesim"
)

// engineCaps are the engine's own admission caps, as vLLM's or SGLang's flags set them:
// zero is off. Each belongs to its engine's flavour (setup.Flavor).
type engineCaps struct {
	Reqs   int // vLLM --max-num-queued-reqs: requests waiting or running
	Tokens int // vLLM --max-num-queued-tokens: prompt tokens not yet prefilled
	Queued int // SGLang --max-queued-requests: requests waiting
}

// apply sets the caps in a simulated engine's configuration.
func (c engineCaps) apply(cfg enginesim.Config) enginesim.Config {
	cfg.MaxNumQueuedReqs, cfg.MaxNumQueuedTokens, cfg.MaxQueuedRequests = c.Reqs, c.Tokens, c.Queued
	return cfg
}

// engineCapsFrom sizes the engine's caps from the calibration a tiers file records, as
// slogate calibrate advises them (calibrate.Result.EngineCaps: the flags' documented
// rules on the same knees).
func engineCapsFrom(cfg admission.Config) (engineCaps, error) {
	out, ok := calibrate.FromConfig(cfg)
	if !ok {
		return engineCaps{}, fmt.Errorf("the tiers file records no calibration to size the engine's caps from")
	}
	f := out.Result.EngineCaps()
	if f.MaxNumQueuedReqs == 0 {
		return engineCaps{}, fmt.Errorf("the tiers file's calibration found no knee to size the engine's caps from")
	}
	return engineCaps{Reqs: f.MaxNumQueuedReqs, Tokens: f.MaxNumQueuedTokens}, nil
}
