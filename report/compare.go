package report

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/slogate/slogate/synth"
)

// A comparison sets runs of one workload side by side, cell by cell, for slogate compare:
// the headline figures of every run, the best run of each cell, and each run's changes
// from a baseline run judged by synth.Compare, the one rule for comparing runs (the
// sidecar's probe history raises slogate_probe_regression by the same rule). It is
// written in the report's forms: Markdown, HTML and JSON (CompareSchema).

// Run is one run of a comparison: a probe report and how the comparison names it.
type Run struct {
	Name   string // its label, else its engine, version, model and start (RunName)
	Source string // the file it was read from; "" for a report built in memory
	Report synth.Report
}

// Comparison is runs of one workload, a baseline among them, and the cells they
// measured. Build it with NewComparison.
type Comparison struct {
	Runs []Run
	// Baseline is the index in Runs of the run the changes are against (FindRun reads
	// it from a person's words); NewComparison sets 0, the first.
	Baseline int
	// Cells are the cells any run has, in the order the runs measured them: the first
	// run's, then those only later runs reached.
	Cells []synth.CellKey
	// Differences are what the reports record of how each run was made and that is not
	// the same in all of them: engine, version, model, target, KV capacity, plan, and
	// each engine flag.
	Differences []Difference
	cells       []map[synth.CellKey]synth.Cell // per run
}

// Difference is one fact about how the runs were made whose value differs between them.
type Difference struct {
	What   string   `json:"what"`   // "engine version", "flag max_num_seqs"
	Values []string `json:"values"` // one per run; "" where the run's report does not record it
}

// ErrDifferentWorkloads is returned (wrapped) by NewComparison for runs of different
// workloads, which have no cells to compare.
var ErrDifferentWorkloads = errors.New("report: the runs are of different workloads")

// NewComparison compares runs, at least two of one workload: the same workload name
// and kind (a quick and a full run of a preset compare, cell by cell). A run without a
// name gets RunName's; names that repeat get " (2)", " (3)" so that each names one run.
// The error for runs of different workloads names each run's source (or name) and
// workload.
func NewComparison(runs []Run) (Comparison, error) {
	if len(runs) < 2 {
		return Comparison{}, fmt.Errorf("report: a comparison needs at least two runs, got %d", len(runs))
	}
	c := Comparison{Runs: slices.Clone(runs)}
	first := runs[0].Report.Workload
	var odd []string
	for i, r := range c.Runs {
		if w := r.Report.Workload; w.Name != first.Name || w.Kind != first.Kind {
			odd = append(odd, fmt.Sprintf("%s is %s", c.Runs[i].where(), workloadName(w)))
		}
	}
	if len(odd) > 0 {
		return Comparison{}, fmt.Errorf("%w: %s is %s, but %s", ErrDifferentWorkloads, c.Runs[0].where(), workloadName(first), strings.Join(odd, ", "))
	}
	seen := map[string]int{}
	for i := range c.Runs {
		if strings.TrimSpace(c.Runs[i].Name) == "" {
			c.Runs[i].Name = RunName(c.Runs[i].Report)
		}
		name := c.Runs[i].Name
		if seen[name]++; seen[name] > 1 {
			c.Runs[i].Name = fmt.Sprintf("%s (%d)", name, seen[name])
		}
	}
	known := map[synth.CellKey]bool{}
	for _, r := range c.Runs {
		m := make(map[synth.CellKey]synth.Cell, len(r.Report.Cells))
		for _, cell := range r.Report.Cells {
			k := cell.Key()
			m[k] = cell
			if !known[k] {
				known[k] = true
				c.Cells = append(c.Cells, k)
			}
		}
		c.cells = append(c.cells, m)
	}
	c.Differences = differences(c.Runs)
	return c, nil
}

// where names a run in messages: its source file, else its name.
func (r Run) where() string {
	if r.Source != "" {
		return r.Source
	}
	return strconv.Quote(r.Name)
}

