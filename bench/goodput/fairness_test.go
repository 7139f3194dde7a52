package main

import (
	"flag"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

func TestFairClasses(t *testing.T) {
	calm := class{Input: 4096, Output: 128, Rate: 1}
	flood := class{Input: 8192, Output: 128, Rate: 10}
	knees := []float64{2.8, 2.8, 2.8, 1.3}
	cs := fairClasses(4, calm, flood, knees, 1.5)
	load := 0.0
	for i, c := range cs {
		load += c.Rate / knees[i]
		if c.Tenant != c.Name {
			t.Errorf("class %d: tenant %q, name %q", i, c.Tenant, c.Name)
		}
	}
	if math.Abs(load-1.5) > 1e-12 {
		t.Errorf("Σ rate/knee = %v, want 1.5", load)
	}
	names := []string{"calm-1", "calm-2", "calm-3", floodTenant}
	for i, c := range cs {
		if c.Name != names[i] {
			t.Errorf("tenant %d is %q, want %q", i, c.Name, names[i])
		}
	}
	if r := cs[3].Rate / cs[0].Rate; math.Abs(r-10) > 1e-12 || cs[0].Rate != cs[1].Rate || cs[3].Input != 8192 || cs[0].Input != 4096 {
		t.Errorf("classes %+v: the flooder should send 10× a calm tenant's rate with its own prompts", cs)
	}
	// Relative rates are relative: 2:20 is 1:10.
	calm.Rate, flood.Rate = 2, 20
	if again := fairClasses(4, calm, flood, knees, 1.5); math.Abs(again[3].Rate-cs[3].Rate) > 1e-12 || math.Abs(again[0].Rate-cs[0].Rate) > 1e-12 {
		t.Errorf("2:20 gives %+v, 1:10 %+v", again, cs)
	}
	if got, want := promptCapacity(cs, 1.5), (3*cs[0].Rate*4096+cs[3].Rate*8192)/1.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("promptCapacity = %v, want %v", got, want)
	}
}

// TestFairSetups checks the configurations: the tiers alone have no tenants; with tenants
// admission takes the section and names every tenant by its header (and a request
// without one "other"); the budget variant gives every tenant the same input budget.
func TestFairSetups(t *testing.T) {
	o := options{slo: measure.NewSLO(5*time.Second, 100*time.Millisecond), fair: fairOpts{Budget: 0.25}}
	w := fairWorkload{Tenants: fairClasses(4, class{Input: 4096, Output: 128, Rate: 1}, class{Input: 8192, Output: 128, Rate: 10}, []float64{2.8, 2.8, 2.8, 1.3}, 1.5)}
	w.PromptCapacity = promptCapacity(w.Tenants, 1.5)
	sus := fairSetups(o, w)
	if len(sus) != 4 || sus[0].Name != fairNone || sus[0].Admission != nil || sus[1].Name != fairTiers || sus[1].Admission.Tenants != nil {
		t.Fatalf("setups %+v", sus)
	}
	for _, su := range sus[1:] {
		if !su.Engine || len(su.Admission.Tiers) != len(sus[1].Admission.Tiers) {
			t.Errorf("%s: %+v, want the tiers of %s with engine signals", su.Name, su, fairTiers)
		}
		c, err := admission.New(*su.Admission, admission.Options{Mode: admission.Enforce})
		if err != nil {
			t.Fatalf("%s: %v", su.Name, err)
		}
		for _, cl := range w.Tenants {
			h := http.Header{}
			h.Set(tenantHeader, cl.Tenant)
			if got := c.Tenant(h); got != cl.Name && su.Admission.Tenants != nil || got != "" && su.Admission.Tenants == nil {
				t.Errorf("%s: a request of %s is tenant %q", su.Name, cl.Name, got)
			}
		}
		if su.Admission.Tenants == nil {
			continue
		}
		if got := c.Tenant(http.Header{}); got != admission.OtherTenant {
			t.Errorf("%s: a request without the header is tenant %q", su.Name, got)
		}
		for _, tc := range su.Admission.Tenants.Named {
			want := 0.0
			if su.Name == fairBudget {
				want = math.Ceil(0.25 * w.PromptCapacity * 60)
			}
			if tc.Weight != 1 || tc.Budget != (admission.Budget{InputTokensPerMinute: want}) {
				t.Errorf("%s: tenant %+v, want weight 1 and %v input tokens a minute", su.Name, tc, want)
			}
		}
	}
	o.fair.Budget = 0
	if sus := fairSetups(o, w); len(sus) != 3 {
		t.Errorf("without a budget share: %d setups, want 3", len(sus))
	}
}

func TestParseFairFlags(t *testing.T) {
	parse := func(args ...string) (options, error) {
		fs := flag.NewFlagSet("goodput", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return parseFlags(fs, args)
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	f := o.fair
	if f.Tenants != 4 || f.Calm != (class{Name: "-fair-calm", Input: 4096, Output: 128, Rate: 1}) || f.Flood.Input != 8192 || f.Flood.Rate != 10 ||
		f.Load != 1.5 || f.Reps != 3 || f.Budget != 0.25 || f.Window != 5*time.Minute {
		t.Errorf("defaults %+v", f)
	}
	if o.runs("fairness") || !o.runs("mixed") {
		t.Error("-mode all should run every phase but fairness")
	}
	if o, _ := parse("-mode", "goodput,fairness"); !o.runs("fairness") || o.runs("mixed") {
		t.Error("-mode goodput,fairness should run those two")
	}
	for _, bad := range [][]string{
		{"-fair-tenants", "1"}, {"-fair-tenants", "65"}, {"-fair-load", "0"}, {"-fair-load", "NaN"}, {"-fair-load", "101"},
		{"-fair-reps", "0"}, {"-fair-budget", "-0.1"}, {"-fair-budget", "1.5"}, {"-fair-window", "0s"},
		{"-fair-calm", "4096:128"}, {"-fair-flood", "8192:0:10"}, {"-fair-flood", "8192:128:1e7"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
