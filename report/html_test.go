package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/slogate/slogate/synth"
)

func writeHTML(t *testing.T, r synth.Report) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return buf.String(), doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasClass(n *html.Node, class string) bool {
	v, _ := attr(n, "class")
	for _, c := range strings.Fields(v) {
		if c == class {
			return true
		}
	}
	return false
}

// find returns every element under n (n included) for which match holds.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	if n.Type == html.ElementNode && match(n) {
		out = append([]*html.Node{n}, out...)
	}
	return out
}

func byID(doc *html.Node, id string) *html.Node {
	nodes := find(doc, func(n *html.Node) bool { v, _ := attr(n, "id"); return v == id })
	if len(nodes) != 1 {
		return nil
	}
	return nodes[0]
}

func elem(tag, class string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag && (class == "" || hasClass(n, class)) }
}

func TestHTMLGolden(t *testing.T) {
	out, _ := writeHTML(t, matrixReport())
	golden(t, "matrix.html", []byte(out))
}

func TestHTMLHeatmapHasOneCellPerReportCell(t *testing.T) {
	for name, rep := range map[string]synth.Report{"matrix": matrixReport(), "shapes": shapesReport()} {
		t.Run(name, func(t *testing.T) {
			_, doc := writeHTML(t, rep)
			heat := byID(doc, "heatmap")
			if heat == nil || heat.Data != "svg" {
				t.Fatal("no svg#heatmap")
			}
			want := map[string]synth.State{}
			for _, c := range rep.Cells {
				want[c.Row+" × "+strconv.Itoa(c.Concurrency)] = c.State
			}
			cells := find(heat, elem("rect", "cell"))
			if len(cells) != len(rep.Cells) {
				t.Errorf("%d rect.cell, want %d", len(cells), len(rep.Cells))
			}
			for _, n := range cells {
				row, _ := attr(n, "data-row")
				conc, _ := attr(n, "data-concurrency")
				state, _ := attr(n, "data-state")
				key := row + " × " + conc
				if w, ok := want[key]; !ok || string(w) != state {
					t.Errorf("cell %s: data-state %q, want %q", key, state, w)
				}
				delete(want, key)
			}
			g := newGrid(rep)
			gaps := find(heat, elem("rect", "gap"))
			if len(gaps) != len(g.rows)*len(g.cols)-len(rep.Cells) {
				t.Errorf("%d rect.gap for %d positions and %d cells", len(gaps), len(g.rows)*len(g.cols), len(rep.Cells))
			}
		})
	}
}

func TestHTMLLegendNamesEveryState(t *testing.T) {
	_, doc := writeHTML(t, matrixReport())
	legend := byID(doc, "heatmap-legend")
	if legend == nil {
		t.Fatal("no #heatmap-legend")
	}
	var got []string
	for _, li := range find(legend, elem("li", "")) {
		if s, ok := attr(li, "data-state"); ok {
			got = append(got, s)
		}
	}
	want := []string{"looped", "over_capacity", "rej", "n/c", "failed", "skipped", "not_run"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("legend states %v, want %v", got, want)
	}
}

func TestHTMLPlots(t *testing.T) {
	rep := matrixReport()
	_, doc := writeHTML(t, rep)
	valid := 0
	for _, c := range rep.Cells {
		if c.State == synth.Valid {
			valid++
		}
	}
	for _, id := range []string{"throughput-plot", "ttft-plot"} {
		plot := byID(doc, id)
		if plot == nil || plot.Data != "svg" {
			t.Fatalf("no svg#%s", id)
		}
		if n := len(find(plot, elem("circle", "point"))); n != valid {
			t.Errorf("%s: %d points, want one per valid cell (%d)", id, n, valid)
		}
		// 8K has four valid cells in a row; 32K and 128K only one each, so no line.
		lines := find(plot, elem("polyline", "series"))
		if len(lines) != 1 {
			t.Fatalf("%s: %d polylines, want 1", id, len(lines))
		}
		if s, _ := attr(lines[0], "data-series"); s != "8K" {
			t.Errorf("%s: line of %q, want 8K", id, s)
		}
		if pts, _ := attr(lines[0], "points"); len(strings.Fields(pts)) != 4 {
			t.Errorf("%s: 8K line has points %q, want 4", id, pts)
		}
	}
}

