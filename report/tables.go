package report

import (
	"strconv"

	"github.com/slogate/slogate/synth"
)

// table is a report table as text: the same cells go into Markdown and HTML.
type table struct {
	head []string
	num  []bool // numeric columns, aligned right
	rows []tableRow
}

// tableRow is one row of a table.
type tableRow struct {
	cells []string
	class string // HTML row classes, e.g. "state-valid knee"
}

// prefillTable lists the single-request prefill speed at each context, as the published H200 matrix does.
func prefillTable(r synth.Report) table {
	t := table{
		head: []string{"Context", "Prompt tok/s", "TTFT (ms)", "Status"},
		num:  []bool{false, true, true, false},
	}
	for _, p := range r.Prefill {
		status, class := "Valid", "state-valid"
		if p.Failure != "" {
			status, class = "Failed: "+p.Failure, "state-failed"
		}
		t.rows = append(t.rows, tableRow{
			cells: []string{synth.ContextLabel(p.Context), fmtTokS(p.TokPerS), fmtMS(p.TTFT), status},
			class: class,
		})
	}
	return t
}

// gridTable is the decode (or shapes) matrix: total output tok/s of each valid cell,
// the state's label otherwise. A valid figure whose rounds disagreed carries a "†". It
// also returns the states that occur, and whether any figure carries the "†".
func gridTable(g grid) (table, map[synth.State]bool, bool) {
	t := table{head: append([]string{g.rowHead}, intStrings(g.cols)...), num: make([]bool, len(g.cols)+1)}
	present := map[synth.State]bool{}
	starred := false
	for i := range g.cols {
		t.num[i+1] = true
	}
	for _, row := range g.rows {
		cells := []string{row}
		for _, conc := range g.cols {
			c, ok := g.at(row, conc)
			switch {
			case !ok:
				cells = append(cells, dash)
				present[notRun] = true
			case c.State == synth.Valid:
				s := fmtTokS(c.Throughput)
				if disagreed(c) {
					s, starred = s+"†", true
				}
				cells = append(cells, s)
				present[synth.Valid] = true
			default:
				cells = append(cells, stateLabel(c.State))
				present[c.State] = true
			}
		}
		t.rows = append(t.rows, tableRow{cells: cells})
	}
	return t, present, starred
}

// starMeaning explains the "†" of gridTable.
const starMeaning = "the rounds disagreed by more than the workload's agreement; see Rounds agreed below"

// scanTable lists a scan's offered rates, as the published H20-3e scan does: what was offered, what
// completed, and the latencies. The knee's row is marked.
func scanTable(r synth.Report) table {
	t := table{
		head: []string{"Multiple", "Offered req/s", "Completed req/s", "Completed / offered", "TTFT p95 (ms)", "TPOT p95 (ms)", "Output tok/s", "Success", "Status"},
		num:  []bool{true, true, true, true, true, true, true, true, false},
	}
	knee, _ := scanKnee(r)
	for i, c := range r.Cells {
		row := tableRow{class: "state-" + stateClass(c.State)}
		status := stateLabel(c.State)
		if i == knee {
			status += " · knee"
			row.class += " knee"
		}
		kept, done := dash, dash
		if c.State == synth.Valid {
			done = fmtReqS(c.CompletionRate)
			if c.Rate > 0 {
				kept = fmtPct(c.CompletionRate / c.Rate)
			}
		}
		perf := validOnly(c, fmtMS(c.TTFTp95), fmtMS(c.TPOTp95), fmtTokS(c.Throughput))
		row.cells = append([]string{fmtMultiple(c.Multiple), fmtReqS(c.Rate), done, kept}, perf...)
		row.cells = append(row.cells, successRate(c), status)
		t.rows = append(t.rows, row)
	}
	return t
}

// validOnly returns figures for a valid cell, and dashes for any other: the figures of
// a looped or failed cell were discarded.
func validOnly(c synth.Cell, figures ...string) []string {
	if c.State != synth.Valid {
		for i := range figures {
			figures[i] = dash
		}
	}
	return figures
}

