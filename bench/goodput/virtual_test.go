package main

import (
	"context"
	"flag"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

func profile(t *testing.T, name string) enginesim.Profile {
	t.Helper()
	p, err := enginesim.LookupProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// eightK is the compare phase's workload at rate, with its SLO.
func eightK(rate float64) []class {
	return []class{{Name: "8k", Input: 8192, Output: 128, Rate: rate, SLO: measure.NewSLO(5*time.Second, 100*time.Millisecond)}}
}

// inEngine returns the most requests of outs that were in the engine at once: from their
// dispatch (arrival + slogate's queue wait) to their end.
func inEngine(outs []outcome) int {
	type edge struct {
		at time.Duration
		d  int
	}
	var edges []edge
	for _, o := range outs {
		if o.Status != http.StatusOK {
			continue
		}
		edges = append(edges, edge{o.Arrival + o.Headers, +1}, edge{o.Arrival + o.E2E, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.d - b.d // an end before a start at the same instant
	})
	most, n := 0, 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return most
}

// A virtual run plays slogate's admission (the controller the sidecar runs, on a fake
// clock) in front of the engine model: a static cap of 4 holds the engine to 4 requests
// at a time at twice the knee, queues the others, counts their wait in their TTFT, turns
// away those that would wait too long, and comes out the same on every run. Without
// admission the engine takes everything.
func TestPlayVirtual(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := profile(t, "h20x8-flash")
	classes := eightK(2 * 1.344)
	arrivals := schedule(classes, 5*time.Minute, 1, 1)
	static := staticConfig(4, 2*time.Second, classes[0].SLO)
	capped := setup{Name: nameStatic, Admission: &static}

	none, err := playOne(setup{Name: nameNone}, p, classes, arrivals, 6*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n := inEngine(none); n <= 4 {
		t.Fatalf("without admission at most %d in the engine at twice the knee; want a queue", n)
	}
	for i, o := range none {
		if o.Status != http.StatusOK || o.Headers != 0 {
			t.Fatalf("request %d without admission: %+v", i, o)
		}
	}

	outs, err := playOne(capped, p, classes, arrivals, 6*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n := inEngine(outs); n != 4 {
		t.Errorf("at most %d requests in the engine under a static cap of 4", n)
	}
	var queued, timedOut int
	for i, o := range outs {
		switch {
		case o.Status == http.StatusOK && o.Headers > 0:
			queued++
			if o.Done && o.TTFT <= o.Headers {
				t.Errorf("request %d: TTFT %v does not count its %v in the queue", i, o.TTFT, o.Headers)
			}
		case o.Reason == admission.QueueTimeout.String():
			timedOut++
			if o.Headers < 2*time.Second || o.Headers > 2*time.Second+admissionTick {
				t.Errorf("request %d timed out after %v in a queue of 2s", i, o.Headers)
			}
		}
	}
	if queued == 0 || timedOut == 0 {
		t.Errorf("%d queued and %d timed out of %d; want both", queued, timedOut, len(outs))
	}

	again, err := playOne(capped, p, classes, arrivals, 6*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outs, again) {
		t.Error("two runs of the same arrivals differ")
	}
}

// The engine's own caps refuse with its 503 in a virtual run, and the requests they
// refuse never reach it.
func TestPlayVirtualEngineCaps(t *testing.T) {
	p := profile(t, "h200-9b")
	classes := []class{{Name: "API-S", Input: 2048, Output: 256, Rate: 40}}
	arrivals := schedule(classes, time.Minute, 1, 1)
	outs, err := playOne(setup{Name: nameEngineCaps, Caps: engineCaps{Queued: 2}, Flavor: enginesim.FlavorSGLang}, p, classes, arrivals, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, o := range outs {
		if o.Status == http.StatusServiceUnavailable {
			refused++
			if o.Reason != "engine 503" || o.Done {
				t.Errorf("refusal %+v", o)
			}
		}
	}
	if refused == 0 {
		t.Error("SGLang --max-queued-requests 2 refused nothing at 40 req/s")
	}
}

// slogate calibrate's rules, run on the model's rounds in virtual time, find the knee the
// model has: near the highest rate the model sustains inside the SLO over ten minutes
// (enginesim.SustainableRate), up to 15% above it, as a one-minute round lets a rate a
// little past the knee pass (calibrate.Plan.Precision says so; the HTTP calibration of
// the simulator, docs/benchmarks.md, found 1.344 req/s, 9% above).
func TestCalibrateOnTheModel(t *testing.T) {
	p := profile(t, "h20x8-flash")
	slo := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	tier := admission.TierConfig{Name: "8k", MaxInputTokens: 16384, SLO: slo}
	res, err := calibrate.Measure(context.Background(), modelRounds{p}, calibrate.Plan{
		Tiers: []calibrate.TierPlan{{Tier: tier, Shape: synth.Shape{Name: "8k", Input: 8192, Output: 128}}}, Seed: 1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := enginesim.SustainableRate(p, 8192, 128, slo, enginesim.Search{})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Tiers[0]
	if r.Err != "" || r.Limits == nil {
		t.Fatalf("tier %+v", r)
	}
	if ratio := r.KneeRate / truth; ratio < 0.9 || ratio > 1.15 {
		t.Errorf("knee %.3f req/s = %.2f × the model's sustainable rate %.3f (%s)", r.KneeRate, ratio, truth, r.Rule)
	}
}

// The seven shapes mix: an equal share each, each judged by the SLO of its built-in tier.
func TestMixClasses(t *testing.T) {
	tiers := mixTiers()
	if err := tiers.Validate(); err != nil {
		t.Fatal(err)
	}
	cl := mixClasses(tiers, 0.7)
	want := map[string]string{"API-S": "short", "CHAT-S": "short", "BATCH-D": "medium", "CODE-I": "long", "CHAT-L": "long", "CODE-A": "xlong", "DOC-L": "xlong"}
	if len(cl) != len(want) {
		t.Fatalf("%d classes, want %d", len(cl), len(want))
	}
	for _, c := range cl {
		if tierOf(tiers, c.Input) != want[c.Name] || c.SLO != tierSLO(tiers, c.Input) || c.SLO.TTFT == 0 || math.Abs(c.Rate-0.1) > 1e-12 {
			t.Errorf("class %+v: want tier %s's SLO and 0.1 req/s", c, want[c.Name])
		}
	}
	// The longest a request may run and still be good: BATCH-D's, its tier's TTFT SLO and
	// 8,191 more tokens at the TPOT SLO (and a second).
	if g := mixGrace(cl); g != 2*time.Second+8191*100*time.Millisecond+time.Second {
		t.Errorf("grace %v", g)
	}
}

// The shapes phase end to end, on short windows: every tier calibrated on the model, the
// six configurations at each level under the same arrivals, and at three times the knee
// the engine alone serving next to nothing good while slogate's calibrated tiers serve
// most of what the engine can. make's acceptance step runs it without -race.
func TestAcceptanceShapesPhase(t *testing.T) {
	if raceEnabled {
		t.Skip("a few seconds of virtual runs take minutes under -race; make acceptance runs it without -race")
	}
	o, err := parseFlags(flag.NewFlagSet("goodput", flag.ContinueOnError),
		[]string{"-mode", "shapes", "-compare-levels", "1,3", "-compare-arrivals", "poisson", "-shapes-warmup", "5m", "-shapes-window", "30m"})
	if err != nil {
		t.Fatal(err)
	}
	sr, err := shapes(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range sr.Cal.Tiers {
		switch {
		case tr.Limits == nil:
			t.Errorf("tier %s not calibrated: %s", tr.Tier, tr.Err)
		case tr.Limits.MaxPrefillTokens <= 0:
			t.Errorf("tier %s: no bound on prompts in prefill (prefill rate %v)", tr.Tier, tr.Prefill)
		}
	}
	if len(sr.Groups) != 1 || len(sr.Groups[0].Exps) != 2 || len(sr.Setups) != 6 || !(sr.Knee > 0) {
		t.Fatalf("%d groups, %d setups, knee %v", len(sr.Groups), len(sr.Setups), sr.Knee)
	}
	cs := sr.Groups[0].cells(o.compare.Levels)
	none, _ := find(cs[1], nameNone)
	cal, _ := find(cs[1], nameCalibrated)
	if !(cal.Sum.Goodput > 2*none.Sum.Goodput) || cal.Sum.Goodput < 0.5*best(cs) {
		t.Errorf("at 3×: calibrated %.4f req/s, no admission %.4f, best %.4f", cal.Sum.Goodput, none.Sum.Goodput, best(cs))
	}
	var b strings.Builder
	printShapes(&b, o, sr, time.Second)
	for _, want := range []string{"The mix's knee", "| DOC-L | 131072 / 2048 | xlong | 15s / 100ms |", "engine --max-queued-requests", "Targets (calibrated):"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// The compare phase in virtual time, on the calibration bench/compare.sh uses: slogate's
// admission code holds its results (docs/benchmarks.md, "slogate against every other
// protection") without the machine's noise, so a change to the controller that costs
// goodput or lets admitted requests miss their SLO fails here. With Poisson arrivals the
// calibrated tiers keep at least 95% of the best goodput at 2× and 90% at 5×; with both
// arrival kinds they beat every other protection from 1.5× up (slogate's built-in tiers
// may tie them) and their admitted requests meet both SLOs at least 99% of the time.
// Both calibrations of the engine hold it: the one the real-time tables use, and one by
// today's rules, with the bound on prompts in prefill.
func TestAcceptanceCompareVirtual(t *testing.T) {
	if raceEnabled {
		t.Skip("a virtual compare phase takes minutes under -race; make acceptance runs it without -race")
	}
	for _, file := range []string{"testdata/calibrated-8k.yaml", "testdata/calibrated-8k-prefill.yaml"} {
		t.Run(file, func(t *testing.T) { checkCompareVirtual(t, file) })
	}
}

func checkCompareVirtual(t *testing.T, tiers string) {
	o, err := parseFlags(flag.NewFlagSet("goodput", flag.ContinueOnError),
		[]string{"-mode", "compare", "-compare-virtual", "-tiers", tiers})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.loadCalibrated(io.Discard); err != nil {
		t.Fatal(err)
	}
	groups, _, err := compare(context.Background(), o, profile(t, o.profile), func() {})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		cs := g.cells(o.compare.Levels)
		top := best(cs)
		for _, row := range cs {
			cal, _ := find(row, nameCalibrated)
			if a := cal.admittedGood(); a < targetAdmitted {
				t.Errorf("%s %g×: %.1f%% of the admitted requests good", g.Arrivals.Name, cal.Level, 100*a)
			}
			share := map[float64]float64{2: targetAt2x, 5: targetAt5x}[cal.Level]
			if g.Arrivals.CV == 1 && share > 0 && cal.Sum.Goodput < share*top {
				t.Errorf("%s %g×: %.3f req/s = %s of the best %.3f", g.Arrivals.Name, cal.Level, cal.Sum.Goodput, pctOf(cal.Sum.Goodput, top), top)
			}
			if cal.Level < targetBeatsFrom {
				continue
			}
			for _, c := range row {
				if c.Name != nameCalibrated && c.Name != nameSlogate && c.Sum.Goodput >= cal.Sum.Goodput {
					t.Errorf("%s %g×: %s's %.3f req/s against calibrated's %.3f", g.Arrivals.Name, cal.Level, c.Name, c.Sum.Goodput, cal.Sum.Goodput)
				}
			}
		}
	}
}

// The shapes phase's measured arrivals take -shapes-arrival-seed when it is set, and
// -seed otherwise; the calibration and the knee always take -seed.
func TestShapesArrivalSeed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want uint64
	}{
		{nil, 1},
		{[]string{"-seed=7"}, 7},
		{[]string{"-shapes-arrival-seed=3"}, 3},
		{[]string{"-seed=7", "-shapes-arrival-seed=3"}, 3},
	} {
		o, err := parseFlags(flag.NewFlagSet("goodput", flag.ContinueOnError), tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.shapes.arrivalSeed(o.seed); got != tc.want {
			t.Errorf("%v: arrival seed %d, want %d", tc.args, got, tc.want)
		}
	}
}