func workloadName(w synth.Workload) string {
	return fmt.Sprintf("%q (%s)", w.Name, orDash(string(w.Kind)))
}

// RunName names a report in a comparison: its label, else its engine, engine version,
// model and start time (UTC, to the minute), the parts it records.
func RunName(r synth.Report) string {
	if s := strings.TrimSpace(r.Label); s != "" {
		return s
	}
	var parts []string
	for _, p := range []string{r.Engine, r.EngineVersion, r.Model} {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	if !r.Started.IsZero() {
		parts = append(parts, r.Started.UTC().Format("2006-01-02 15:04"))
	}
	if len(parts) == 0 {
		return "unnamed run"
	}
	return strings.Join(parts, " ")
}

// ReadRuns reads the reports at paths, each a report.json or a directory holding one (as
// slogate probe --out writes it), as runs named by RunName. An error names the file.
func ReadRuns(paths ...string) ([]Run, error) {
	runs := make([]Run, 0, len(paths))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, "report.json")
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		rep, err := ReadJSON(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		runs = append(runs, Run{Name: RunName(rep), Source: p, Report: rep})
	}
	return runs, nil
}

// ReadComparison compares the reports at paths, read by ReadRuns.
func ReadComparison(paths ...string) (Comparison, error) {
	runs, err := ReadRuns(paths...)
	if err != nil {
		return Comparison{}, err
	}
	return NewComparison(runs)
}

// FindRun returns the index of the run s names: a run's name or label, or its position
// counting from 1 ("2" is the second run, in decimal as written: not "02"), in that
// order of precedence. The error lists the runs.
func (c Comparison) FindRun(s string) (int, error) {
	s = strings.TrimSpace(s)
	for _, match := range []func(Run) bool{
		func(r Run) bool { return r.Name == s },
		func(r Run) bool { return s != "" && strings.TrimSpace(r.Report.Label) == s },
	} {
		for i, r := range c.Runs {
			if match(r) {
				return i, nil
			}
		}
	}
	if n, err := strconv.Atoi(s); err == nil && strconv.Itoa(n) == s && n >= 1 && n <= len(c.Runs) {
		return n - 1, nil
	}
	names := make([]string, len(c.Runs))
	for i, r := range c.Runs {
		names[i] = fmt.Sprintf("%d %q", i+1, r.Name)
	}
	return 0, fmt.Errorf("report: no run is %q: give a name or a position, of %s", s, strings.Join(names, ", "))
}

// Cell returns run i's cell k, and whether the run has it; a cell the run lacks (it
// ended first) comes back with the state not_run.
func (c Comparison) Cell(i int, k synth.CellKey) (synth.Cell, bool) {
	cell, ok := c.cells[i][k]
	if !ok {
		return synth.Cell{Row: k.Row, State: notRun}, false
	}
	return cell, true
}

// Change is how figure f of cell k moved from the baseline to run i, by synth.Compare.
// The noise band's floor is the larger agreement of the two runs' workloads (a quick
// run of a preset may allow more than a full one). A cell one of the runs lacks changed
// state, from or to not_run.
func (c Comparison) Change(i int, k synth.CellKey, f synth.Figure) synth.Change {
	base, _ := c.Cell(c.Baseline, k)
	cur, _ := c.Cell(i, k)
	agreement := max(c.Runs[c.Baseline].Report.Workload.Agreement, c.Runs[i].Report.Workload.Agreement)
	return synth.Compare(base, cur, f, agreement)
}

// Best returns the runs whose figure f of cell k is the best among the runs that
// measured it (the highest, or the lowest for a latency; ties all), or none when fewer
// than two runs measured it or all of them measured the same.
func (c Comparison) Best(k synth.CellKey, f synth.Figure) []int {
	var best []int
	var bestV float64
	measured := 0
	for i := range c.Runs {
		v, ok := c.figure(i, k, f)
		if !ok {
			continue
		}
		measured++
		switch {
		case best == nil || v != bestV && (v > bestV) == f.HigherBetter:
			best, bestV = []int{i}, v
		case v == bestV:
			best = append(best, i)
		}
	}
	if measured < 2 || len(best) == measured {
		return nil // nothing to beat, or all the same
	}
	return best
}

