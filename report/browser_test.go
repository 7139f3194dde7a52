package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogate/slogate/internal/browser"
	"github.com/slogate/slogate/synth"
)

// TestHTMLReportInBrowser opens a matrix report in headless Chromium: the rendered
// document holds the heatmap with one cell per report cell and both plots, and a
// screenshot of it is a real picture (not blank).
func TestHTMLReportInBrowser(t *testing.T) {
	chromium := browser.Find(t)
	var page bytes.Buffer
	rep := matrixReport()
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(chromium.Run(t, file, "--dump-dom"))
	for _, want := range []string{`id="heatmap"`, `id="throughput-plot"`, `id="ttft-plot"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered document lacks %s", want)
		}
	}
	if got := strings.Count(dom, `class="cell"`); got != len(rep.Cells) {
		t.Errorf("the rendered heatmap has %d cells, the report %d", got, len(rep.Cells))
	}
	img := chromium.Screenshot(t, file, "report.png", 1280, 1600)
	b := img.Bounds()
	colours := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 8 {
		for x := b.Min.X; x < b.Max.X; x += 8 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if b.Dx() != 1280 || b.Dy() != 1600 || len(colours) < 16 {
		t.Errorf("the screenshot is %dx%d with %d colours: not the rendered report", b.Dx(), b.Dy(), len(colours))
	}
}

// TestChartLabelsInBrowser lays out the scan charts of a calibration, of a crowded scan
// and of a spread one in Chromium, as the HTML report styles them, and checks with the
// browser's own boxes of the texts that no two labels overlap, that every label lies
// inside its plot area and off the chart's other texts (title, ticks, axis titles,
// legend), and that every knee is labelled.
func TestChartLabelsInBrowser(t *testing.T) {
	chromium := browser.Find(t)
	var page bytes.Buffer
	page.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><style>" + HTMLStyle() + "</style></head><body><main>\n")
	reports := map[string]synth.Report{"cal-": calibrationScan(), "crowded-": crowdedScan(), "spread-": scanReport()}
	for _, prefix := range []string{"cal-", "crowded-", "spread-"} {
		if err := WriteScanCharts(&page, reports[prefix], prefix); err != nil {
			t.Fatal(err)
		}
	}
	page.WriteString("</main></body></html>\n")
	layout := chromium.Measure(t, page.String(), 1280, 1000)
	if len(layout.Plots) != 6 {
		t.Fatalf("the browser found %d plots, want 6", len(layout.Plots))
	}
	for _, p := range layout.LabelProblems(0.5) {
		t.Error(p)
	}
	t.Logf("%d labels on %d plots", layout.Labels(), len(layout.Plots))
}
