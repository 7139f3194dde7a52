package calibrate

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// FuzzFromConfig feeds arbitrary tiers files to the reader of the calibration they
// record (admission.ParseConfig, then FromConfig), the path a tiers file written by
// `slogate calibrate`, or edited by hand, takes into `slogate serve`. What it accepts is
// an applied outcome with a finish time and a knee; its calibrated tiers are tiers of
// the file; it makes one report per tier (package report's FuzzCalibrationReports
// renders them as the sidecar serves them); and written back as a tiers file it reads
// back as the same calibration.
func FuzzFromConfig(f *testing.F) {
	base := admission.Config{Tiers: []admission.TierConfig{
		{Name: "short", MaxInputTokens: 2048, MaxInFlight: 64, MaxQueue: 8},
		{Name: "long", MaxInFlight: 2, MaxQueue: 1},
	}}
	scan := calibrated(3)
	scan.Tiers[0].Points = []Point{
		{Target: 1, Offered: 1, Throughput: 1, Completion: 1, TTFTp50: time.Second / 5, TTFTp95: time.Second / 2, MeanE2E: 3 * time.Second},
		{Target: 2, Offered: 2, Throughput: 1.9, Completion: 0.99, TTFTp95: time.Second, TPOTp95: 50 * time.Millisecond},
		{Target: 3, Offered: 3, Throughput: 2.1, Completion: 0.9, TTFTp95: 9 * time.Second},
	}
	scan.Tiers[0].Knee, scan.Tiers[0].KneeRate, scan.Tiers[0].Kneedle = 1, 2, 2.2
	for _, r := range []Result{calibrated(3), scan} {
		cfg, err := r.Config(base)
		if err != nil {
			f.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteConfig(&b, cfg, r); err != nil {
			f.Fatal(err)
		}
		f.Add(flowYAML(f, b.Bytes()))
	}
	for _, s := range []string{
		"tiers: [{name: a, max_in_flight: 1}]\n",
		"tiers: [{name: a, max_in_flight: 1}]\ncalibration: {finished: 2024-01-02T03:04:05Z, tiers: [{tier: a, knee: 7, knee_rps: 2, points: []}]}\n",
		"tiers: [{name: a, max_in_flight: 1}]\ncalibration: {finished: 2024-01-02T03:04:05Z, tiers: [{tier: a, knee: 0, knee_rps: .nan, points: [{offered_rps: .inf}]}]}\n",
		"tiers: [{name: a, max_in_flight: 1}]\ncalibration: {finished: 2024-01-02T03:04:05+02:00, target: \"a\\nb\", model: \"#\", tiers: [{tier: a, knee: 0, knee_rps: 1}, {tier: a, knee: 0, knee_rps: 2}]}\n",
		"tiers: [{name: a, max_in_flight: 1}]\ncalibration: {finished: 1, tiers: 2}\n",
		"tiers: [&t {name: a, max_in_flight: 1}]\ncalibration: {finished: 2024-01-02T03:04:05Z, tiers: [{tier: a, knee: 0, knee_rps: 1, shape: *t}]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := admission.ParseConfig(data)
		if err != nil {
			return
		}
		o, ok := FromConfig(cfg)
		if !ok {
			return
		}
		knees := o.Result.Knees()
		if !o.Applied || o.Result.Finished.IsZero() || len(knees) == 0 {
			t.Fatalf("FromConfig accepted an outcome without a finish time or a knee: %+v", o)
		}
		for _, tc := range o.Calibrated() {
			if _, ok := knees[tc.Name]; !ok || !slices.ContainsFunc(cfg.Tiers, func(c admission.TierConfig) bool { return c.Name == tc.Name }) {
				t.Fatalf("Calibrated() gives tier %q, which is not a calibrated tier of the file", tc.Name)
			}
			o.KneeChange(tc.Name)
		}
		if reps := o.Result.Reports(); len(reps) != len(o.Result.Tiers) {
			t.Fatalf("Reports() gives %d reports for %d tiers", len(reps), len(o.Result.Tiers))
		}
		checkWrittenBack(t, cfg, o.Result)
	})
}

