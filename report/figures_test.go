package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestFigures: the figures written on their own are those of the HTML report: the
// heatmap of a matrix or shapes report with one rect.cell per cell, the scan charts
// under the given id prefix, and nothing for a report of the other kind.
func TestFigures(t *testing.T) {
	scan := scanReport()
	cases := []struct {
		name   string
		write  func(*bytes.Buffer) error
		want   []string
		cells  int // rect.cell elements
		absent []string
	}{
		{name: "matrix heatmap", write: func(b *bytes.Buffer) error { return WriteHeatmap(b, matrixReport()) },
			want: []string{`<svg id="heatmap"`, `id="heatmap-legend"`}, cells: len(matrixReport().Cells), absent: []string{"<html", "<style"}},
		{name: "shapes heatmap", write: func(b *bytes.Buffer) error { return WriteHeatmap(b, shapesReport()) },
			want: []string{`<svg id="heatmap"`}, cells: len(shapesReport().Cells)},
		{name: "no heatmap of a scan", write: func(b *bytes.Buffer) error { return WriteHeatmap(b, scan) }},
		{name: "scan charts", write: func(b *bytes.Buffer) error { return WriteScanCharts(b, scan, "x-") },
			want: []string{`<svg id="x-completion-plot"`, `<svg id="x-ttft-plot"`, `class="knee"`, `<table id="x-scan-table">`}},
		{name: "no scan charts of a matrix", write: func(b *bytes.Buffer) error { return WriteScanCharts(b, matrixReport(), "x-") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			if len(tc.want) == 0 && got != "" {
				t.Errorf("wrote %d bytes, want none", len(got))
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %s", w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(got, a) {
					t.Errorf("has %s", a)
				}
			}
			if n := strings.Count(got, `<rect class="cell"`); n != tc.cells {
				t.Errorf("%d rect.cell, want %d", n, tc.cells)
			}
		})
	}
	if !strings.Contains(HTMLStyle(), ".cell-label") {
		t.Error("HTMLStyle lacks the heatmap's styles")
	}
}
