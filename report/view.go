package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// The content both report formats render: the header, the gate, the grid of a matrix or
// of shapes, and the tables. Markdown and HTML differ only in how they draw it.

// field is one line of a report's header.
type field struct{ key, value string }

// headerFields lists what was measured, where and when.
func headerFields(r synth.Report) []field {
	kv := "unknown"
	if r.KVCapacity > 0 {
		kv = fmtInt(r.KVCapacity) + " tokens"
	}
	fs := []field{
		{"Workload", orDash(r.Workload.Name)},
		{"Plan", planSummary(r.Workload)},
		{"Target", orDash(r.RedactedTarget())},
		{"Model", orDash(r.Model)},
		{"Engine", engineSummary(r)},
		{"KV capacity", kv},
		{"Prompts", promptSummary(r.Prompts)},
	}
	if r.Workload.Kind == synth.Scan {
		fs = append(fs, field{"Reference rate", referenceSummary(r)})
	}
	return append(fs,
		field{"Started", fmtTime(r.Started)},
		field{"Finished", fmtTime(r.Finished)},
		field{"Duration", fmtSpan(r.Started, r.Finished)})
}

// engineSummary names the engine and, when it told, its version: "vllm 0.11.0".
func engineSummary(r synth.Report) string {
	if r.EngineVersion == "" {
		return orDash(r.Engine)
	}
	return orDash(r.Engine) + " " + r.EngineVersion
}

// engineFlags lists the settings the engine reported, by name (Report.EngineFlags).
func engineFlags(r synth.Report) []field {
	fs := make([]field, 0, len(r.EngineFlags))
	for _, k := range slices.Sorted(maps.Keys(r.EngineFlags)) {
		fs = append(fs, field{k, r.EngineFlags[k]})
	}
	return fs
}

// flagsTitle introduces the engine's settings.
func flagsTitle(n int) string {
	if n == 1 {
		return "Engine flags (1, as the engine reports it)"
	}
	return fmt.Sprintf("Engine flags (%d, as the engine reports them)", n)
}

// promptSummary says how the run wrote its prompts.
func promptSummary(k synth.PromptKind) string {
	if !k.Text {
		return "random token ids (exact lengths)"
	}
	return fmt.Sprintf("random words, %.2f per token as calibrated on the engine (lengths within a few percent)", k.WordsPerToken)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return dash
	}
	return s
}

// planSummary describes a workload in one line, as the published write-ups' subtitles do.
func planSummary(w synth.Workload) string {
	switch w.Kind {
	case synth.Matrix:
		labels := make([]string, len(w.Contexts))
		for i, n := range w.Contexts {
			labels[i] = synth.ContextLabel(n)
		}
		return fmt.Sprintf("matrix: %d contexts (%s) × %d concurrency levels (%s), %s output tokens; %s",
			len(w.Contexts), spanOf(labels), len(w.Concurrency), spanOf(intStrings(w.Concurrency)), fmtInt(w.Output), roundsSummary(w))
	case synth.Shapes:
		return fmt.Sprintf("shapes: %d shapes × %d concurrency levels (%s); %s",
			len(w.Shapes), len(w.Concurrency), spanOf(intStrings(w.Concurrency)), roundsSummary(w))
	case synth.Scan:
		multiples := make([]string, len(w.Multiples))
		for i, m := range w.Multiples {
			multiples[i] = fmtMultiple(m)
		}
		return fmt.Sprintf("rate scan: %s, %s arrivals at %s the reference rate; %s",
			shapesSummary(w.Shapes), orDash(w.Arrival), strings.Join(multiples, ", "), roundsSummary(w))
	}
	return string(w.Kind)
}

// shapesSummary lists shapes as "API-S (2,048 in → 256 out)".
func shapesSummary(shapes []synth.Shape) string {
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = fmt.Sprintf("%s (%s in → %s out)", s.Name, fmtInt(s.Input), fmtInt(s.Output))
	}
	return orDash(strings.Join(parts, ", "))
}

// roundsSummary says how each cell was measured.
func roundsSummary(w synth.Workload) string {
	rounds := max(w.Rounds, 1)
	length := fmtDuration(time.Duration(w.Duration))
	if w.Duration == 0 {
		length = fmt.Sprintf("%d requests per stream", w.Requests)
	}
	per := "per cell"
	if w.Kind == synth.Scan {
		per = "per offered rate"
	}
	s := fmt.Sprintf("%d rounds of %s %s", rounds, length, per)
	if rounds == 1 {
		s = fmt.Sprintf("1 round of %s %s", length, per)
	}
	if w.Kind != synth.Scan {
		s = "a warm-up, then " + s
	}
	s += "; rounds agree within " + fmtPct(w.Agreement)
	if w.SharedPrefix > 0 {
		s += "; a shared prefix of " + fmtInt(w.SharedPrefix) + " tokens"
	}
	return s
}

// referenceSummary says what rate a scan's multiples apply to, and where it came from.
func referenceSummary(r synth.Report) string {
	rate := fmtReqS(r.Reference) + " req/s"
	if r.Workload.ReferenceRate > 0 {
		return rate + " (given)"
	}
	return fmt.Sprintf("%s (closed-loop completions at %d streams)", rate, r.Workload.CalibrationConcurrency)
}

