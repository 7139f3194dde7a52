package status

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slogate/slogate/history"
	"github.com/slogate/slogate/synth"
)

// The probe history section: per workload, its stored runs newest first, and for each
// cell of the newest run the trend of every headline figure over the runs (a sparkline)
// with its move from the run before as synth judged it; regressions are marked.

// HistorySource is the probe history (*history.Store).
type HistorySource interface{ Runs() []history.Run }

// How much of a history the page shows; GET /probe/history has it all.
const (
	maxHistoryRuns  = 20
	maxHistoryCells = 64
)

// historyPart is the probe history section.
type historyPart struct {
	Off       bool // the sidecar keeps no history
	Workloads []historyWorkload
}

// historyWorkload is one workload's stored runs and trends.
type historyWorkload struct {
	Name, ID    string
	Runs        []historyRun // newest first
	MoreRuns    int          // stored but not shown
	Figures     []string     // the headline figures' titles, the trend table's columns
	Cells       []historyCell
	MoreCells   int
	Regressions int // of the newest run
	Previous    string
}

// historyRun is one row of the runs table.
type historyRun struct {
	ID, Link, Finished, Label, Gate, GateClass, Cells, Previous string
	Regressions                                                 int
}

// historyCell is one cell's trend row.
type historyCell struct {
	Name, ID  string
	Regressed bool
	Figures   []historyFigure
}

// historyFigure is one figure of one cell: its latest value, its move, its trend.
type historyFigure struct {
	Value, Move, Class, Title string
	Trend                     template.HTML
}

