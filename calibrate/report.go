package calibrate

import (
	"github.com/slogate/slogate/synth"
)

// Reports returns one prober report per tier: its points as the cells of a rate scan,
// with the knee the calibration chose marked, so the prober's report writers plot
// throughput and p95 TTFT against the offered rate with the knee on them.
func (r Result) Reports() []synth.Report {
	var out []synth.Report
	for _, t := range r.Tiers {
		rep := synth.Report{
			Schema: synth.SchemaVersion, Target: r.Target, Model: r.Model, Engine: r.Engine,
			Started: r.Started, Finished: r.Finished, Reference: t.Reference,
			Workload: synth.Workload{Name: "calibration-" + t.Tier, Kind: synth.Scan, Shapes: []synth.Shape{t.Shape}, ReferenceRate: t.Reference},
		}
		for _, p := range t.Points {
			rep.Cells = append(rep.Cells, cell(t, p))
		}
		if t.Knee >= 0 {
			rep.Knee = &synth.KneeMark{Rate: t.KneeRate, Rule: t.Rule}
		}
		out = append(out, rep)
	}
	return out
}

// cell is one measured point as a scan cell.
func cell(t TierResult, p Point) synth.Cell {
	c := synth.Cell{
		Row: t.Tier, Input: t.Shape.Input, Output: t.Shape.Output, Nominal: p.Offered, Rate: p.Offered,
		State: synth.Valid, CompletionRate: p.Throughput, SuccessRate: p.Completion,
		TTFTp50: p.TTFTp50.Seconds(), TTFTp95: p.TTFTp95.Seconds(), TPOTp95: p.TPOTp95.Seconds(),
	}
	if t.Reference > 0 {
		c.Multiple = p.Offered / t.Reference
	}
	if ok, why := Sustainable(p, nil, t.SLO); !ok {
		c.Detail = why
	}
	c.Throughput = p.Throughput * float64(t.Shape.Output)
	return c
}
