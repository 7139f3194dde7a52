package calibrate

import (
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

func TestPlanOnly(t *testing.T) {
	plan, err := DefaultPlan(admission.DefaultConfig(), measure.SLO{TTFT: measure.Duration(2 * time.Second)}, 131072, 128)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		names, want, err string
	}{
		{names: "", want: "short,medium,long,xlong"},
		{names: "medium", want: "medium"},
		{names: " long , short", want: "long,short"},
		{names: "huge", err: `no tier "huge"`},
	}
	for _, tt := range tests {
		got, err := plan.Only(tt.names)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Only(%q): err %v, want %q", tt.names, err, tt.err)
			}
			continue
		}
		var names []string
		for _, tp := range got.Tiers {
			names = append(names, tp.Tier.Name)
		}
		if err != nil || strings.Join(names, ",") != tt.want {
			t.Errorf("Only(%q) = %v, %v; want %s", tt.names, names, err, tt.want)
		}
	}
}

// calibrated is a result of two tiers, one calibrated and one not.
func calibrated(knee float64) Result {
	p := Point{Offered: knee, Throughput: knee, Completion: 1, TTFTp50: 200 * time.Millisecond, MeanE2E: 4 * time.Second}
	slo := measure.NewSLO(2*time.Second, 100*time.Millisecond)
	lim := deriveLimits(p, p.TTFTp50, 0, slo)
	lim.Name, lim.MaxInputTokens = "short", 2048
	return Result{
		Started: time.Unix(1700000000, 0).UTC(), Finished: time.Unix(1700000600, 0).UTC(), Target: "http://engine:8000", Model: "m",
		Precision: Plan{}.Quick().Precision(),
		Tiers: []TierResult{
			{Tier: "short", Shape: synth.Shape{Name: "short", Input: 1536, Output: 128}, SLO: slo, Reference: knee * 1.2,
				Points: []Point{p}, Knee: 0, KneeRate: knee, Rule: "only point", Limits: &lim},
			{Tier: "long", Knee: -1, Err: "no measured rate was sustainable"},
		},
	}
}

func TestOutcomeFromConfig(t *testing.T) {
	base := admission.Config{Tiers: []admission.TierConfig{
		{Name: "short", MaxInputTokens: 2048, MaxInFlight: 64, MaxQueue: 8},
		{Name: "long", MaxInFlight: 2, MaxQueue: 1},
	}}
	cfg, err := calibrated(3).Config(base)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := WriteConfig(&text, cfg, calibrated(3)); err != nil {
		t.Fatal(err)
	}
	loaded, err := admission.ParseConfig([]byte(text.String()))
	if err != nil {
		t.Fatalf("the written tiers file does not load: %v\n%s", err, text.String())
	}
	o, ok := FromConfig(loaded)
	if !ok {
		t.Fatalf("FromConfig found no calibration in\n%s", text.String())
	}
	if want := "# Measured with " + calibrated(3).Precision + ".\n"; !strings.Contains(text.String(), want) || o.Result.Precision != calibrated(3).Precision {
		t.Errorf("the tiers file does not record the calibration's precision %q in its header and provenance (read back %q):\n%s", want, o.Result.Precision, text.String())
	}
	if !o.Applied || !o.Result.Finished.Equal(time.Unix(1700000600, 0)) || o.Result.Tiers[0].KneeRate != 3 {
		t.Errorf("outcome %+v, want the applied calibration of 3 req/s", o.Result)
	}
	got := o.Calibrated()
	if len(got) != 1 || got[0].Name != "short" || got[0].Rate != 2.7 || got[0].MaxInFlight != 24 {
		t.Errorf("Calibrated() = %+v, want the short tier at 2.7 req/s and 24 in flight", got)
	}
	if _, ok := FromConfig(base); ok {
		t.Errorf("FromConfig found a calibration in a file without one")
	}

	o.Previous = map[string]float64{"short": 4, "long": 1}
	if r, ok := o.KneeChange("short"); !ok || r != 0.75 {
		t.Errorf("KneeChange(short) = %v, %v; want 0.75", r, ok)
	}
	if _, ok := o.KneeChange("long"); ok {
		t.Errorf("KneeChange(long) known for a tier without a knee")
	}
}

// TestReportsMarkTheKnee: each tier's report carries the knee the calibration chose,
// and one without a rate where it chose none, so that no report finds a knee of its own.
func TestReportsMarkTheKnee(t *testing.T) {
	reps := calibrated(3).Reports()
	if len(reps) != 2 {
		t.Fatalf("%d reports, want one per tier", len(reps))
	}
	if k := reps[0].Knee; k == nil || k.Rate != 3 || k.Rule != "only point" {
		t.Errorf("short tier's report marks %+v, want its knee at 3 req/s", k)
	}
	if k := reps[1].Knee; k == nil || k.Rate > 0 {
		t.Errorf("long tier's report marks %+v, want a mark of no knee", k)
	}
}
