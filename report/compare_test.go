package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/slogate/slogate/synth"
)

// figure returns the headline figure named name.
func headline(t *testing.T, name string) synth.Figure {
	t.Helper()
	for _, f := range synth.Headline {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no headline figure %q", name)
	return synth.Figure{}
}

// measuredCell is a valid cell of row API-S at concurrency conc whose rounds have the
// given throughput, TTFT p95 and TPOT p95 each; its figures are their medians.
func measuredCell(conc int, rounds ...[3]float64) synth.Cell {
	c := synth.Cell{Row: "API-S", Input: 2048, Output: 256, Concurrency: conc, State: synth.Valid, SuccessRate: 1, Agreed: true}
	var tput, ttft, tpot []float64
	for _, r := range rounds {
		c.Rounds = append(c.Rounds, synth.Round{Sent: 10, Succeeded: 10, Seconds: 30, Completed: 10, OutputToks: 2560,
			Throughput: r[0], TTFTp95: r[1], TPOTp95: r[2]})
		tput, ttft, tpot = append(tput, r[0]), append(ttft, r[1]), append(tpot, r[2])
	}
	c.Throughput, c.TTFTp95, c.TPOTp95 = median(tput), median(ttft), median(tpot)
	return c
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func stateCell(conc int, s synth.State) synth.Cell {
	return synth.Cell{Row: "API-S", Input: 2048, Output: 256, Concurrency: conc, State: s}
}

// run is a shapes run labelled label, of the given cells, with the workload agreement.
func run(label string, agreement float64, cells ...synth.Cell) Run {
	w := synth.Presets["shapes"]
	w.Agreement = agreement
	return Run{Report: synth.Report{Schema: synth.SchemaVersion, Workload: w, Label: label, Engine: "vllm", Model: "m", Started: fixtureStart, Cells: cells}}
}

func compare(t *testing.T, runs ...Run) Comparison {
	t.Helper()
	c, err := NewComparison(runs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestComparisonChanges: each kind of change of one cell between two runs, as the
// comparison judges it (by synth.Compare) and shows it in its changes table.
func TestComparisonChanges(t *testing.T) {
	one := func(tput, ttft, tpot float64) synth.Cell { return measuredCell(1, [3]float64{tput, ttft, tpot}) }
	cases := []struct {
		name           string
		base, cur      synth.Cell
		baseAg, curAg  float64
		figure         string
		want           synth.Movement
		wantText       string
		wantNoiseShare float64
	}{
		{name: "throughput up beyond noise", base: one(1000, 0.2, 0.02), cur: one(1480, 0.2, 0.02), baseAg: 0.06, curAg: 0.06,
			figure: "output_tok_per_s", want: synth.Better, wantText: "+48% ✓", wantNoiseShare: 0.06},
		{name: "throughput down beyond noise", base: one(1000, 0.2, 0.02), cur: one(880, 0.2, 0.02), baseAg: 0.06, curAg: 0.06,
			figure: "output_tok_per_s", want: synth.Worse, wantText: "−12% ✗", wantNoiseShare: 0.06},
		{name: "within the workload's agreement", base: one(1000, 0.2, 0.02), cur: one(1030, 0.2, 0.02), baseAg: 0.06, curAg: 0.06,
			figure: "output_tok_per_s", want: synth.WithinNoise, wantText: "≈ +3% (noise ±6%)", wantNoiseShare: 0.06},
		{name: "within the spread of the rounds, beyond the agreement", base: one(1000, 0.2, 0.02),
			cur:    measuredCell(1, [3]float64{1000, 0.2, 0.02}, [3]float64{1080, 0.2, 0.02}, [3]float64{1160, 0.2, 0.02}),
			baseAg: 0.02, curAg: 0.02, figure: "output_tok_per_s", want: synth.WithinNoise,
			// median 1080 (+8%), spread (1160 − 1000) / 1080 = 14.8%
			wantText: "≈ +8% (noise ±15%)", wantNoiseShare: 160.0 / 1080},
		{name: "the larger agreement of the two runs", base: one(1000, 0.2, 0.02), cur: one(1050, 0.2, 0.02), baseAg: 0.02, curAg: 0.10,
			figure: "output_tok_per_s", want: synth.WithinNoise, wantText: "≈ +5% (noise ±10%)", wantNoiseShare: 0.10},
		{name: "lower TTFT is better", base: one(1000, 0.5, 0.02), cur: one(1000, 0.4, 0.02), baseAg: 0.06, curAg: 0.06,
			figure: "ttft_p95_s", want: synth.Better, wantText: "−20% ✓", wantNoiseShare: 0.06},
		{name: "higher TPOT is worse", base: one(1000, 0.5, 0.020), cur: one(1000, 0.5, 0.025), baseAg: 0.06, curAg: 0.06,
			figure: "tpot_p95_s", want: synth.Worse, wantText: "+25% ✗", wantNoiseShare: 0.06},
		{name: "valid to rejected", base: one(1000, 0.2, 0.02), cur: stateCell(1, synth.Rejected), baseAg: 0.06, curAg: 0.06,
			figure: "output_tok_per_s", want: synth.StateChanged, wantText: "Valid → rej"},
		{name: "over capacity to valid", base: stateCell(1, synth.OverCapacity), cur: one(1000, 0.2, 0.02), baseAg: 0.06, curAg: 0.06,
			figure: "ttft_p95_s", want: synth.StateChanged, wantText: "Over capacity → Valid"},
		{name: "n/c to rejected", base: stateCell(1, synth.NotCompleted), cur: stateCell(1, synth.Rejected), baseAg: 0.06, curAg: 0.06,
			figure: "output_tok_per_s", want: synth.StateChanged, wantText: "n/c → rej"},
		{name: "rejected in both", base: stateCell(1, synth.Rejected), cur: stateCell(1, synth.Rejected), baseAg: 0.06, curAg: 0.06,
			figure: "output_tok_per_s", want: synth.NotMeasured, wantText: "rej"},
		{name: "valid without the figure", base: one(1000, 0.2, 0), cur: one(1000, 0.2, 0.02), baseAg: 0.06, curAg: 0.06,
			figure: "tpot_p95_s", want: synth.NotMeasured, wantText: "—"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compare(t, run("a", tc.baseAg, tc.base), run("b", tc.curAg, tc.cur))
			f := headline(t, tc.figure)
			ch := c.Change(1, c.Cells[0], f)
			if ch.Moved != tc.want {
				t.Errorf("moved %s, want %s (%+v)", ch.Moved, tc.want, ch)
			}
			if d := ch.Noise - tc.wantNoiseShare; d > 1e-9 || d < -1e-9 {
				t.Errorf("noise band %v, want %v", ch.Noise, tc.wantNoiseShare)
			}
			tab := c.deltasTable(f)
			if got := tab.rows[0].cells[0]; got.text != tc.wantText || got.class != cssToken(string(tc.want)) {
				t.Errorf("changes table shows %q (class %q), want %q (%s)", got.text, got.class, tc.wantText, tc.want)
			}
		})
	}
}

// TestComparisonMissingCell: a cell one run did not reach is shown as not run, and its
// change is a change of state.
func TestComparisonMissingCell(t *testing.T) {
	a := measuredCell(1, [3]float64{1000, 0.2, 0.02})
	b := measuredCell(4, [3]float64{3000, 0.3, 0.03})
	c := compare(t, run("full", 0.06, a, b), run("short", 0.06, a))
	if len(c.Cells) != 2 {
		t.Fatalf("cells %v, want both runs' two", c.Cells)
	}
	f := synth.Headline[0]
	if ch := c.Change(1, c.Cells[1], f); ch.Moved != synth.StateChanged {
		t.Errorf("a cell the run lacks: %s, want state_changed", ch.Moved)
	}
	if got := c.deltasTable(f).rows[1].cells[0].text; got != "Valid → not run" {
		t.Errorf("changes table shows %q", got)
	}
	if got := c.valuesTable(f).rows[1].cells[1].text; got != "not run" {
		t.Errorf("values table shows %q for the cell the run lacks", got)
	}
	// The other way round, the cell only the later run has is still a column.
	c = compare(t, run("short", 0.06, a), run("full", 0.06, a, b))
	if len(c.Cells) != 2 || c.Cells[1] != b.Key() {
		t.Errorf("cells %v, want the later run's cell too", c.Cells)
	}
}

// TestComparisonBaseline: the changes are against the chosen run, and FindRun reads a
// name, a label or a position.
func TestComparisonBaseline(t *testing.T) {
	cell := func(tput float64) synth.Cell { return measuredCell(1, [3]float64{tput, 0.2, 0.02}) }
	unlabelled := run("", 0.06, cell(500))
	unlabelled.Report.EngineVersion = "0.11.0"
	c := compare(t, run("tp1", 0.06, cell(1000)), run("tp2", 0.06, cell(1480)), unlabelled)
	f := synth.Headline[0]
	for _, tc := range []struct {
		find     string
		baseline int
		want     []string // the changes of the other runs, in order
	}{
		{"1", 0, []string{"+48% ✓", "−50% ✗"}},
		{"tp2", 1, []string{"−32% ✗", "−66% ✗"}},
		{"3", 2, []string{"+100% ✓", "+196% ✓"}},
		{"vllm 0.11.0 m 2026-05-04 09:00", 2, []string{"+100% ✓", "+196% ✓"}},
	} {
		i, err := c.FindRun(tc.find)
		if err != nil || i != tc.baseline {
			t.Fatalf("FindRun(%q) = %d, %v; want %d", tc.find, i, err, tc.baseline)
		}
		c.Baseline = i
		tab := c.deltasTable(f)
		// One cell, two other runs: the layout, a row per run.
		var got []string
		for _, r := range tab.rows {
			got = append(got, r.cells[0].text)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("baseline %q: changes %q, want %q", tc.find, got, tc.want)
		}
		if len(tab.rows) != 2 || strings.Contains(tab.rows[0].head+tab.rows[1].head, c.Runs[i].Name) {
			t.Errorf("baseline %q: rows %v, want the two other runs", tc.find, tab.rows)
		}
	}
	for _, bad := range []string{"0", "4", "tp3", "", "-1"} {
		if _, err := c.FindRun(bad); err == nil || !strings.Contains(err.Error(), `1 "tp1", 2 "tp2"`) {
			t.Errorf("FindRun(%q): error %v, want one listing the runs", bad, err)
		}
	}
	c.Baseline = 3
	if err := WriteComparisonMarkdown(&bytes.Buffer{}, c); err == nil {
		t.Error("a baseline that is no run was written")
	}
}

// TestComparisonRefusesDifferentWorkloads: runs of different workloads are refused,
// the error naming each file and workload.
func TestComparisonRefusesDifferentWorkloads(t *testing.T) {
	shapes := Run{Source: "a/report.json", Report: shapesReport()}
	matrix := Run{Source: "b/report.json", Report: matrixReport()}
	renamed := Run{Source: "c/report.json", Report: shapesReport()}
	renamed.Report.Workload.Name = "my-shapes"
	kind := Run{Source: "d/report.json", Report: shapesReport()}
	kind.Report.Workload.Kind = synth.Scan
	for _, tc := range []struct {
		runs []Run
		want []string
	}{
		{[]Run{shapes, matrix}, []string{`a/report.json is "shapes" (shapes), but b/report.json is "context-matrix" (matrix)`}},
		{[]Run{shapes, renamed}, []string{`c/report.json is "my-shapes" (shapes)`}},
		{[]Run{shapes, shapes, kind, matrix}, []string{`d/report.json is "shapes" (scan), b/report.json is "context-matrix"`}},
	} {
		_, err := NewComparison(tc.runs)
		if !errors.Is(err, ErrDifferentWorkloads) {
			t.Fatalf("error %v, want ErrDifferentWorkloads", err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
	if _, err := NewComparison([]Run{shapes}); err == nil {
		t.Error("a comparison of one run")
	}
	// A quick run and a full one of a preset are the same workload.
	quick := Run{Report: shapesReport()}
	quick.Report.Workload = quick.Report.Workload.Quick()
	c, err := NewComparison([]Run{shapes, quick})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Differences) != 1 || c.Differences[0].What != "plan" {
		t.Errorf("differences %+v, want the plan alone", c.Differences)
	}
}

// TestComparisonDifferences: what differs between runs is listed, flag by flag; what is
// the same is not.
func TestComparisonDifferences(t *testing.T) {
	a, b, c := Run{Report: shapesReport()}, Run{Report: shapesReport()}, Run{Report: shapesReport()}
	a.Report.EngineVersion, b.Report.EngineVersion, c.Report.EngineVersion = "0.10.1", "0.10.1", "0.11.0"
	a.Report.EngineFlags = map[string]string{"max_num_seqs": "256", "block_size": "16", "enable_prefix_caching": "true"}
	b.Report.EngineFlags = map[string]string{"max_num_seqs": "512", "block_size": "16", "enable_prefix_caching": "true"}
	c.Report.EngineFlags = map[string]string{"max_num_seqs": "256", "block_size": "16", "kv_cache_dtype": "fp8"}
	cmp := compare(t, a, b, c)
	want := []Difference{
		{"engine version", []string{"0.10.1", "0.10.1", "0.11.0"}},
		{"flag enable_prefix_caching", []string{"true", "true", ""}},
		{"flag kv_cache_dtype", []string{"", "", "fp8"}},
		{"flag max_num_seqs", []string{"256", "512", "256"}},
	}
	if len(cmp.Differences) != len(want) {
		t.Fatalf("differences %+v, want %+v", cmp.Differences, want)
	}
	for i, d := range want {
		if g := cmp.Differences[i]; g.What != d.What || !slices.Equal(g.Values, d.Values) {
			t.Errorf("difference %d: %+v, want %+v", i, g, d)
		}
	}
	// Unlabelled runs of one engine and model that started at the same minute get
	// names that tell them apart.
	names := []string{cmp.Runs[0].Name, cmp.Runs[1].Name, cmp.Runs[2].Name}
	if want := []string{"vllm 0.10.1 mimo-v2.6-flash-rl 2026-05-04 09:00", "vllm 0.10.1 mimo-v2.6-flash-rl 2026-05-04 09:00 (2)",
		"vllm 0.11.0 mimo-v2.6-flash-rl 2026-05-04 09:00"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	var buf bytes.Buffer
	if err := WriteComparisonMarkdown(&buf, cmp); err != nil {
		t.Fatal(err)
	}
	if want := "| flag kv_cache_dtype | — | — | fp8 |"; !strings.Contains(buf.String(), want) {
		t.Errorf("no %q in:\n%s", want, buf.String())
	}
	// The HTML shows a few differing flags unfolded, many (runs of two engines) folded.
	for _, n := range []int{3, shownFlags + 1} {
		many := Run{Report: shapesReport()}
		many.Report.EngineFlags = maps.Clone(a.Report.EngineFlags)
		for i := range n {
			many.Report.EngineFlags[fmt.Sprintf("flag_%02d", i)] = "x"
		}
		buf.Reset()
		if err := WriteComparisonHTML(&buf, compare(t, a, many)); err != nil {
			t.Fatal(err)
		}
		doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		flags, others := byID(doc, "flags"), byID(doc, "differences")
		switch {
		case flags == nil || others == nil:
			t.Fatalf("%d differing flags: no details#flags or no table#differences", n)
		case len(find(byID(doc, "flag-differences"), elem("tr", ""))) != n+1:
			t.Errorf("%d differing flags: the folded table has not a row per flag", n)
		case hasOpen(flags) != (n <= shownFlags):
			t.Errorf("%d differing flags: details#flags open is %v", n, hasOpen(flags))
		}
	}
	cmp = compare(t, a, a)
	buf.Reset()
	if err := WriteComparisonMarkdown(&buf, cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.Differences) != 0 || !strings.Contains(buf.String(), sameText) {
		t.Errorf("two runs of one recipe: differences %+v", cmp.Differences)
	}
}

// hasOpen reports whether a details element is open.
func hasOpen(n *html.Node) bool {
	return slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == "open" })
}

// TestComparisonBest: the best run of each cell, by the figure's direction, ties all,
// and none when fewer than two runs measured the cell.
func TestComparisonBest(t *testing.T) {
	cell := func(tput, ttft float64) synth.Cell { return measuredCell(1, [3]float64{tput, ttft, 0.02}) }
	c := compare(t, run("a", 0.06, cell(1000, 0.3)), run("b", 0.06, cell(1200, 0.3)), run("c", 0.06, cell(900, 0.2)),
		run("d", 0.06, stateCell(1, synth.Rejected)))
	k := c.Cells[0]
	if got := c.Best(k, headline(t, "output_tok_per_s")); !slices.Equal(got, []int{1}) {
		t.Errorf("best throughput %v, want run 1", got)
	}
	if got := c.Best(k, headline(t, "ttft_p95_s")); !slices.Equal(got, []int{2}) {
		t.Errorf("best TTFT %v, want run 2", got)
	}
	if got := c.Best(k, headline(t, "tpot_p95_s")); got != nil {
		t.Errorf("best TPOT %v, want none: the three that measured it tie", got)
	}
	c2 := compare(t, run("a", 0.06, cell(1000, 0.3)), run("b", 0.06, cell(1200, 0.3)), run("c", 0.06, cell(1200, 0.2)))
	if got := c2.Best(c2.Cells[0], headline(t, "output_tok_per_s")); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("best throughput %v, want the two that tie", got)
	}
	vals := c.valuesTable(headline(t, "output_tok_per_s"))
	var marked []string
	for _, r := range vals.rows {
		if r.cells[0].best {
			marked = append(marked, r.head+": "+r.cells[0].text)
		}
	}
	if want := []string{"b: ★ 1,200"}; !slices.Equal(marked, want) {
		t.Errorf("marked %q, want %q", marked, want)
	}
	c = compare(t, run("a", 0.06, cell(1000, 0.3)), run("d", 0.06, stateCell(1, synth.Rejected)))
	if got := c.Best(c.Cells[0], synth.Headline[0]); got != nil {
		t.Errorf("best %v of a cell one run measured", got)
	}
}

// TestComparisonLayout: a table has a row per run while there are no more cells than
// runs, and a row per cell otherwise.
func TestComparisonLayout(t *testing.T) {
	a, b := Run{Report: shapesReport()}, Run{Report: shapesReport()}
	a.Report.Label, b.Report.Label = "a", "b"
	c := compare(t, a, b)
	tab := c.valuesTable(synth.Headline[0])
	if !slices.Equal(tab.cols, []string{"a (baseline)", "b"}) || len(tab.rows) != 9 || tab.rows[0].head != "API-S c=1" {
		t.Errorf("9 cells, 2 runs: columns %q, %d rows starting %q; want a column per run", tab.cols, len(tab.rows), tab.rows[0].head)
	}
	cells := []synth.Cell{measuredCell(1, [3]float64{1000, 0.2, 0.02}), measuredCell(4, [3]float64{3000, 0.3, 0.03})}
	c = compare(t, run("x", 0.06, cells...), run("y", 0.06, cells...), run("z", 0.06, cells...))
	tab = c.valuesTable(synth.Headline[0])
	if !slices.Equal(tab.cols, []string{"API-S c=1", "API-S c=4"}) || len(tab.rows) != 3 {
		t.Errorf("2 cells, 3 runs: columns %q, %d rows; want a column per cell", tab.cols, len(tab.rows))
	}
	scan := compare(t, Run{Report: scanReport()}, Run{Report: scanReport()})
	if got := scan.valuesTable(synth.Headline[0]); got.rows[0].head != "0.5×" || got.corner != "Offered rate" {
		t.Errorf("a scan's cells: %q under %q", got.rows[0].head, got.corner)
	}
}

// comparisonFixture is two runs of the shapes fixture: a newer engine version with a
// larger batch that is faster at API-S, slower at CHAT-S × 64, about the same at
// CHAT-S × 1, rejects DOC-L × 16 and serves DOC-L × 64.
func comparisonFixture() Comparison {
	a, b := shapesReport(), shapesReport()
	a.Label, b.Label = "vllm 0.10 max-num-seqs 256", "vllm 0.11 max-num-seqs 512"
	a.EngineVersion, b.EngineVersion = "0.10.1", "0.11.0"
	a.EngineFlags = map[string]string{"max_num_seqs": "256", "enable_prefix_caching": "true"}
	b.EngineFlags = map[string]string{"max_num_seqs": "512", "enable_prefix_caching": "true"}
	b.Started = b.Started.Add(26 * time.Hour)
	b.Cells = slices.Clone(b.Cells)
	scale := func(i int, tput, lat float64) {
		c := b.Cells[i]
		c.Throughput, c.PerRequestTPS, c.TTFTp95, c.TPOTp95 = c.Throughput*tput, c.PerRequestTPS*tput, c.TTFTp95*lat, c.TPOTp95*lat
		c.Rounds = slices.Clone(c.Rounds)
		for j := range c.Rounds {
			c.Rounds[j].Throughput *= tput
		}
		b.Cells[i] = c
	}
	scale(0, 1.48, 0.7)
	scale(1, 1.31, 0.9)
	scale(2, 1.22, 1.04)
	scale(3, 1.03, 0.98)
	scale(5, 0.88, 1.35)
	b.Cells[7] = synth.Cell{Row: "DOC-L", Input: 131072, Output: 2048, Concurrency: 16, State: synth.Rejected, Detail: "32 http_status",
		Rounds: []synth.Round{{Sent: 16, Failures: map[string]int{"http_status": 16}, Seconds: 60}}}
	b.Cells[8] = validCell("DOC-L", 131072, 2048, 64, 210.5, 61000, 2, 0.03, 0.06)
	c, err := NewComparison([]Run{{Source: "runs/v0.10/report.json", Report: a}, {Source: "runs/v0.11/report.json", Report: b}})
	if err != nil {
		panic(err)
	}
	return c
}

func TestComparisonMarkdownGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteComparisonMarkdown(&buf, comparisonFixture()); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.md", buf.Bytes())
	for i, tab := range tableShapes(buf.String()) {
		for j, n := range tab {
			if n != tab[0] {
				t.Errorf("table %d line %d has %d cells, its header %d", i, j, n, tab[0])
			}
		}
	}
	for _, want := range []string{
		"| API-S c=1 | 198 | **★ 293** |", "| API-S c=1 | +48% ✓ |", "| CHAT-S c=1 | ≈ +3% (noise ±6%) |", "| CHAT-S c=64 | −12% ✗ |",
		"| DOC-L c=16 | Valid → rej |", "| DOC-L c=64 | rej → Valid |", "| flag max_num_seqs | 256 | 512 |",
		"- vllm 0.11 max-num-seqs 512 against vllm 0.10 max-num-seqs 256: output tok/s 3 better, 1 worse, 3 within noise;",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %q in the Markdown", want)
		}
	}
}

// TestComparisonEscapes: names from the reports cannot break a table or inject HTML.
func TestComparisonEscapes(t *testing.T) {
	const label = "<script>alert(1)</script> a|b"
	a, b := Run{Report: hostileReport()}, Run{Report: hostileReport()}
	a.Report.Label = label
	a.Report.EngineFlags = map[string]string{"<i>flag</i>": "x|y"}
	c := compare(t, a, b)
	var md, page bytes.Buffer
	if err := WriteComparisonMarkdown(&md, c); err != nil {
		t.Fatal(err)
	}
	for i, tab := range tableShapes(md.String()) {
		for j, n := range tab {
			if n != tab[0] {
				t.Errorf("table %d line %d has %d cells, its header %d", i, j, n, tab[0])
			}
		}
	}
	if i := unescaped(md.String(), "<"); i >= 0 {
		t.Errorf("unescaped < in the Markdown at %.40q", md.String()[i:])
	}
	if err := WriteComparisonHTML(&page, c); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "<script>") || strings.Contains(page.String(), "<i>flag") {
		t.Error("report text reached the HTML unescaped")
	}
}