func historyView(src HistorySource, now time.Time) historyPart {
	if src == nil {
		return historyPart{Off: true}
	}
	var part historyPart
	byWorkload := map[string][]history.Run{}
	var order []string
	for _, r := range src.Runs() { // newest first
		if _, ok := byWorkload[r.Workload]; !ok {
			order = append(order, r.Workload)
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	for _, name := range order {
		part.Workloads = append(part.Workloads, workloadHistory(name, byWorkload[name], now))
	}
	return part
}

func workloadHistory(name string, runs []history.Run, now time.Time) historyWorkload {
	w := historyWorkload{Name: name, ID: token(name)}
	for i, r := range runs {
		if i == maxHistoryRuns {
			w.MoreRuns = len(runs) - i
			break
		}
		valid := 0
		for _, c := range r.Cells {
			if c.State == synth.Valid {
				valid++
			}
		}
		hr := historyRun{
			ID: r.ID, Link: "probe/history/" + r.ID + "/report.html", Finished: fmtTime(r.Finished, now),
			Label: r.Label, Gate: strings.ReplaceAll(r.Gate, "_", " "),
			Cells: fmt.Sprintf("%d of %d", valid, len(r.Cells)), Previous: r.Previous, Regressions: len(r.Regressions()),
		}
		switch r.Gate {
		case "passed":
			hr.GateClass = "good"
		case "failed":
			hr.GateClass = "bad"
		}
		if r.Label == "" {
			hr.Label = unknownDash
		}
		if r.Previous == "" {
			hr.Previous = unknownDash
		}
		w.Runs = append(w.Runs, hr)
	}
	for _, f := range synth.Headline {
		w.Figures = append(w.Figures, f.Title)
	}
	newest := runs[0]
	w.Regressions, w.Previous = len(newest.Regressions()), newest.Previous
	changes := map[[3]string]history.Change{}
	for _, c := range newest.Changes {
		changes[[3]string{c.Row, c.Load, c.Figure}] = c
	}
	for i, c := range newest.Cells {
		if i == maxHistoryCells {
			w.MoreCells = len(newest.Cells) - i
			break
		}
		hc := historyCell{Name: c.Row + " × " + c.Load, ID: token(c.Row + "-" + c.Load)}
		for _, f := range synth.Headline {
			ch, compared := changes[[3]string{c.Row, c.Load, f.Name}]
			hf := historyFigure{Value: string(c.State), Trend: sparkline(trend(runs, c, f), f.Title)}
			if v := c.Figures[f.Name]; v > 0 {
				hf.Value = fmtFigure(f, v)
			}
			if compared {
				hf.Move, hf.Class, hf.Title = move(f, ch)
				hc.Regressed = hc.Regressed || ch.Regressed
			}
			hc.Figures = append(hc.Figures, hf)
		}
		w.Cells = append(w.Cells, hc)
	}
	return w
}

// trend returns figure f of cell c over runs (given newest first), oldest first; NaN
// where a run did not measure it.
func trend(runs []history.Run, c history.Cell, f synth.Figure) []float64 {
	n := min(len(runs), maxHistoryRuns)
	out := make([]float64, 0, n)
	for i := n - 1; i >= 0; i-- {
		v := math.NaN()
		for _, rc := range runs[i].Cells {
			if rc.Row == c.Row && rc.Load == c.Load {
				if x, ok := rc.Figures[f.Name]; ok && x > 0 {
					v = x
				}
				break
			}
		}
		out = append(out, v)
	}
	return out
}

// move describes a change: an arrow for the direction of the figure, a class for
// better or worse, and the numbers as a tooltip.
func move(f synth.Figure, ch history.Change) (arrow, class, title string) {
	delta := strconv.FormatFloat(100*ch.Delta, 'f', 1, 64) + "%"
	if ch.Delta > 0 {
		delta = "+" + delta
	}
	title = fmt.Sprintf("%s: %s → %s (%s, noise band ±%s)", f.Title, fmtFigure(f, ch.Base), fmtFigure(f, ch.Value), delta, fmtPct(ch.Noise))
	switch ch.Moved {
	case synth.WithinNoise:
		arrow = "≈"
	case synth.Better, synth.Worse:
		arrow = "↓"
		if ch.Delta > 0 {
			arrow = "↑"
		}
	case synth.StateChanged:
		arrow, title = "≠", fmt.Sprintf("%s: the cell was %s, now %s", f.Title, ch.BaseState, ch.State)
	}
	switch {
	case ch.Regressed:
		class = "bad"
	case ch.Moved == synth.Better:
		class = "good"
	}
	return arrow, class, title
}

// fmtFigure writes a headline figure: a throughput as tok/s, a latency as a duration.
func fmtFigure(f synth.Figure, v float64) string {
	switch {
	case !(v > 0) || math.IsInf(v, 0):
		return unknownDash
	case f.HigherBetter:
		return fmtNum(v) + " tok/s"
	}
	return fmtDur(time.Duration(v * float64(time.Second)))
}

// Sparkline size, in pixels.
const sparkW, sparkH = 72.0, 16.0

// sparkline draws values (oldest first; NaN: not measured) as a small inline SVG line,
// scaled to its own range, the newest value marked; empty with fewer than two
// measured values.
func sparkline(values []float64, title string) template.HTML {
	lo, hi, measured := math.Inf(1), math.Inf(-1), 0
	for _, v := range values {
		if !math.IsNaN(v) {
			lo, hi, measured = min(lo, v), max(hi, v), measured+1
		}
	}
	if measured < 2 {
		return ""
	}
	x := func(i int) float64 { return 1 + float64(i)*(sparkW-2)/float64(len(values)-1) }
	y := func(v float64) float64 {
		if hi == lo {
			return sparkH / 2
		}
		return sparkH - 2 - (v-lo)/(hi-lo)*(sparkH-4)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" width="%g" height="%g" viewBox="0 0 %g %g" role="img"><title>%s over %d runs</title>`,
		sparkW, sparkH, sparkW, sparkH, html.EscapeString(title), len(values))
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s"/>`, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for i, v := range values {
		if math.IsNaN(v) {
			flush()
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
	}
	flush()
	if last := values[len(values)-1]; !math.IsNaN(last) {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.8"/>`, x(len(values)-1), y(last))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and an escaped title only
}