func TestHTMLScan(t *testing.T) {
	_, doc := writeHTML(t, scanReport())
	if byID(doc, "heatmap") != nil {
		t.Error("a scan has a heatmap")
	}
	for _, id := range []string{"completion-plot", "ttft-plot", "scan-table", "measurements"} {
		if byID(doc, id) == nil {
			t.Errorf("no #%s", id)
		}
	}
	for _, id := range []string{"completion-plot", "ttft-plot"} {
		knees := find(byID(doc, id), elem("g", "knee"))
		if len(knees) != 1 {
			t.Fatalf("%s: %d knee marks, want 1", id, len(knees))
		}
		if m, _ := attr(knees[0], "data-multiple"); m != "0.8" {
			t.Errorf("%s: knee at %s×, want 0.8×", id, m)
		}
		if n := len(find(byID(doc, id), elem("circle", "point"))); n != 3 {
			t.Errorf("%s: %d points, want 3", id, n)
		}
	}
	rows := find(byID(doc, "scan-table"), elem("tr", "knee"))
	if len(rows) != 1 || !strings.Contains(text(rows[0]), "0.8×") {
		t.Errorf("knee rows %d, want the 0.8× row", len(rows))
	}
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

func TestHTMLEscapesReportText(t *testing.T) {
	rep := hostileReport()
	out, doc := writeHTML(t, rep)
	if n := find(doc, func(n *html.Node) bool { return n.Data == "script" || n.Data == "img" || n.Data == "i" }); len(n) > 0 {
		t.Errorf("report text became elements: %d <%s>", len(n), n[0].Data)
	}
	const row = "<script>alert(1)</script> a|b"
	if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt; a|b") {
		t.Error("the row name is not escaped in the page")
	}
	cells := find(byID(doc, "heatmap"), func(n *html.Node) bool {
		v, _ := attr(n, "data-row")
		return n.Data == "rect" && hasClass(n, "cell") && v == row
	})
	if len(cells) != 1 {
		t.Errorf("%d heatmap cells for the row %q, want 1", len(cells), row)
	}
	if !strings.Contains(text(byID(doc, "meta")), rep.Model) {
		t.Error("the model name does not read back as text")
	}
	if !strings.Contains(text(byID(doc, "gate")), "answered \"41 | <i>\"\nwant 42") {
		t.Error("the gate reason does not read back as text")
	}
}

func TestHTMLSelfContained(t *testing.T) {
	for name, rep := range reportFixtures() {
		t.Run(name, func(t *testing.T) {
			_, doc := writeHTML(t, rep)
			for _, n := range find(doc, func(*html.Node) bool { return true }) {
				if n.Data == "script" || n.Data == "link" || n.Data == "img" || n.Data == "iframe" {
					t.Errorf("a <%s> element", n.Data)
				}
				for _, a := range n.Attr {
					if a.Key == "src" || a.Key == "href" || strings.HasPrefix(a.Key, "on") {
						t.Errorf("<%s %s=%q>", n.Data, a.Key, a.Val)
					}
				}
			}
		})
	}
}

var svgFragment = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// TestHTMLSVGIsWellFormedXML checks each inline SVG as strict XML, so that it also works
// when extracted into a .svg file.
func TestHTMLSVGIsWellFormedXML(t *testing.T) {
	reports := reportFixtures()
	reports["hostile"] = hostileReport()
	for name, rep := range reports {
		t.Run(name, func(t *testing.T) {
			out, _ := writeHTML(t, rep)
			frags := svgFragment.FindAllString(out, -1)
			if len(frags) < 2 {
				t.Fatalf("%d svg elements", len(frags))
			}
			for _, f := range frags {
				dec := xml.NewDecoder(strings.NewReader(f))
				dec.Strict = true
				for {
					_, err := dec.Token()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("%v in %.80s", err, f)
					}
				}
			}
		})
	}
}

func TestHTMLDegenerateReports(t *testing.T) {
	noKnee := scanReport()
	for i := range noKnee.Cells {
		noKnee.Cells[i].State, noKnee.Cells[i].Detail = synth.Failed, "3 transport"
	}
	beyond := scanReport() // figures no measurement gives, as a hand-edited file may hold
	beyond.Cells[0].Rate, beyond.Cells[1].CompletionRate, beyond.Cells[2].TTFTp95 = math.Inf(1), math.NaN(), 1e306
	gateFailed := synth.Report{Workload: synth.Presets["context-matrix"], Gate: []synth.Check{{Name: "model_id", Verdict: synth.Fail, Reason: "not served"}}}
	oneCell := synth.Report{Workload: synth.Workload{Name: "one", Kind: synth.Shapes, Concurrency: []int{8}},
		Cells: []synth.Cell{validCell("S", 100, 10, 8, 500, 50, 1, 0, 0.06)}}
	tests := map[string]struct {
		rep  synth.Report
		want []string
	}{
		"empty":       {synth.Report{}, []string{"Not run."}},
		"gate failed": {gateFailed, []string{"Failed: 1 of 1 checks failed.", "No cells were measured."}},
		"no knee":     {noKnee, []string{"No knee", "No valid offered rate to plot."}},
		"beyond":      {beyond, []string{`id="completion-plot"`, `id="ttft-plot"`}},
		"one cell":    {oneCell, []string{`id="heatmap"`, `data-state="valid"`}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			out, _ := writeHTML(t, tt.rep)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q", w)
				}
			}
			if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
				t.Error("a NaN or Inf coordinate")
			}
		})
	}
}