func TestComparisonHTML(t *testing.T) {
	c := comparisonFixture()
	var buf bytes.Buffer
	if err := WriteComparisonHTML(&buf, c); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"meta", "runs", "differences", "summary", "legend"} {
		if byID(doc, id) == nil {
			t.Errorf("no #%s", id)
		}
	}
	if len(find(doc, elem("script", ""))) > 0 || len(find(doc, elem("link", ""))) > 0 {
		t.Error("the page is not self-contained")
	}
	for _, f := range synth.Headline {
		vals, deltas := byID(doc, "values-"+f.Name), byID(doc, "deltas-"+f.Name)
		if vals == nil || deltas == nil {
			t.Fatalf("no tables of %s", f.Name)
		}
		bestWant := 0
		for _, k := range c.Cells {
			bestWant += len(c.Best(k, f))
		}
		if n := len(find(vals, elem("td", "best"))); n != bestWant {
			t.Errorf("%s: %d td.best, want %d", f.Name, n, bestWant)
		}
		moved := map[string]int{}
		for _, k := range c.Cells {
			moved[cssToken(string(c.Change(1, k, f).Moved))]++
		}
		for class, n := range moved {
			if got := len(find(deltas, elem("td", class))); got != n {
				t.Errorf("%s: %d td.%s, want %d", f.Name, got, class, n)
			}
		}
	}
	rows := find(byID(doc, "deltas-output_tok_per_s"), elem("tr", ""))
	if len(rows) != len(c.Cells)+1 {
		t.Errorf("%d rows in the throughput changes, want a header and one per cell (%d)", len(rows), len(c.Cells))
	}
	if got := text(find(byID(doc, "deltas-output_tok_per_s"), elem("td", "worse"))[0]); got != "−12% ✗" {
		t.Errorf("the worse throughput cell reads %q", got)
	}
}

