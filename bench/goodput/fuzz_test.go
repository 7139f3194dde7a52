package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
)

// FuzzParseFlags feeds arbitrary values to the flags the benchmark parses itself: the
// rate lists -scan and -levels, the class -mixed-short (input:output:rate) and the
// configurations -variants (label:key=value,...;...). What it accepts is usable: the
// rates are positive and finite, one per item; the class has positive sizes and a
// positive, finite rate, and written back it parses the same; every variant has a label
// and a slogate configuration that admission accepts (so a bad value fails at start, not
// hours into a run), and written back the variants parse the same.
func FuzzParseFlags(f *testing.F) {
	f.Add("0.6,0.8,1.0,1.2,1.4,1.6", "0.5,0.8,1,1.5,2", "1024:64:1.5", "")
	f.Add("1", "2", "1:1:1e-3", "tuned:increase=0.2; slow:interval=5s,window=1m,backoff=0.8,tier-tpot=90ms;builtin:long-in-flight=8,long-queue=16,long-wait=10s")
	f.Add("1,x", " 1 , 2 ", "30720:16", "x:speed=2")
	f.Add("NaN", "+Inf", "1:1:Inf", "a:backoff=NaN")
	f.Add("1e-320", "0x1p-3", "01:0x10:1", "a:min-samples=-5,interval=-1s;b:increase=1e309")
	f.Add("1,", ",", "1:1:1:1", ":increase=1;nolabel;a:")
	f.Fuzz(func(t *testing.T, scan, levels, short, variants string) {
		fs := flag.NewFlagSet("goodput", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o, err := parseFlags(fs, []string{"-scan=" + scan, "-levels=" + levels, "-mixed-short=" + short, "-variants=" + variants})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		checkRates(t, "-scan", scan, o.scan)
		checkRates(t, "-levels", levels, o.levels)
		c := o.short
		if c.Input <= 0 || c.Output <= 0 || !(c.Rate > 0) || math.IsInf(c.Rate, 0) {
			t.Fatalf("-mixed-short %q gives %+v", short, c)
		}
		if again, err := parseClass("short", fmt.Sprintf("%d:%d:%s", c.Input, c.Output, strconv.FormatFloat(c.Rate, 'g', -1, 64))); err != nil || again != c {
			t.Fatalf("-mixed-short %q gives %+v; written back, %+v, %v", short, c, again, err)
		}
		for _, v := range o.variants {
			if v.Label == "" {
				t.Fatalf("-variants %q: a variant without a label", variants)
			}
			if err := v.setup(o).Admission.Validate(); err != nil {
				t.Fatalf("-variants %q: variant %q gives a configuration admission refuses: %v", variants, v.Label, err)
			}
		}
		written := formatVariants(o.variants)
		again, err := parseVariants(written, o.fb)
		if err != nil || fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", o.variants) {
			t.Fatalf("-variants %q gives %+v; written back as %q, %+v, %v", variants, o.variants, written, again, err)
		}
	})
}

// checkRates checks that rates are positive and finite, one per item of the list s.
func checkRates(t *testing.T, flagName, s string, rates []float64) {
	t.Helper()
	if len(rates) != strings.Count(s, ",")+1 {
		t.Fatalf("%s %q gives %d rates", flagName, s, len(rates))
	}
	for _, r := range rates {
		if !(r > 0) || math.IsInf(r, 0) {
			t.Fatalf("%s %q gives the rate %v", flagName, s, r)
		}
	}
}

// formatVariants writes variants as -variants takes them, every key set.
func formatVariants(vs []variant) string {
	var specs []string
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, v := range vs {
		specs = append(specs, fmt.Sprintf("%s:interval=%s,window=%s,min-samples=%d,backoff=%s,increase=%s,tier-ttft=%s,tier-tpot=%s,long-in-flight=%d,long-queue=%d,long-wait=%s",
			v.Label, time.Duration(v.FB.Interval), time.Duration(v.FB.Window), v.FB.MinSamples, g(v.FB.Backoff), g(v.FB.Increase),
			v.TierSLO.TTFT, v.TierSLO.TPOT, v.Long.InFlight, v.Long.Queue, v.Long.Wait))
	}
	return strings.Join(specs, ";")
}

