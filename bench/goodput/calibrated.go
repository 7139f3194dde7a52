package main

import (
	"fmt"
	"io"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
)

// loadCalibrated reads the tiers file of -tiers, written by slogate calibrate, for the
// "calibrated" configuration. Unless -rate says otherwise, the sustainable rate is the
// knee slogate calibrate measured for the tier of the workload's prompts, and the static
// cap and its queue wait follow from the knee's point as from the calibrate phase.
func (o *options) loadCalibrated(w io.Writer) error {
	cfg, err := admission.LoadConfig(o.tiersFile)
	if err != nil {
		return err
	}
	o.calibrated = &cfg
	out, ok := calibrate.FromConfig(cfg)
	if !ok {
		return fmt.Errorf("-tiers %s records no calibration", o.tiersFile)
	}
	tier := tierOf(cfg, o.input)
	for _, t := range out.Result.Tiers {
		if t.Tier != tier || t.Knee < 0 {
			continue
		}
		k := t.Points[t.Knee]
		fmt.Fprintf(w, "# -tiers %s: tier %s calibrated with %d/%d requests on %s, knee %.3f req/s (%s)\n\n",
			o.tiersFile, tier, t.Shape.Input, t.Shape.Output, out.Result.Finished.UTC().Format(time.RFC3339), t.KneeRate, t.Rule)
		if o.rate <= 0 {
			o.rate = t.KneeRate
			o.staticCap, o.staticWait = staticCap(t.KneeRate, k.MeanE2E, k.TTFTp95, time.Duration(o.slo.TTFT))
		}
		return nil
	}
	if o.rate <= 0 {
		return fmt.Errorf("-tiers %s: tier %s (of %d-token prompts) was not calibrated; give -rate", o.tiersFile, tier, o.input)
	}
	return nil
}

// tierOf names the tier of a prompt of n tokens.
func tierOf(cfg admission.Config, n int) string {
	for _, t := range cfg.Tiers[:len(cfg.Tiers)-1] {
		if n <= t.MaxInputTokens {
			return t.Name
		}
	}
	return cfg.Tiers[len(cfg.Tiers)-1].Name
}