func TestComparisonJSON(t *testing.T) {
	c := comparisonFixture()
	var buf bytes.Buffer
	if err := WriteComparisonJSON(&buf, c); err != nil {
		t.Fatal(err)
	}
	var doc comparisonJSON
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != CompareSchema || doc.Workload.Name != "shapes" || doc.Baseline != 0 || len(doc.Runs) != 2 || len(doc.Cells) != 9 {
		t.Fatalf("head %q %+v baseline %d, %d runs, %d cells", doc.Schema, doc.Workload, doc.Baseline, len(doc.Runs), len(doc.Cells))
	}
	if r := doc.Runs[1]; r.Label != "vllm 0.11 max-num-seqs 512" || r.Source != "runs/v0.11/report.json" || r.EngineVersion != "0.11.0" {
		t.Errorf("run 1: %+v", r)
	}
	if len(doc.Differences) != 2 || doc.Differences[1].What != "flag max_num_seqs" {
		t.Errorf("differences %+v", doc.Differences)
	}
	for j, cell := range doc.Cells {
		k := c.Cells[j]
		if cell.Row != k.Row || cell.Load != k.Load || len(cell.Runs) != 2 || len(cell.Changes) != len(synth.Headline) {
			t.Fatalf("cell %d: %+v", j, cell)
		}
		for i, rc := range cell.Runs {
			got, _ := c.Cell(i, k)
			if rc.State != got.State || (got.State == synth.Valid) != (rc.Figures["output_tok_per_s"] == got.Throughput && got.Throughput > 0) {
				t.Errorf("cell %v run %d: %+v, want the state and figures of %+v", k, i, rc, got.State)
			}
		}
		for fi, ch := range cell.Changes {
			want := c.Change(1, k, synth.Headline[fi])
			if ch.Run != 1 || ch.Figure != synth.Headline[fi].Name || ch.Movement != want.Moved || ch.Delta != want.Delta || ch.Noise != want.Noise {
				t.Errorf("cell %v change %d: %+v, want %+v", k, fi, ch, want)
			}
		}
	}
	if got := doc.Cells[0].Best["output_tok_per_s"]; !slices.Equal(got, []int{1}) {
		t.Errorf("best of API-S × 1: %v", got)
	}
}

