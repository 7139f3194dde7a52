// Package report writes the prober's results, synth.Report, in the forms people and
// programs read: JSON, the report's data contract (WriteJSON, and ReadJSON to read it
// back), a Markdown document laid out like the published benchmark write-ups (docs/simulator.md)
// (WriteMarkdown), one self-contained HTML page with inline SVG figures (WriteHTML),
// and those figures on their own for pages that embed them (WriteHeatmap,
// WriteScanCharts, HTMLStyle).
//
// No writer changes the report it is given. Each hands its output to the io.Writer in
// at most one Write, so a failed encoding leaves nothing half written; text taken from
// the report is escaped for the form written, and a password in the report's target URL
// is masked. The JSON carries synth.SchemaVersion, and ReadJSON reads only that version.
// Package synth measures and knows nothing of these forms.
//
// A rate scan's knee is slogate calibrate's: the knee the report carries
// (synth.Report.Knee, which a calibration marks as it chose it under the tier's SLO),
// else the one calibrate.ScanKnee finds among the valid cells with no SLO, as a probe's
// scan has none. The knee's row, its ring on the charts and the sentence stating it (or
// that there is none, and why) all follow that one choice.
//
// On a chart no two labels overlap and none leaves the plot area for the axes or the
// legend: a label with no free place beside its point is left off (the knee's and the
// first and last rates' are kept), and the scan's table lists every point.
package report
