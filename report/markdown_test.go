package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slogate/slogate/synth"
)

func TestMarkdownGolden(t *testing.T) {
	for name, rep := range reportFixtures() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, rep); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".md", buf.Bytes())
		})
	}
}

// hostileReport carries names and details that would break Markdown tables or inject
// HTML if they were not escaped.
func hostileReport() synth.Report {
	r := shapesReport()
	const row = "<script>alert(1)</script> a|b"
	r.Workload.Shapes = append(r.Workload.Shapes, synth.Shape{Name: row, Input: 10, Output: 10})
	r.Model = "<b>model</b> & `tick` [link](http://x)"
	r.Gate[1] = synth.Check{Name: "arithmetic", Verdict: synth.Fail, Reason: "answered \"41 | <i>\"\nwant 42"}
	c := validCell(row, 10, 10, 1, 12.5, 20, 1, 0, 0.06)
	c.Detail = "line one\nline | two <img src=x>"
	r.Cells = append(r.Cells, c)
	return r
}

// tableShapes returns, for each Markdown table in doc, the number of cells of each of its
// lines (counting unescaped pipes).
func tableShapes(doc string) [][]int {
	var tables [][]int
	var cur []int
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "|") {
			if cur != nil {
				tables = append(tables, cur)
				cur = nil
			}
			continue
		}
		pipes := 0
		for i := 0; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '|':
				pipes++
			}
		}
		cur = append(cur, pipes-1)
	}
	return tables
}

func TestMarkdownTablesAreRectangular(t *testing.T) {
	reports := reportFixtures()
	reports["hostile"] = hostileReport()
	for name, rep := range reports {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, rep); err != nil {
				t.Fatal(err)
			}
			tables := tableShapes(buf.String())
			if len(tables) < 2 {
				t.Fatalf("found %d tables", len(tables))
			}
			for i, tab := range tables {
				for j, n := range tab {
					if n != tab[0] {
						t.Errorf("table %d line %d has %d cells, its header %d", i, j, n, tab[0])
					}
				}
			}
		})
	}
}

func TestMarkdownEscapesReportText(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, hostileReport()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{"<", "[", "]", "`", "&"} {
		if i := unescaped(out, bad); i >= 0 {
			t.Errorf("unescaped %q in the Markdown at %.40q", bad, out[i:])
		}
	}
	for _, bad := range []string{"\nwant 42", "\nline | two"} {
		if strings.Contains(out, bad) {
			t.Errorf("a line break survived: %q", bad)
		}
	}
	for _, want := range []string{`\<script>alert(1)\</script> a\|b`, `\<b>model\</b> \& \` + "`tick\\`", `answered "41 \| \<i>" want 42`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the Markdown", want)
		}
	}
	// The rule of a knee the report carries is the report's text too.
	scan := scanReport()
	scan.Knee = &synth.KneeMark{Rate: 1.4, Rule: "<img src=x> & [link] `tick`"}
	buf.Reset()
	if err := WriteMarkdown(&buf, scan); err != nil {
		t.Fatal(err)
	}
	if want := "Knee: \\<img src=x> \\& \\[link\\] \\`tick\\`."; !strings.Contains(buf.String(), want) {
		t.Errorf("no %q in the Markdown:\n%s", want, buf.String())
	}
}

// unescaped returns the index of the first s in doc that no backslash escapes, or -1.
// Only the hostile report's text carries these characters.
func unescaped(doc, s string) int {
	for i := 0; i < len(doc); i++ {
		switch {
		case doc[i] == '\\':
			i++
		case strings.HasPrefix(doc[i:], s):
			return i
		}
	}
	return -1
}

func TestMarkdownSections(t *testing.T) {
	tests := []struct {
		name string
		rep  synth.Report
		want []string
		not  []string
	}{
		{"matrix", matrixReport(), []string{"## Prefill", "## Sustained decode", "| Context | 1 | 4 | 16 | 64 |",
			"- **Looped**:", "- **Over capacity**:", "- **rej**:", "- **n/c**:", "- **Failed**:", "- **Skipped**:", "- **—**:", "- **†**:",
			"| 251K | n/c | Skipped | Over capacity | — |", "| Prefill | 251K | 1 | Failed |"}, []string{"## Arrival-rate scan"}},
		{"shapes", shapesReport(), []string{"## Throughput by shape", "| Shape | 1 | 16 | 64 |", "| DOC-L | 95.1 | 180† | rej |"},
			[]string{"## Prefill", "- **Looped**"}},
		{"scan", scanReport(), []string{"## Arrival-rate scan", "Knee: 0.8×", "Valid · knee", "| 1.1× | 1.92 | 1.66 | 86.4% |"},
			[]string{"## Sustained decode", "## Prefill"}},
		{"gate failed", synth.Report{Workload: synth.Presets["shapes"], Gate: []synth.Check{{Name: "model_id", Verdict: synth.Fail, Reason: "model \"x\" not served"}}},
			[]string{"Failed: 1 of 1 checks failed. No load was sent.", "- ✗ **model_id**: fail — model \"x\" not served", "No cells were measured."}, nil},
		{"empty", synth.Report{}, []string{"# slogate probe: —", "Not run.", "## All measurements", "None."}, nil},
		{"scan without knee", func() synth.Report {
			r := scanReport()
			r.Cells = r.Cells[2:]
			r.Cells[0].SuccessRate = 0.9 // a tenth of the requests lost at the lowest rate
			return r
		}(), []string{"No knee: at the lowest rate, 1.92 req/s, 90% of the offered requests completed."}, []string{"· knee"}},
		{"knee as the report carries it", func() synth.Report {
			r := scanReport()
			r.Knee = &synth.KneeMark{Rate: 0.87, Rule: "0.87 req/s is the highest sustainable rate; at 1.4 req/s p95 TTFT 3.55s over the SLO 2s"}
			return r
		}(), []string{"Knee: 0.87 req/s is the highest sustainable rate; at 1.4 req/s p95 TTFT 3.55s over the SLO 2s.", "| 0.5× | 0.875 | 0.874 | 99.9% | 1,120 | 21.2 | 112 | 100% | Valid · knee |"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, tt.rep); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("no %q in:\n%s", w, buf.String())
				}
			}
			for _, n := range tt.not {
				if strings.Contains(buf.String(), n) {
					t.Errorf("unexpected %q", n)
				}
			}
		})
	}
}