// successRate is a cell's success rate over the requests that were judged (not cut).
func successRate(c synth.Cell) string {
	judged := 0
	for _, r := range c.Rounds {
		judged += r.Sent - r.Cut
	}
	if judged <= 0 {
		return dash
	}
	return fmtPct(c.SuccessRate)
}

// roundsAgreed says whether a valid cell's rounds agreed: "✓ 2.1%" or "✗ 8.4%" with
// the spread of their throughput; "—" with fewer than two valid rounds.
func roundsAgreed(c synth.Cell) string {
	if c.State != synth.Valid || validRounds(c) < 2 {
		return dash
	}
	if c.Agreed {
		return "✓ " + fmtPct(c.Spread)
	}
	return "✗ " + fmtPct(c.Spread)
}

// measurementsTable has one row per measurement, with the columns of the published H200 matrix's "All
// measurements": a matrix's prefill rows first, then every cell in the order it ran.
func measurementsTable(r synth.Report) table {
	kind := r.Workload.Kind
	load := "Requests at once"
	if kind == synth.Scan {
		load = "Offered rate"
	}
	t := table{
		head: []string{rowHeader(kind), load, "Status", "Total tok/s", "Per-request tok/s", "TTFT p50 (ms)", "TTFT p95 (ms)",
			"TPOT p95 (ms)", "ITL p50 (ms)", "Avg active", "Completed", "Output tokens", "Success", "Rounds agreed", "Detail"},
		num: []bool{false, true, false, true, true, true, true, true, true, true, true, true, true, false, false},
	}
	if kind == synth.Matrix {
		t.head = append([]string{"Phase"}, t.head...)
		t.num = append([]bool{false}, t.num...)
		for _, p := range r.Prefill {
			t.rows = append(t.rows, prefillMeasurement(p))
		}
	}
	for _, c := range r.Cells {
		row := cellMeasurement(c, kind)
		if kind == synth.Matrix {
			row.cells = append([]string{"Sustained decode"}, row.cells...)
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// prefillMeasurement is a prefill as a measurement row: one request, whose prompt tok/s
// stand in the throughput column and whose TTFT is the p50.
func prefillMeasurement(p synth.Prefill) tableRow {
	status, class, done, detail := "Valid", "state-valid", "1", "prompt tok/s of one request"
	if p.Failure != "" {
		status, class, done, detail = "Failed", "state-failed", "0", p.Failure
	}
	cells := []string{"Prefill", synth.ContextLabel(p.Context), "1", status, fmtTokS(p.TokPerS), dash, fmtMS(p.TTFT), dash,
		dash, dash, dash, done, dash, dash, dash, detail}
	return tableRow{cells: cells, class: class}
}

// cellMeasurement is one cell's row of measurementsTable (without the phase).
func cellMeasurement(c synth.Cell, kind synth.Kind) tableRow {
	load := strconv.Itoa(c.Concurrency)
	if kind == synth.Scan {
		load = fmtMultiple(c.Multiple) + " · " + fmtReqS(c.Rate) + " req/s"
	}
	cells := []string{c.Row, load, stateLabel(c.State)}
	cells = append(cells, validOnly(c, fmtTokS(c.Throughput), fmtTokS(c.PerRequestTPS), fmtMS(c.TTFTp50), fmtMS(c.TTFTp95),
		fmtMS(c.TPOTp95), fmtMS(c.ITLp50), whenPositive(c.ActiveAvg, func(v float64) string { return group(v, 1) }))...)
	if len(c.Rounds) > 0 {
		cells = append(cells, fmtInt(c.Completed), fmtInt(c.OutputToks), successRate(c))
	} else {
		cells = append(cells, dash, dash, dash)
	}
	cells = append(cells, roundsAgreed(c), orDash(c.Detail))
	return tableRow{cells: cells, class: "state-" + stateClass(c.State)}
}
