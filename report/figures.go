package report

import (
	"io"

	"github.com/slogate/slogate/synth"
)

// The HTML report's figures on their own, for pages that embed them (the sidecar's
// status page), so there is one heatmap and one chart writer.

// WriteHeatmap writes the heatmap of a matrix or shapes report as WriteHTML draws it:
// svg#heatmap with one rect.cell per report cell (carrying data-state, data-row and
// data-concurrency, and a <title> tooltip) and a rect.gap where the run ended before a
// cell, then its legend, div#heatmap-legend. It writes nothing for a scan or a report
// without cells. All text from the report is HTML-escaped; the output goes to w in a
// single Write and assumes the style sheet HTMLStyle.
func WriteHeatmap(w io.Writer, r synth.Report) error {
	if r.Workload.Kind == synth.Scan || len(r.Cells) == 0 {
		return nil
	}
	var d htmlDoc
	g := newGrid(r)
	d.linef(`<div class="scroll">`)
	d.heatmap(g)
	d.linef(`</div>`)
	d.heatLegend(g)
	_, err := w.Write(d.Bytes())
	return err
}

// WriteScanCharts writes the charts of a scan report as WriteHTML draws them:
// completions and TTFT p95 against the offered rate, the knee ringed (g.knee, with
// data-multiple and data-rate), as svg#<idPrefix>completion-plot and
// svg#<idPrefix>ttft-plot, so that several scans can share a page; then, folded in a
// details element, the scan's table (table#<idPrefix>scan-table), which lists every
// point, labelled on the charts or not. It writes nothing for a report that is not a
// scan or has no cells. Text is escaped as by WriteHeatmap.
func WriteScanCharts(w io.Writer, r synth.Report, idPrefix string) error {
	if r.Workload.Kind != synth.Scan || len(r.Cells) == 0 {
		return nil
	}
	var d htmlDoc
	comp, lat := scanCharts(r)
	comp.id, lat.id = idPrefix+comp.id, idPrefix+lat.id
	d.linef(`<div class="plots">`)
	comp.write(&d)
	lat.write(&d)
	d.linef(`</div>`)
	d.linef(`<details class="points"><summary>Every point (%d)</summary>`, len(r.Cells))
	d.table(idPrefix+"scan-table", scanTable(r))
	d.linef(`</details>`)
	_, err := w.Write(d.Bytes())
	return err
}

// HTMLStyle returns the style sheet of WriteHTML's pages, which the figures of
// WriteHeatmap and WriteScanCharts are drawn for.
func HTMLStyle() string { return pageCSS }
