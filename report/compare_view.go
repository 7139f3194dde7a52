package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slogate/slogate/synth"
)

// The content both forms of a comparison render: its header, the runs, what differed,
// and per headline figure a table of values and one of changes from the baseline.

// cmpTable is a comparison table as text: a header row, and rows that each start with a
// header cell.
type cmpTable struct {
	id     string // the HTML table's id
	corner string // the header of the header column
	cols   []string
	num    bool // the cells are figures, aligned right
	rows   []cmpRow
}

type cmpRow struct {
	head  string
	cells []cmpCell
}

// cmpCell is one cell of a comparison table.
type cmpCell struct {
	text  string
	best  bool   // the best run of its cell: bold (the text carries the ★)
	class string // HTML class: the movement of a change, or the state of a cell
}

// orient lays out a table whose cells are at(run, cell) for runs × cells. It is the
// issue's layout, a row per run and a column per cell, while there are no more cells
// than runs; otherwise it is transposed, a row per cell and a column per run. A
// comparison has few runs (two to five, typically) and often many cells (a context
// matrix has 16 at the least and can have hundreds): a column per cell would make every
// table tens of columns wide, which neither a Markdown viewer nor a page shows without
// scrolling sideways, while rows cost nothing. So the width is bounded by the fewer of
// the two, which is nearly always the runs.
func orient(id, corner string, runs, cells []string, at func(run, cell int) cmpCell) cmpTable {
	t := cmpTable{id: id, corner: corner, num: true}
	heads, cols, cell := runs, cells, at
	if len(cells) > len(runs) {
		heads, cols = cells, runs
		cell = func(c, r int) cmpCell { return at(r, c) }
	}
	t.cols = cols
	for i, h := range heads {
		row := cmpRow{head: h}
		for j := range cols {
			row.cells = append(row.cells, cell(i, j))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// workloadTitle is the comparison's title: its workload's name.
func (c Comparison) workloadTitle() string { return orDash(c.Runs[0].Report.Workload.Name) }

// compareHeader lists what was compared.
func (c Comparison) compareHeader() []field {
	w := c.Runs[c.Baseline].Report.Workload
	return []field{
		{"Workload", fmt.Sprintf("%s (%s)", orDash(w.Name), orDash(string(w.Kind)))},
		{"Plan", planSummary(w)},
		{"Runs", strconv.Itoa(len(c.Runs))},
		{"Cells", strconv.Itoa(len(c.Cells))},
		{"Baseline", c.Runs[c.Baseline].Name},
	}
}

// runNames lists the runs' names, the baseline's marked.
func (c Comparison) runNames() []string {
	names := make([]string, len(c.Runs))
	for i, r := range c.Runs {
		names[i] = r.Name
		if i == c.Baseline {
			names[i] += " (baseline)"
		}
	}
	return names
}

// runsTable lists the runs: how each is named and what its report records of it.
func (c Comparison) runsTable() cmpTable {
	t := cmpTable{id: "runs", corner: "#", cols: []string{"Run", "Engine", "Version", "Model", "Started", "Report"}}
	for i, r := range c.Runs {
		head := strconv.Itoa(i + 1)
		if i == c.Baseline {
			head += " (baseline)"
		}
		rep := r.Report
		t.rows = append(t.rows, cmpRow{head: head, cells: textCells(r.Name, orDash(rep.Engine), orDash(rep.EngineVersion), orDash(rep.Model),
			fmtTime(rep.Started), orDash(r.Source))})
	}
	return t
}

// flagPrefix starts the What of a Difference in an engine flag.
const flagPrefix = "flag "

// shownFlags is how many differing engine flags a comparison shows unfolded; past it
// (runs of different engines differ in almost every flag) the HTML folds them.
const shownFlags = 12

// differencesTable has a row per difference, the engine's flags (flags) or the rest,
// and a column per run; nil rows when there is none.
func (c Comparison) differencesTable(flags bool) cmpTable {
	t := cmpTable{id: "differences", cols: c.runNames()}
	if flags {
		t.id = "flag-differences"
	}
	for _, d := range c.Differences {
		if strings.HasPrefix(d.What, flagPrefix) != flags {
			continue
		}
		row := cmpRow{head: d.What}
		for _, v := range d.Values {
			row.cells = append(row.cells, cmpCell{text: orDash(v)})
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func textCells(texts ...string) []cmpCell {
	out := make([]cmpCell, len(texts))
	for i, s := range texts {
		out[i] = cmpCell{text: s}
	}
	return out
}

// cellLabels names the comparison's cells: "8K c=64" for a row at a concurrency, "1.5×"
// for a scan's multiple.
func (c Comparison) cellLabels() []string {
	out := make([]string, len(c.Cells))
	for i, k := range c.Cells {
		if m, ok := strings.CutSuffix(k.Load, "x"); ok {
			out[i] = m + "×"
			continue
		}
		out[i] = k.Row + " c=" + k.Load
	}
	return out
}

// cellCorner is the header of a column of cell labels.
func (c Comparison) cellCorner() string {
	if c.Runs[0].Report.Workload.Kind == synth.Scan {
		return "Offered rate"
	}
	return rowHeader(c.Runs[0].Report.Workload.Kind) + " · requests at once"
}

// figureTitle is a figure's name with its unit.
func figureTitle(f synth.Figure) string {
	t := f.Title
	if t != "" {
		t = strings.ToUpper(t[:1]) + t[1:]
	}
	if isSeconds(f) {
		return t + " (ms)"
	}
	return t
}

// isSeconds reports whether a figure is a time, in seconds (ttft_p95_s; not a rate,
// output_tok_per_s), which tables show in ms.
func isSeconds(f synth.Figure) bool {
	return strings.HasSuffix(f.Name, "_s") && !strings.HasSuffix(f.Name, "_per_s")
}

func formatFigure(f synth.Figure, v float64) string {
	if isSeconds(f) {
		return fmtMS(v)
	}
	return fmtTokS(v)
}

// valuesTable has figure f of every run's every cell, the best run of each cell starred.
func (c Comparison) valuesTable(f synth.Figure) cmpTable {
	best := make([][]int, len(c.Cells))
	for j, k := range c.Cells {
		best[j] = c.Best(k, f)
	}
	return orient("values-"+f.Name, c.cellCorner(), c.runNames(), c.cellLabels(), func(i, j int) cmpCell {
		cell, _ := c.Cell(i, c.Cells[j])
		if cell.State != synth.Valid {
			return cmpCell{text: compareState(cell.State), class: "state-" + stateClass(cell.State)}
		}
		v, ok := c.figure(i, c.Cells[j], f)
		switch {
		case !ok:
			return cmpCell{text: dash}
		case slices.Contains(best[j], i):
			return cmpCell{text: "★ " + formatFigure(f, v), best: true, class: "best"}
		}
		return cmpCell{text: formatFigure(f, v)}
	})
}

// deltasTable has each run's change of figure f from the baseline, cell by cell.
func (c Comparison) deltasTable(f synth.Figure) cmpTable {
	var runs []int
	var names []string
	for i, r := range c.Runs {
		if i != c.Baseline {
			runs, names = append(runs, i), append(names, r.Name)
		}
	}
	return orient("deltas-"+f.Name, c.cellCorner(), names, c.cellLabels(), func(i, j int) cmpCell {
		return deltaCell(c.Change(runs[i], c.Cells[j], f))
	})
}

// deltaCell shows a change: "+48% ✓" or "−12% ✗" beyond the noise band, "≈ +3% (noise
// ±6%)" within it, "Valid → rej" for a changed state, and the state (or "—") of a cell
// neither run measured.
func deltaCell(ch synth.Change) cmpCell {
	cell := cmpCell{class: cssToken(string(ch.Moved))}
	switch ch.Moved {
	case synth.Better:
		cell.text = fmtDelta(ch.Delta) + " ✓"
	case synth.Worse:
		cell.text = fmtDelta(ch.Delta) + " ✗"
	case synth.WithinNoise:
		cell.text = "≈ " + fmtDelta(ch.Delta) + " (noise ±" + fmtShare(ch.Noise) + ")"
	case synth.StateChanged:
		cell.text = compareState(ch.BaseSt) + " → " + compareState(ch.ValueSt)
	default:
		cell.text = dash
		if ch.ValueSt != synth.Valid {
			cell.text = compareState(ch.ValueSt)
		}
	}
	return cell
}

// compareState is a state's label in a comparison, where a cell a run lacks is "not run"
// (in a report's own grid it is a blank).
func compareState(s synth.State) string {
	if s == notRun {
		return "not run"
	}
	return stateLabel(s)
}

// fmtDelta formats a relative change with its sign, the minus a real one: +48%, −12%,
// +3.2%, and 0% for what rounds to none.
func fmtDelta(x float64) string {
	switch s := fmtShare(math.Abs(x)); {
	case s == "0%":
		return s
	case x < 0:
		return "−" + s
	default:
		return "+" + s
	}
}

// fmtShare formats a share as a percentage: whole from 10% up, else with one decimal
// ("3.2%", "6%").
func fmtShare(x float64) string {
	if math.Round(x*1000) >= 100 {
		return group(x*100, 0) + "%"
	}
	return strings.TrimSuffix(group(x*100, 1), ".0") + "%"
}

// moveMeanings explains the marks of the changes tables.
var moveMeanings = []field{
	{"✓, ✗", "better or worse than the baseline by more than the noise band"},
	{"≈", "moved less than the noise band: the larger of the workload's agreement and the spread of the figure over the cell's rounds in either run"},
	{"→", "the cell's state changed: the baseline's state, then this run's"},
	{"★", "the best run of the cell, among the runs that measured it"},
}

// compareLegendStates returns the states other than Valid that occur in the comparison.
func (c Comparison) compareLegendStates() []synth.State {
	present := map[synth.State]bool{}
	for i := range c.Runs {
		for _, k := range c.Cells {
			cell, _ := c.Cell(i, k)
			present[cell.State] = true
		}
	}
	return legendStates(present)
}

// sameText says that nothing the reports record differed.
const sameText = "Nothing the reports record of how the runs were made differs: engine, version, model, target, KV capacity, plan and engine flags are the same (or unrecorded) in every run."

// valuesCaption and deltasCaption explain a figure's two tables.
func valuesCaption(f synth.Figure) string {
	which := "highest"
	if !f.HigherBetter {
		which = "lowest"
	}
	return fmt.Sprintf("%s of each cell: the median over its rounds without failures; ★ marks the best run (the %s), a state what became of a cell that is not valid.",
		figureTitle(f), which)
}

func (c Comparison) deltasCaption() string {
	return fmt.Sprintf("Change from the baseline, %s.", c.Runs[c.Baseline].Name)
}