// flowYAML returns a YAML document in flow style, without comments: a small seed. The
// fuzzer minimises every input it finds new coverage with by removing ranges of its
// bytes, which takes long for a block-style tiers file of a few kilobytes.
func flowYAML(f *testing.F, doc []byte) []byte {
	var n yaml.Node
	if err := yaml.Unmarshal(doc, &n); err != nil {
		f.Fatal(err)
	}
	var flow func(*yaml.Node)
	flow = func(n *yaml.Node) {
		n.Style &^= yaml.LiteralStyle | yaml.FoldedStyle
		n.Style |= yaml.FlowStyle
		n.HeadComment, n.LineComment, n.FootComment = "", "", ""
		for _, c := range n.Content {
			flow(c)
		}
	}
	flow(&n)
	out, err := yaml.Marshal(&n)
	if err != nil {
		f.Fatal(err)
	}
	return out
}

// checkWrittenBack writes cfg with r as its calibration, as the sidecar serves the tiers
// file of its latest calibration, and checks that it reads back as the same calibration.
func checkWrittenBack(t *testing.T, cfg admission.Config, r Result) {
	t.Helper()
	// The calibration node read may hold aliases of anchors elsewhere in the file; the
	// result decoded from it is what is written.
	cfg.Calibration = yaml.Node{}
	if err := cfg.Calibration.Encode(r); err != nil {
		t.Fatalf("encoding the calibration: %v", err)
	}
	var b bytes.Buffer
	if err := WriteConfig(&b, cfg, r); err != nil {
		t.Fatalf("WriteConfig: %v", err)
	}
	again, err := admission.ParseConfig(b.Bytes())
	if err != nil {
		t.Fatalf("the written tiers file does not load: %v\n%s", err, b.Bytes())
	}
	o2, ok := FromConfig(again)
	if !ok {
		t.Fatalf("the written tiers file records no calibration:\n%s", b.Bytes())
	}
	want, err1 := yaml.Marshal(r)
	got, err2 := yaml.Marshal(o2.Result)
	if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
		t.Fatalf("written back, the calibration reads as\n%s\nnot\n%s(%v, %v)", got, want, err1, err2)
	}
	if len(again.Tiers) != len(cfg.Tiers) {
		t.Fatalf("written back, the file has %d tiers, not %d:\n%s", len(again.Tiers), len(cfg.Tiers), b.Bytes())
	}
}

// FuzzPlanOnly feeds arbitrary --only lists to Plan.Only: it either fails, with a
// message naming the tier it did not find, or returns the named tiers of the plan, each
// once, in the order first named; an empty list keeps the whole plan.
func FuzzPlanOnly(f *testing.F) {
	plan, err := DefaultPlan(admission.DefaultConfig(), measure.SLO{TTFT: measure.Duration(2 * time.Second)}, 131072, 128)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", " ", "short", "medium", " long , short", "short,short", "huge", "short,", ",", "xlong,long,medium,short", "SHORT", "short\t,\nlong"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, names string) {
		got, err := plan.Only(names)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "no tier") || len(got.Tiers) != 0 {
				t.Fatalf("Only(%q) = %d tiers, %q", names, len(got.Tiers), msg)
			}
			return
		}
		if strings.TrimSpace(names) == "" {
			if len(got.Tiers) != len(plan.Tiers) {
				t.Fatalf("Only(%q) keeps %d of %d tiers", names, len(got.Tiers), len(plan.Tiers))
			}
			return
		}
		var want []string
		for _, n := range strings.Split(names, ",") {
			if n = strings.TrimSpace(n); !slices.Contains(want, n) {
				want = append(want, n)
			}
		}
		var have []string
		for _, tp := range got.Tiers {
			i := slices.IndexFunc(plan.Tiers, func(p TierPlan) bool { return p.Tier.Name == tp.Tier.Name })
			if i < 0 || plan.Tiers[i].Shape != tp.Shape {
				t.Fatalf("Only(%q) gives tier %+v, which is not the plan's", names, tp)
			}
			have = append(have, tp.Tier.Name)
		}
		if !slices.Equal(have, want) {
			t.Fatalf("Only(%q) gives tiers %q, want %q", names, have, want)
		}
	})
}
