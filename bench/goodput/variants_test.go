package main

import (
	"flag"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

func TestParseVariants(t *testing.T) {
	base := admission.Feedback{MinSamples: 10}
	vs, err := parseVariants("tuned:increase=0.2; slow:interval=5s,window=1m,backoff=0.8,tier-tpot=90ms;builtin:long-in-flight=8,long-queue=16,long-wait=10s", base)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 {
		t.Fatalf("%d variants, want 3", len(vs))
	}
	if v := vs[0]; v.Label != "tuned" || v.FB.Increase != 0.2 || v.FB.MinSamples != 10 {
		t.Errorf("tuned = %+v: want increase 0.2 and the base's min samples", v)
	}
	if v := vs[1]; v.FB.Interval != measure.Duration(5*time.Second) || v.FB.Window != measure.Duration(time.Minute) ||
		v.FB.Backoff != 0.8 || v.TierSLO.TPOT != measure.Duration(90*time.Millisecond) || v.TierSLO.TTFT != 0 {
		t.Errorf("slow = %+v", v)
	}
	o := options{slo: measure.NewSLO(5*time.Second, 100*time.Millisecond), staticWait: 2 * time.Second}
	su := vs[2].setup(o)
	if su.Name != "slogate (builtin)" || !su.Engine || su.SLO != o.slo {
		t.Errorf("setup %+v", su)
	}
	if err := su.Admission.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tier := range su.Admission.Tiers {
		if tier.Name == "long" && (tier.MaxInFlight != 8 || tier.MaxQueue != 16 || tier.MaxQueueWait != measure.Duration(10*time.Second)) {
			t.Errorf("long tier %+v", tier)
		}
	}
	su = vs[1].setup(o)
	for _, tier := range su.Admission.Tiers {
		if tier.SLO.TPOT != measure.Duration(90*time.Millisecond) || tier.SLO.TTFT != measure.Duration(5*time.Second) {
			t.Errorf("tier %s SLO %+v: want the variant's TPOT and the benchmark's TTFT", tier.Name, tier.SLO)
		}
	}
	for _, bad := range []string{"nolabel", ":increase=1", "x:speed=2", "x:interval=fast"} {
		if _, err := parseVariants(bad, base); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		ok   bool
	}{
		{"defaults", nil, true},
		{"phases", []string{"-mode", "goodput,mixed", "-rate", "1.3"}, true},
		{"unknown phase", []string{"-mode", "goodput,bench"}, false},
		{"bad levels", []string{"-levels", "1,x"}, false},
		{"bad class", []string{"-mixed-long", "30720:16"}, false},
		{"bad variant", []string{"-variants", "x:speed=1"}, false},
		{"shapes", []string{"-mode", "shapes", "-shapes-window", "30m"}, true},
		{"shapes without a window", []string{"-mode", "shapes", "-shapes-window", "0s"}, false},
		{"shapes with a negative long-prefill threshold", []string{"-mode", "shapes", "-shapes-long-prefill", "-1"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(flag.NewFlagSet("goodput", flag.ContinueOnError), tc.args)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if tc.name == "defaults" && (o.input != 8192 || o.output != 128 || len(o.levels) != 5 || o.long.Input != 30720 || !o.runs("mixed")) {
				t.Errorf("defaults: %+v", o)
			}
			if tc.name == "defaults" && o.runs("shapes") {
				t.Error("-mode all runs the shapes phase")
			}
			if tc.name == "shapes" && (!o.runs("shapes") || o.runs("goodput") || o.shapes.Window != 30*time.Minute || o.shapes.Profile != "h200-9b") {
				t.Errorf("-mode shapes: %+v", o.shapes)
			}
			if tc.name == "phases" && (o.runs("calibrate") || !o.runs("goodput") || !o.runs("mixed")) {
				t.Errorf("-mode goodput,mixed: runs calibrate %v goodput %v mixed %v", o.runs("calibrate"), o.runs("goodput"), o.runs("mixed"))
			}
		})
	}
}