// figure returns run i's figure f of cell k, and whether it measured it: a valid cell
// with a positive, finite figure.
func (c Comparison) figure(i int, k synth.CellKey, f synth.Figure) (float64, bool) {
	cell, ok := c.Cell(i, k)
	if !ok || cell.State != synth.Valid {
		return 0, false
	}
	v := f.Of(cell)
	return v, v > 0 && !math.IsInf(v, 0)
}

// Tally counts one run's changes from the baseline, over every cell and headline figure.
type Tally struct {
	Run          int                      // the run's index
	ByFigure     []map[synth.Movement]int // per synth.Headline figure
	StateChanged int                      // cells whose state differs from the baseline's
}

// Tallies counts the changes of every run but the baseline, in run order.
func (c Comparison) Tallies() []Tally {
	var out []Tally
	for i := range c.Runs {
		if i == c.Baseline {
			continue
		}
		t := Tally{Run: i}
		for _, f := range synth.Headline {
			m := map[synth.Movement]int{}
			for _, k := range c.Cells {
				m[c.Change(i, k, f).Moved]++
			}
			t.ByFigure = append(t.ByFigure, m)
		}
		for _, k := range c.Cells {
			a, _ := c.Cell(c.Baseline, k)
			b, _ := c.Cell(i, k)
			if a.State != b.State {
				t.StateChanged++
			}
		}
		out = append(out, t)
	}
	return out
}

// Summary says in one line per run how it moved from the baseline: per headline figure
// how many cells were better, worse and within noise, and how many changed state.
func (c Comparison) Summary() []string {
	var out []string
	for _, t := range c.Tallies() {
		parts := make([]string, len(synth.Headline))
		for j, f := range synth.Headline {
			m := t.ByFigure[j]
			parts[j] = fmt.Sprintf("%s %d better, %d worse, %d within noise", f.Title, m[synth.Better], m[synth.Worse], m[synth.WithinNoise])
		}
		out = append(out, fmt.Sprintf("%s against %s: %s; %s changed state", c.Runs[t.Run].Name, c.Runs[c.Baseline].Name,
			strings.Join(parts, "; "), plural(t.StateChanged, "cell", "cells")))
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// fact is one thing a report records of how its run was made.
type fact struct {
	what string
	of   func(synth.Report) string
}

// differences lists the facts of how the runs were made that differ between them.
func differences(runs []Run) []Difference {
	facts := []fact{
		{"engine", func(r synth.Report) string { return r.Engine }},
		{"engine version", func(r synth.Report) string { return r.EngineVersion }},
		{"model", func(r synth.Report) string { return r.Model }},
		{"target", func(r synth.Report) string { return r.RedactedTarget() }},
		{"KV capacity", func(r synth.Report) string {
			if r.KVCapacity <= 0 {
				return ""
			}
			return fmtInt(r.KVCapacity) + " tokens"
		}},
		{"plan", func(r synth.Report) string { return planSummary(r.Workload) }},
	}
	flags := map[string]bool{}
	for _, r := range runs {
		for name := range r.Report.EngineFlags {
			flags[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		facts = append(facts, fact{flagPrefix + name, func(r synth.Report) string { return r.EngineFlags[name] }})
	}
	var out []Difference
	for _, f := range facts {
		d := Difference{What: f.what}
		for _, r := range runs {
			d.Values = append(d.Values, f.of(r.Report))
		}
		if slices.ContainsFunc(d.Values, func(v string) bool { return v != d.Values[0] }) {
			out = append(out, d)
		}
	}
	return out
}
