package calibrate

import (
	"cmp"
	"math"
	"slices"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// Reports returns one prober report per tier: its points as the cells of a rate scan,
// with the knee the calibration chose under the tier's SLO marked (Report.Knee, with no
// Rate where it found none) and its rule, so that the report writers (package report)
// plot throughput and p95 TTFT against the offered rate with this knee on them.
func (r Result) Reports() []synth.Report {
	var out []synth.Report
	for _, t := range r.Tiers {
		rep := synth.Report{
			Schema: synth.SchemaVersion, Target: r.Target, Model: r.Model, Engine: r.Engine,
			EngineVersion: r.EngineVersion, EngineFlags: r.EngineFlags,
			Started: r.Started, Finished: r.Finished, Reference: t.Reference,
			Workload: synth.Workload{Name: "calibration-" + t.Tier, Kind: synth.Scan, Shapes: []synth.Shape{t.Shape}, ReferenceRate: t.Reference},
		}
		for _, p := range t.Points {
			rep.Cells = append(rep.Cells, cell(t, p))
		}
		rep.Knee = &synth.KneeMark{Rule: t.Rule} // no Rate: no knee
		if t.Knee >= 0 {
			rep.Knee.Rate = t.KneeRate
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
	if ok, why := sustainable(p, nil, t.SLO); !ok {
		c.Detail = why
	}
	c.Throughput = p.Throughput * float64(t.Shape.Output)
	return c
}

// ScanKnee returns the knee of a rate scan's cells by the calibration's rule (see the
// package doc) under slo: the index in cells of the knee (-1 for none) and the rule's
// reason in words, as a calibration records it (TierResult.Rule). The
// valid cells enter in order of offered rate, each as the point Reports makes that cell
// of (offered rate, completions per second, its success rate as the share of requests
// completed, and the latencies); a cell of any other state, or without a positive and
// finite offered rate, was not measured and does not enter. A calibration's reports
// carry the knee it chose; ScanKnee is for a scan that carries none, such as a probe's.
func ScanKnee(cells []synth.Cell, slo measure.SLO) (int, string) {
	var valid []int
	for i, c := range cells {
		if c.State == synth.Valid && c.Rate > 0 && !math.IsInf(c.Rate, 1) {
			valid = append(valid, i)
		}
	}
	slices.SortStableFunc(valid, func(a, b int) int { return cmp.Compare(cells[a].Rate, cells[b].Rate) })
	points := make([]Point, len(valid))
	for j, i := range valid {
		points[j] = point(cells[i])
	}
	k, rule := kneeOf(points, slo)
	if k < 0 {
		return -1, rule
	}
	return valid[k], rule
}

// point is a scan cell as the point it stands for, the inverse of cell but for what a
// cell does not carry (the rate asked for and the mean E2E).
func point(c synth.Cell) Point {
	return Point{
		Offered: c.Rate, Throughput: c.CompletionRate, Completion: c.SuccessRate,
		TTFTp50: secs(c.TTFTp50), TTFTp95: secs(c.TTFTp95), TPOTp95: secs(c.TPOTp95),
	}
}
