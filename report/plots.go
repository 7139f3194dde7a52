package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slogate/slogate/synth"
)

// The charts of the HTML report, built from a Report: throughput and TTFT p95 against
// concurrency (one line per row) for matrices and shapes; completions and TTFT p95
// against the offered rate, with the knee marked, for scans. Only valid cells are
// plotted: a line breaks where a cell was discarded, refused or not run.

// palette colours series in order (Tableau 10).
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// gridSeries makes one series per row of g from figure f of the valid cells, with the
// smallest and largest value plotted (+Inf and 0 when none).
func gridSeries(g grid, f func(synth.Cell) float64, title func(synth.Cell, float64) string) ([]series, float64, float64) {
	lo, hi := math.Inf(1), 0.0
	out := make([]series, len(g.rows))
	for i, row := range g.rows {
		s := series{name: row, color: palette[i%len(palette)]}
		for _, conc := range g.cols {
			p := point{x: float64(conc)}
			if c, ok := g.at(row, conc); ok && c.State == synth.Valid {
				p.y = f(c)
				p.ok = plotted(p.y)
				if p.ok {
					p.title = title(c, p.y)
					lo, hi = min(lo, p.y), max(hi, p.y)
				}
			}
			s.pts = append(s.pts, p)
		}
		out[i] = s
	}
	return out, lo, hi
}

// throughputChart plots total output tok/s against concurrency.
func throughputChart(g grid) chart {
	ss, _, hi := gridSeries(g, func(c synth.Cell) float64 { return c.Throughput }, func(c synth.Cell, v float64) string {
		return fmt.Sprintf("%s × %d: %s tok/s", c.Row, c.Concurrency, fmtTokS(v))
	})
	return chart{
		id: "throughput-plot", title: "Total output tok/s by concurrency",
		xLabel: "simultaneous requests (log scale)", yLabel: "output tok/s",
		x: valueAxis(g.cols), y: linearAxis(0, hi, 5, plainNum), series: ss,
		empty: "No valid cell to plot.",
	}
}

// ttftChart plots TTFT p95 against concurrency on a logarithmic axis.
func ttftChart(g grid) chart {
	ss, lo, hi := gridSeries(g, func(c synth.Cell) float64 { return c.TTFTp95 * 1000 }, func(c synth.Cell, v float64) string {
		return fmt.Sprintf("%s × %d: TTFT p95 %s ms", c.Row, c.Concurrency, sig3(v))
	})
	c := chart{
		id: "ttft-plot", title: "TTFT p95 by concurrency",
		xLabel: "simultaneous requests (log scale)", yLabel: "TTFT p95 (log scale)",
		x: valueAxis(g.cols), series: ss, empty: "No valid cell to plot.",
	}
	if hi > 0 {
		c.y = logAxis(lo, hi, fmtDurationMS)
	}
	return c
}

// scanCharts plots a scan's completions (with the offered rate as a line to compare
// them with) and its TTFT p95, both against the offered rate, with the knee ringed on
// each.
func scanCharts(r synth.Report) (chart, chart) {
	cells := slices.Clone(r.Cells)
	slices.SortStableFunc(cells, func(a, b synth.Cell) int { return cmp.Compare(a.Rate, b.Rate) })
	done := series{name: "completed req/s", color: palette[0]}
	ttft := series{name: "TTFT p95", color: palette[2]}
	hiRate, loT, hiT := 0.0, math.Inf(1), 0.0
	for _, c := range cells {
		valid := c.State == synth.Valid && !math.IsInf(c.Rate, 0) && !math.IsNaN(c.Rate)
		label := fmtMultiple(c.Multiple)
		done.pts = append(done.pts, point{x: c.Rate, y: c.CompletionRate, ok: valid && plotted(c.CompletionRate), label: label,
			title: fmt.Sprintf("%s · offered %s req/s: completed %s req/s", label, fmtReqS(c.Rate), fmtReqS(c.CompletionRate))})
		ms := c.TTFTp95 * 1000
		ttft.pts = append(ttft.pts, point{x: c.Rate, y: ms, ok: valid && plotted(ms), label: label,
			title: fmt.Sprintf("%s · offered %s req/s: TTFT p95 %s ms", label, fmtReqS(c.Rate), sig3(ms))})
		for _, v := range []float64{c.Rate, c.CompletionRate} {
			if plotted(v) {
				hiRate = max(hiRate, v)
			}
		}
		if valid && plotted(ms) {
			loT, hiT = min(loT, ms), max(hiT, ms)
		}
	}
	x := linearAxis(0, hiRate, 5, plainNum)
	comp := chart{
		id: "completion-plot", title: "Completions vs offered rate", xLabel: "offered req/s", yLabel: "completed req/s",
		x: x, y: x, series: []series{done}, empty: "No valid offered rate to plot.",
		refs: []refLine{{label: "offered", dash: "6 4", x1: x.hi, y1: x.hi}},
	}
	lat := chart{
		id: "ttft-plot", title: "TTFT p95 vs offered rate", xLabel: "offered req/s", yLabel: "TTFT p95 (log scale)",
		x: x, series: []series{ttft}, empty: "No valid offered rate to plot.",
	}
	if hiT > 0 {
		lat.y = logAxis(loT, hiT, fmtDurationMS)
	}
	if k, _ := scanKnee(r); k >= 0 && plotted(r.Cells[k].Rate) { // a knee off the chart is not ringed
		c := r.Cells[k]
		m := mark{x: c.Rate, label: "knee " + fmtMultiple(c.Multiple), class: "knee",
			attrs: [][2]string{{"multiple", strconv.FormatFloat(c.Multiple, 'f', -1, 64)}, {"rate", strconv.FormatFloat(c.Rate, 'f', -1, 64)}}}
		if m.y = c.CompletionRate; plotted(m.y) {
			comp.marks = []mark{m}
		}
		if m.y = c.TTFTp95 * 1000; plotted(m.y) {
			lat.marks = []mark{m}
		}
	}
	return comp, lat
}

// plotted reports whether a figure can stand on a chart: positive (a zero was not
// measured, and the axes start at zero or are logarithmic) and finite.
func plotted(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// plainNum labels a linear tick with as many decimals as it has: 0 · 500 · 1,000 · 0.25.
func plainNum(v float64) string {
	_, frac, _ := strings.Cut(strconv.FormatFloat(v, 'f', -1, 64), ".")
	return group(v, len(frac))
}