// TestReadComparison reads reports as slogate probe writes them: a directory or its
// report.json.
func TestReadComparison(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	ra, rb := shapesReport(), shapesReport()
	ra.Label, rb.Label = "a", "b"
	if err := WriteFiles(a, ra); err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(b, rb); err != nil {
		t.Fatal(err)
	}
	c, err := ReadComparison(a, filepath.Join(b, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Runs[0].Name != "a" || c.Runs[1].Name != "b" || c.Runs[0].Source != filepath.Join(a, "report.json") || len(c.Cells) != 9 {
		t.Errorf("runs %q %q from %q, %d cells", c.Runs[0].Name, c.Runs[1].Name, c.Runs[0].Source, len(c.Cells))
	}
	out := filepath.Join(dir, "cmp")
	if err := WriteComparisonFiles(out, c); err != nil {
		t.Fatal(err)
	}
	for _, f := range ComparisonFiles {
		if fi, err := os.Stat(filepath.Join(out, f.Name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f.Name, err)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"schema":"slogate.compare/v1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{bad, bad + `: report: unknown report schema: "slogate.compare/v1"`},
		{filepath.Join(dir, "missing"), "missing"},
	} {
		if _, err := ReadComparison(a, tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.path, err, tc.want)
		}
	}
}

func TestFmtDelta(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{{0.48, "+48%"}, {-0.12, "−12%"}, {0.032, "+3.2%"}, {0.03, "+3%"}, {0, "0%"}, {-0.0004, "0%"}, {-0.0996, "−10%"}, {0.094, "+9.4%"}, {12.5, "+1,250%"}} {
		if got := fmtDelta(tc.x); got != tc.want {
			t.Errorf("fmtDelta(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}