// FuzzParseFairFlags feeds arbitrary values to the fairness phase's flags: the classes
// -fair-calm and -fair-flood (input:output:relative rate), -fair-tenants, -fair-load and
// -fair-budget. What it accepts gives a workload that can run: for any knees, every
// tenant's rate is positive and finite, the flooder's is the ratio asked for times a
// calm one's, the load in total (Σ rate ÷ knee) is -fair-load, and every configuration
// is one admission takes, its tenants section naming every tenant by its header.
func FuzzParseFairFlags(f *testing.F) {
	f.Add("4096:128:1", "8192:128:10", "4", "1.5", "0.25")
	f.Add("1:1:1e-3", "30720:16:1e3", "64", "100", "1")
	f.Add("1:1:1e-300", "1:1:1e300", "2", "1e-300", "5e-324")
	f.Add("4096:128", "8192:128:Inf", "1", "NaN", "-0")
	f.Add("0x10:010:1", "1:1:0x1p-3", "+3", "1e2", "0x1p-2")
	f.Fuzz(func(t *testing.T, calm, flood, tenants, load, budget string) {
		fs := flag.NewFlagSet("goodput", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o, err := parseFlags(fs, []string{"-fair-calm=" + calm, "-fair-flood=" + flood, "-fair-tenants=" + tenants,
			"-fair-load=" + load, "-fair-budget=" + budget})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		fo := o.fair
		for _, knee := range []float64{1e-3, 1.3, 1e4} {
			knees := make([]float64, fo.Tenants)
			for i := range knees {
				knees[i] = knee * float64(1+i%3)
			}
			cs := fairClasses(fo.Tenants, fo.Calm, fo.Flood, knees, fo.Load)
			sum := 0.0
			for i, c := range cs {
				if !(c.Rate > 0) || math.IsInf(c.Rate, 0) || c.Input <= 0 || c.Output <= 0 {
					t.Fatalf("%q, %q, load %v, knee %v: tenant %d is %+v", calm, flood, fo.Load, knee, i, c)
				}
				sum += c.Rate / knees[i]
			}
			if math.Abs(sum-fo.Load) > 1e-9*fo.Load {
				t.Fatalf("%q, %q: Σ rate ÷ knee = %v, want %v", calm, flood, sum, fo.Load)
			}
			if got, want := cs[len(cs)-1].Rate/cs[0].Rate, fo.Flood.Rate/fo.Calm.Rate; math.Abs(got-want) > 1e-9*want {
				t.Fatalf("%q, %q: the flooder sends %v× a calm rate, want %v×", calm, flood, got, want)
			}
			w := fairWorkload{Tenants: cs, PromptCapacity: promptCapacity(cs, fo.Load)}
			for _, su := range fairSetups(o, w) {
				if su.Admission == nil {
					continue
				}
				c, err := admission.New(*su.Admission, admission.Options{Mode: admission.Enforce})
				if err != nil {
					t.Fatalf("%s: admission refuses the configuration: %v", su.Name, err)
				}
				if su.Admission.Tenants == nil {
					continue
				}
				for _, cl := range cs {
					if got := c.Tenant(http.Header{tenantHeader: {cl.Tenant}}); got != cl.Name {
						t.Fatalf("%s: a request of %s is tenant %q", su.Name, cl.Name, got)
					}
				}
			}
		}
	})
}

// FuzzParseCompareFlags checks that the compare phase's flags either parse into
// settings the phase can run with or give an error saying what is wrong.
func FuzzParseCompareFlags(f *testing.F) {
	f.Add("0.5,0.8,1,1.5,2,3,5", "poisson,bursty", "3", "5", "0.8", "50ms")
	f.Add("1", "bursty", "0.5", "1e-9", "1", "1ns")
	f.Add("NaN", "poisson,,", "Inf", "+Inf", "1.5", "-1s")
	f.Add("5,", "gamma", "0", "0", "0", "0")
	f.Add("0x1p-3", " bursty ,poisson", "1e2", "1e308", "5e-324", "1h")
	f.Fuzz(func(t *testing.T, levels, arrivals, cv, queue, kv, scrape string) {
		fs := flag.NewFlagSet("goodput", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o, err := parseFlags(fs, []string{"-compare-levels=" + levels, "-compare-arrivals=" + arrivals, "-burst-cv=" + cv,
			"-shed-queue=" + queue, "-shed-kv=" + kv, "-shed-scrape=" + scrape})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		c := o.compare
		checkRates(t, "-compare-levels", levels, c.Levels)
		if len(c.Arrivals) == 0 {
			t.Fatalf("-compare-arrivals %q: no arrival process", arrivals)
		}
		for _, a := range c.Arrivals {
			if a.Name != "poisson" && a.Name != "bursty" || !(a.CV > 0) || a.CV > 100 || a.Name == "poisson" && a.CV != 1 {
				t.Fatalf("-compare-arrivals %q -burst-cv %q: %+v", arrivals, cv, a)
			}
			// Every accepted process draws arrivals in order, at about its rate.
			at := renewal(10, 100*time.Second, 1, a.CV)
			for i := 1; i < len(at); i++ {
				if at[i] < at[i-1] {
					t.Fatalf("cv %v: arrival %d at %v before %v", a.CV, i, at[i], at[i-1])
				}
			}
		}
		if !(c.ShedQueue > 0) || math.IsInf(c.ShedQueue, 0) || !(c.ShedKV > 0 && c.ShedKV <= 1) || c.ShedScrape <= 0 {
			t.Fatalf("shedder thresholds %v, %v, %v accepted", c.ShedQueue, c.ShedKV, c.ShedScrape)
		}
		if err := shedderConfig(o.slo).Validate(); err != nil {
			t.Fatalf("the shedder's tiers do not validate: %v", err)
		}
	})
}
