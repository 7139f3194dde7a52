package synth

import (
	"math"
	"strconv"
)

// The one rule for comparing two runs of a workload, cell by cell: used by slogate
// compare (package report) and by the sidecar's probe history, which raises
// slogate_probe_regression from it. A cell is named by its row and its load; a headline
// figure moved when its relative change is larger than the noise band, the larger of the
// spread its rounds showed in either run and the workload's agreement.

// Load names a cell's load within its row: its concurrency ("64"), or for a scan its
// multiple of the reference rate ("1.5x").
func (c Cell) Load() string {
	if c.Multiple > 0 {
		return strconv.FormatFloat(c.Multiple, 'f', -1, 64) + "x"
	}
	return strconv.Itoa(c.Concurrency)
}

// CellKey identifies a cell across runs of one workload: its row and its load.
type CellKey struct{ Row, Load string }

// Key returns the cell's CellKey.
func (c Cell) Key() CellKey { return CellKey{Row: c.Row, Load: c.Load()} }

// Figure is a headline figure runs are compared by.
type Figure struct {
	Name         string // as in the report's JSON: output_tok_per_s, ttft_p95_s, tpot_p95_s
	Title        string // for people: "output tok/s"
	HigherBetter bool
	cell         func(Cell) float64
	round        func(Round) float64
}

// Of returns the figure of a cell (its median over the valid rounds).
func (f Figure) Of(c Cell) float64 { return f.cell(c) }

// Headline is the figures comparisons report, in the order they are shown.
var Headline = []Figure{
	{Name: "output_tok_per_s", Title: "output tok/s", HigherBetter: true,
		cell: func(c Cell) float64 { return c.Throughput }, round: func(r Round) float64 { return r.Throughput }},
	{Name: "ttft_p95_s", Title: "TTFT p95",
		cell: func(c Cell) float64 { return c.TTFTp95 }, round: func(r Round) float64 { return r.TTFTp95 }},
	{Name: "tpot_p95_s", Title: "TPOT p95",
		cell: func(c Cell) float64 { return c.TPOTp95 }, round: func(r Round) float64 { return r.TPOTp95 }},
}

// Movement is what became of a figure between a base run and another, a small enum that
// doubles as a label.
type Movement string

const (
	Better       Movement = "better"        // moved beyond the noise band, for the better
	Worse        Movement = "worse"         // moved beyond the noise band, for the worse
	WithinNoise  Movement = "within_noise"  // moved less than the noise band
	StateChanged Movement = "state_changed" // one cell is valid and the other is not, or their states differ
	NotMeasured  Movement = "not_measured"  // neither cell is valid, or the figure is missing in either
)

// Change is how one figure of one cell moved from a base run to another.
type Change struct {
	Figure  Figure
	Base    float64 // the base run's figure; 0 when not valid
	Value   float64 // the other run's figure; 0 when not valid
	Delta   float64 // (Value - Base) / Base; 0 unless both were measured
	Noise   float64 // the noise band Delta is judged against, a share like Delta
	Moved   Movement
	BaseSt  State // the base cell's state
	ValueSt State // the other cell's state
}

// Compare judges figure f of cell cur against the same cell of a base run. agreement
// is the workload's (Workload.Agreement): the floor of the noise band, since a cell of
// one round measured no spread. The noise band is the larger of agreement and the
// relative spread of f over the valid rounds of either cell.
func Compare(base, cur Cell, f Figure, agreement float64) Change {
	ch := Change{Figure: f, BaseSt: base.State, ValueSt: cur.State}
	if base.State == Valid {
		ch.Base = f.cell(base)
	}
	if cur.State == Valid {
		ch.Value = f.cell(cur)
	}
	switch {
	case base.State != cur.State:
		ch.Moved = StateChanged
		return ch
	case base.State != Valid || !measured(ch.Base) || !measured(ch.Value):
		ch.Moved = NotMeasured
		return ch
	}
	ch.Delta = (ch.Value - ch.Base) / ch.Base
	ch.Noise = max(agreement, f.spread(base), f.spread(cur))
	switch {
	case math.Abs(ch.Delta) <= ch.Noise:
		ch.Moved = WithinNoise
	case (ch.Delta > 0) == f.HigherBetter:
		ch.Moved = Better
	default:
		ch.Moved = Worse
	}
	return ch
}

// spread returns the relative spread of f over the valid rounds of c: (max − min) /
// median, 0 with fewer than two.
func (f Figure) spread(c Cell) float64 {
	var xs []float64
	for _, r := range c.Rounds {
		if r.Valid() {
			xs = append(xs, f.round(r))
		}
	}
	return spread(xs)
}

// measured reports whether a figure holds a measurement: positive and finite.
func measured(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// Regressions returns the changes for the worse of every headline figure of every cell
// cur shares with base (same row and load), in cur's order: what a scheduled probe
// reports as slogate_probe_regression. A cell whose state changed from valid to anything
// else is a regression of every figure; one that became valid is not.
func Regressions(base, cur Report) []CellChange {
	prev := make(map[CellKey]Cell, len(base.Cells))
	for _, c := range base.Cells {
		prev[c.Key()] = c
	}
	agreement := cur.Workload.Agreement
	var out []CellChange
	for _, c := range cur.Cells {
		b, ok := prev[c.Key()]
		if !ok {
			continue
		}
		for _, f := range Headline {
			ch := Compare(b, c, f, agreement)
			if ch.Moved == Worse || ch.Moved == StateChanged && b.State == Valid {
				out = append(out, CellChange{Key: c.Key(), Change: ch})
			}
		}
	}
	return out
}

// CellChange is a Change of one cell, named by its key.
type CellChange struct {
	Key CellKey
	Change
}
