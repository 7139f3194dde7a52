package history

import (
	"encoding/json"
	"math"
	"time"

	"github.com/slogate/slogate/synth"
)

// A stored run, summarised: what the status page's trends and GET /probe/history show
// without reading the report's file, and how the run compares with the one before it.

// Run is one stored probe run.
type Run struct {
	ID       string    `json:"id"` // names the run in GET /probe/history/{id}/report.json
	Workload string    `json:"workload"`
	Label    string    `json:"label,omitempty"`
	Model    string    `json:"model,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Gate     string    `json:"gate"`   // the functional gate: passed, failed or not_run
	Bytes    int64     `json:"bytes"`  // the size of the report's JSON
	Stored   bool      `json:"stored"` // false: writing its file failed, and the run is held in memory only
	Cells    []Cell    `json:"cells"`
	// Previous is the run this one was compared with: the latest run before it of the same
	// workload with the same definition that measured cells; "" when there is none.
	Previous string `json:"previous,omitempty"`
	// Changes are the headline figures of every cell the run shares with Previous (same row
	// and load), as synth.Compare judged them; empty when there is no Previous.
	Changes []Change `json:"changes,omitempty"`
}

// Cell is one cell of a run with its headline figures.
type Cell struct {
	Row   string      `json:"row"`
	Load  string      `json:"load"` // synth.Cell.Load: "4", or "1.1x" for a scan
	State synth.State `json:"state"`
	// Figures are the cell's synth.Headline figures by name (output_tok_per_s,
	// ttft_p95_s, tpot_p95_s); only a valid cell has them, and only finite ones.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// Change is how one headline figure of one cell moved from the previous run.
type Change struct {
	Row    string         `json:"row"`
	Load   string         `json:"load"`
	Figure string         `json:"figure"` // a synth.Headline figure's name
	Base   float64        `json:"base"`   // the previous run's figure; 0 when not valid
	Value  float64        `json:"value"`  // this run's; 0 when not valid
	Delta  float64        `json:"delta"`  // (Value - Base) / Base
	Noise  float64        `json:"noise"`  // the noise band Delta was judged against
	Moved  synth.Movement `json:"moved"`
	// BaseState and State are the cell's states in the previous run and in this one.
	BaseState synth.State `json:"base_state"`
	State     synth.State `json:"state"`
	// Regressed is synth.Regressions' verdict: worse beyond the noise band, or a cell
	// that was valid and no longer is. It is slogate_probe_regression.
	Regressed bool `json:"regressed"`
}

// Regressions returns the changes of r that are regressions.
func (r Run) Regressions() []Change {
	var out []Change
	for _, c := range r.Changes {
		if c.Regressed {
			out = append(out, c)
		}
	}
	return out
}

// summarise returns the Run of rep, without its ID, size or comparison.
func summarise(rep synth.Report) Run {
	r := Run{
		Workload: rep.Workload.Name, Label: rep.Label, Model: rep.Model,
		Started: rep.Started, Finished: rep.Finished, Gate: gateOf(rep.Gate),
		Cells: make([]Cell, 0, len(rep.Cells)),
	}
	for _, c := range rep.Cells {
		cell := Cell{Row: c.Row, Load: c.Load(), State: c.State}
		if c.State == synth.Valid {
			cell.Figures = make(map[string]float64, len(synth.Headline))
			for _, f := range synth.Headline {
				if v := f.Of(c); finite(v) {
					cell.Figures[f.Name] = v
				}
			}
		}
		r.Cells = append(r.Cells, cell)
	}
	return r
}

// gateOf names the outcome of a functional gate.
func gateOf(checks []synth.Check) string {
	switch {
	case len(checks) == 0:
		return "not_run"
	case synth.GatePassed(checks):
		return "passed"
	}
	return "failed"
}

// compare returns every headline figure of every cell cur shares with base, judged by
// synth.Compare with the workload's agreement, the changes synth.Regressions reports
// marked Regressed: the one rule, so that the history and slogate compare never differ.
func compare(base, cur synth.Report) []Change {
	regressed := map[[3]string]bool{}
	for _, r := range synth.Regressions(base, cur) {
		regressed[[3]string{r.Key.Row, r.Key.Load, r.Figure.Name}] = true
	}
	prev := make(map[synth.CellKey]synth.Cell, len(base.Cells))
	for _, c := range base.Cells {
		prev[c.Key()] = c
	}
	var out []Change
	for _, c := range cur.Cells {
		b, ok := prev[c.Key()]
		if !ok {
			continue
		}
		for _, f := range synth.Headline {
			ch := synth.Compare(b, c, f, cur.Workload.Agreement)
			out = append(out, Change{
				Row: c.Row, Load: c.Load(), Figure: f.Name,
				Base: orZero(ch.Base), Value: orZero(ch.Value), Delta: orZero(ch.Delta), Noise: orZero(ch.Noise),
				Moved: ch.Moved, BaseState: ch.BaseSt, State: ch.ValueSt, Regressed: regressed[[3]string{c.Row, c.Load(), f.Name}],
			})
		}
	}
	return out
}

// comparable reports whether two runs measured the same thing: the same workload
// definition (a changed file, or --probe-quick turned on, is a new series) and cells.
func comparable(base, cur synth.Report) bool {
	if len(base.Cells) == 0 || len(cur.Cells) == 0 {
		return false
	}
	a, errA := json.Marshal(base.Workload)
	b, errB := json.Marshal(cur.Workload)
	return errA == nil && errB == nil && string(a) == string(b)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// orZero keeps a figure JSON can carry.
func orZero(v float64) float64 {
	if finite(v) {
		return v
	}
	return 0
}