func intStrings(xs []int) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Itoa(x)
	}
	return out
}

// spanOf names the first and last of a list: "8K–251K".
func spanOf(xs []string) string {
	switch len(xs) {
	case 0:
		return dash
	case 1:
		return xs[0]
	}
	return xs[0] + "–" + xs[len(xs)-1]
}

// gateSummary says in one sentence how the functional gate went.
func gateSummary(r synth.Report) string {
	if len(r.Gate) == 0 {
		return "Not run."
	}
	n := map[synth.Verdict]int{}
	for _, c := range r.Gate {
		n[c.Verdict]++
	}
	if n[synth.Fail] > 0 {
		s := fmt.Sprintf("Failed: %d of %d checks failed.", n[synth.Fail], len(r.Gate))
		if len(r.Cells) == 0 {
			s += " No load was sent."
		}
		return s
	}
	s := fmt.Sprintf("Passed: %d of %d checks passed", n[synth.Pass], len(r.Gate))
	if n[synth.Skip] > 0 {
		s += fmt.Sprintf(", %d skipped", n[synth.Skip])
	}
	return s + "."
}

// verdictMark is a check's symbol in the gate list.
func verdictMark(v synth.Verdict) string {
	switch v {
	case synth.Pass:
		return "✓"
	case synth.Fail:
		return "✗"
	case synth.Skip:
		return "–"
	}
	return "?"
}

// grid is a matrix or shapes report laid out as rows × concurrencies. Rows come in the
// workload's order, then any row only the cells name; columns are every concurrency of
// the workload or the cells, ascending. A position without a cell was not run.
type grid struct {
	rowHead string
	rows    []string
	cols    []int
	cells   map[gridKey]synth.Cell
}

type gridKey struct {
	row  string
	conc int
}

// at returns the cell at a position and whether the report has one.
func (g grid) at(row string, conc int) (synth.Cell, bool) {
	c, ok := g.cells[gridKey{row, conc}]
	return c, ok
}

func newGrid(r synth.Report) grid {
	g := grid{rowHead: rowHeader(r.Workload.Kind), cells: map[gridKey]synth.Cell{}}
	seen := map[string]bool{}
	add := func(row string) {
		if !seen[row] {
			seen[row] = true
			g.rows = append(g.rows, row)
		}
	}
	switch r.Workload.Kind {
	case synth.Matrix:
		for _, n := range r.Workload.Contexts {
			add(synth.ContextLabel(n))
		}
	case synth.Shapes:
		for _, s := range r.Workload.Shapes {
			add(s.Name)
		}
	}
	cols := slices.Clone(r.Workload.Concurrency)
	for _, c := range r.Cells {
		add(c.Row)
		cols = append(cols, c.Concurrency)
		g.cells[gridKey{c.Row, c.Concurrency}] = c
	}
	slices.Sort(cols)
	g.cols = slices.Compact(cols)
	return g
}

// rowHeader names what a report's rows are.
func rowHeader(k synth.Kind) string {
	if k == synth.Matrix {
		return "Context"
	}
	return "Shape"
}

// validRounds counts the rounds that entered a cell's medians.
func validRounds(c synth.Cell) int {
	n := 0
	for _, r := range c.Rounds {
		if r.Valid() {
			n++
		}
	}
	return n
}

// disagreed reports whether a valid cell's rounds spread further than the workload allows.
func disagreed(c synth.Cell) bool { return c.State == synth.Valid && validRounds(c) > 1 && !c.Agreed }

// scanKnee returns the index among a scan's cells of its knee (-1 for none) and the
// sentence that states it. The knee is slogate calibrate's: the one the report carries
// (Report.Knee, which a calibration marks as it chose it under the tier's SLO) on the
// cell nearest its rate, else calibrate.ScanKnee's over the valid cells with no SLO, as
// a probe's scan has none.
func scanKnee(r synth.Report) (int, string) {
	if m := r.Knee; m != nil {
		if !(m.Rate > 0) {
			return -1, sentence("No knee", m.Rule)
		}
		best := -1
		for i, c := range r.Cells {
			if best < 0 || math.Abs(c.Rate-m.Rate) < math.Abs(r.Cells[best].Rate-m.Rate) {
				best = i
			}
		}
		return best, sentence("Knee", m.Rule)
	}
	k, rule := calibrate.ScanKnee(r.Cells, measure.SLO{})
	if k < 0 {
		return -1, sentence("No knee", rule)
	}
	c := r.Cells[k]
	return k, fmt.Sprintf("Knee: %s (%s req/s offered, %s req/s completed, p95 TTFT %s ms) by slogate calibrate's rule, without a latency SLO: %s.",
		fmtMultiple(c.Multiple), fmtReqS(c.Rate), fmtReqS(c.CompletionRate), fmtMS(c.TTFTp95), rule)
}

// sentence is "head: why." or, without a why, "head.".
func sentence(head, why string) string {
	if strings.TrimSpace(why) == "" {
		return head + "."
	}
	return head + ": " + why + "."
}

// stateClass turns a state into a CSS class or id fragment: "n/c" → "nc".
func stateClass(s synth.State) string { return cssToken(string(s)) }
