package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// variant is an extra slogate configuration run beside the three of the comparison, to
// see what a setting changes under the same arrivals: its feedback, and optionally the
// SLO the tiers' feedback aims at (which then differs from the SLO goodput counts).
type variant struct {
	Label   string
	FB      admission.Feedback
	TierSLO measure.SLO // zero fields: the benchmark's SLO
	// Long overrides the 32K tier's in-flight cap, queue and wait where set.
	Long struct {
		InFlight, Queue int
		Wait            time.Duration
	}
}

// parseVariants parses "label:key=value,key=value;label:...", keys interval, window,
// min-samples, backoff, increase (the feedback), tier-ttft, tier-tpot (the tiers' SLO)
// and long-in-flight, long-queue, long-wait (the 32K tier). Unset feedback fields take
// the base feedback's values; a feedback admission refuses is an error.
func parseVariants(s string, base admission.Feedback) ([]variant, error) {
	var out []variant
	for _, spec := range strings.Split(s, ";") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		label, kvs, ok := strings.Cut(spec, ":")
		if !ok || label == "" {
			return nil, fmt.Errorf("variant %q: want label:key=value,...", spec)
		}
		v := variant{Label: label, FB: base}
		for _, kv := range strings.Split(kvs, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if err := v.set(k, val); err != nil {
				return nil, fmt.Errorf("variant %q: %w", label, err)
			}
		}
		// Refuse now a feedback or tier SLOs admission would refuse when the variant's
		// stack starts, which may be hours into the run.
		if err := slogateConfig(v.TierSLO, v.FB).Validate(); err != nil {
			return nil, fmt.Errorf("variant %q: %w", label, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (v *variant) set(k, val string) error {
	dur := func(dst *time.Duration) error {
		d, err := time.ParseDuration(val)
		*dst = d
		return err
	}
	var err error
	switch k {
	case "interval", "window":
		var d time.Duration
		if err = dur(&d); k == "interval" {
			v.FB.Interval = measure.Duration(d)
		} else {
			v.FB.Window = measure.Duration(d)
		}
	case "min-samples":
		v.FB.MinSamples, err = strconv.Atoi(val)
	case "backoff":
		v.FB.Backoff, err = strconv.ParseFloat(val, 64)
	case "increase":
		v.FB.Increase, err = strconv.ParseFloat(val, 64)
	case "tier-ttft":
		err = v.TierSLO.TTFT.UnmarshalText([]byte(val))
	case "tier-tpot":
		err = v.TierSLO.TPOT.UnmarshalText([]byte(val))
	case "long-in-flight":
		v.Long.InFlight, err = strconv.Atoi(val)
	case "long-queue":
		v.Long.Queue, err = strconv.Atoi(val)
	case "long-wait":
		err = dur(&v.Long.Wait)
	default:
		return fmt.Errorf("unknown key %q (want interval, window, min-samples, backoff, increase, tier-ttft, tier-tpot, long-in-flight, long-queue or long-wait)", k)
	}
	if err != nil {
		return fmt.Errorf("%s=%q: %w", k, val, err)
	}
	return nil
}

// setup returns the variant's slogate configuration.
func (v variant) setup(o options) setup {
	cfg := slogateConfig(v.TierSLO.Or(o.slo), v.FB)
	for i := range cfg.Tiers {
		t := &cfg.Tiers[i]
		if t.Name != "long" {
			continue
		}
		if v.Long.InFlight > 0 {
			t.MaxInFlight = v.Long.InFlight
		}
		if v.Long.Queue > 0 {
			t.MaxQueue = v.Long.Queue
		}
		if v.Long.Wait > 0 {
			t.MaxQueueWait = measure.Duration(v.Long.Wait)
		}
	}
	return setup{Name: "slogate (" + v.Label + ")", SLO: o.slo, Admission: &cfg, Engine: true}
}
