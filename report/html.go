package report

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/slogate/slogate/synth"
)

// WriteHTML writes r as one self-contained HTML page: inline CSS and inline SVG, no
// script and no external asset, so it opens offline. It carries the header and the gate
// of WriteMarkdown (the engine's flags, if it reported any, folded in
// details#engine-flags), then by the workload's kind:
//   - matrix: the prefill table (table#prefill-table);
//   - matrix and shapes: a heatmap of total output tok/s (svg#heatmap, with one
//     rect.cell per report cell carrying data-state, data-row and data-concurrency, and
//     rect.gap where the run ended before a cell) with its legend, and the charts
//     svg#throughput-plot and svg#ttft-plot (one line per row against concurrency);
//   - scan: its table (table#scan-table) and the charts svg#completion-plot and
//     svg#ttft-plot against the offered rate, the knee ringed (g.knee, data-multiple);
//
// and last every measurement (table#measurements). All text from the report is
// HTML-escaped. The page goes to w in a single Write.
func WriteHTML(w io.Writer, r synth.Report) error {
	var d htmlDoc
	d.open(r)
	d.header(r)
	d.gate(r)
	switch r.Workload.Kind {
	case synth.Matrix:
		d.prefill(r)
		d.matrix(r, "Sustained decode", "Total output tok/s · rows are context length, columns are simultaneous requests.")
	case synth.Shapes:
		d.matrix(r, "Throughput by shape", "Total output tok/s · rows are workload shapes ("+shapesSummary(r.Workload.Shapes)+"), columns are simultaneous requests.")
	case synth.Scan:
		d.scan(r)
	}
	d.measurements(r)
	d.WriteString("</main>\n</body>\n</html>\n")
	_, err := w.Write(d.Bytes())
	return err
}

// htmlDoc accumulates an HTML page.
type htmlDoc struct{ bytes.Buffer }

func (d *htmlDoc) printf(format string, args ...any) { fmt.Fprintf(d, format, args...) }

// linef writes one line: the formatted text and a newline.
func (d *htmlDoc) linef(format string, args ...any) { fmt.Fprintf(d, format+"\n", args...) }

// esc escapes text for HTML content and quoted attribute values.
func esc(s string) string { return html.EscapeString(s) }

func (d *htmlDoc) open(r synth.Report) {
	name := esc(orDash(r.Workload.Name))
	d.linef(`<!DOCTYPE html>`)
	d.linef(`<html lang="en">`)
	d.linef(`<head>`)
	d.linef(`<meta charset="utf-8">`)
	d.linef(`<meta name="viewport" content="width=device-width, initial-scale=1">`)
	d.linef(`<meta name="generator" content="slogate probe (%s)">`, esc(synth.SchemaVersion))
	d.linef(`<title>slogate probe: %s</title>`, name)
	d.linef(`<style>%s</style>`, pageCSS)
	d.linef(`</head>`)
	d.linef(`<body>`)
	d.linef(`<main>`)
	d.linef(`<h1>slogate probe: <span id="workload-name">%s</span></h1>`, name)
}

func (d *htmlDoc) header(r synth.Report) {
	d.linef(`<dl id="meta" class="meta">`)
	for _, f := range headerFields(r) {
		d.linef(`<dt>%s</dt><dd>%s</dd>`, esc(f.key), esc(f.value))
	}
	d.linef(`</dl>`)
	if flags := engineFlags(r); len(flags) > 0 {
		d.linef(`<details id="engine-flags"><summary>%s</summary>`, esc(flagsTitle(len(flags))))
		d.linef(`<dl class="meta">`)
		for _, f := range flags {
			d.linef(`<dt>%s</dt><dd>%s</dd>`, esc(f.key), esc(f.value))
		}
		d.linef(`</dl></details>`)
	}
}

func (d *htmlDoc) gate(r synth.Report) {
	d.linef(`<section id="gate">`)
	d.linef(`<h2>Functional gate</h2>`)
	d.linef(`<p class="caption">%s</p>`, esc(gateSummary(r)))
	if len(r.Gate) > 0 {
		d.linef(`<ul class="gate">`)
		for _, c := range r.Gate {
			v := cssToken(string(c.Verdict))
			d.printf(`<li class="check %s" data-verdict="%s"><span class="mark">%s</span> <b>%s</b> <span class="verdict">%s</span>`,
				v, v, verdictMark(c.Verdict), esc(c.Name), esc(string(c.Verdict)))
			if c.Reason != "" {
				d.printf(` — %s`, esc(c.Reason))
			}
			d.linef(`</li>`)
		}
		d.linef(`</ul>`)
	}
	d.linef(`</section>`)
}

func (d *htmlDoc) prefill(r synth.Report) {
	d.linef(`<section id="prefill">`)
	d.linef(`<h2>Prefill</h2>`)
	if len(r.Prefill) == 0 {
		d.linef(`<p class="caption">Not measured.</p></section>`)
		return
	}
	d.linef(`<p class="caption">Prompt tok/s and TTFT of one request per context length, measured on the row's warm-up.</p>`)
	d.table("prefill-table", prefillTable(r))
	d.linef(`</section>`)
}

// matrix writes the heatmap of a matrix or shapes report, its legend and its charts.
func (d *htmlDoc) matrix(r synth.Report, title, caption string) {
	d.linef(`<section id="decode">`)
	d.linef(`<h2>%s</h2>`, esc(title))
	if len(r.Cells) == 0 {
		d.linef(`<p class="caption">No cells were measured.</p></section>`)
		return
	}
	g := newGrid(r)
	d.linef(`<p class="caption">%s</p>`, esc(caption))
	d.linef(`<div class="scroll">`)
	d.heatmap(g)
	d.linef(`</div>`)
	d.heatLegend(g)
	d.linef(`<div class="plots">`)
	throughputChart(g).write(d)
	ttftChart(g).write(d)
	d.linef(`</div>`)
	d.linef(`</section>`)
}

func (d *htmlDoc) scan(r synth.Report) {
	d.linef(`<section id="scan">`)
	d.linef(`<h2>Arrival-rate scan</h2>`)
	if len(r.Cells) == 0 {
		d.linef(`<p class="caption">No offered rate was measured.</p></section>`)
		return
	}
	d.linef(`<p class="caption">Open-loop arrivals at multiples of %s. Completed / offered is the share of the offered rate that completed.</p>`,
		esc(referenceSummary(r)))
	d.table("scan-table", scanTable(r))
	_, knee := scanKnee(r)
	d.linef(`<p id="knee" class="knee-note">%s</p>`, esc(knee))
	comp, lat := scanCharts(r)
	d.linef(`<div class="plots">`)
	comp.write(d)
	lat.write(d)
	d.linef(`</div>`)
	d.linef(`</section>`)
}

func (d *htmlDoc) measurements(r synth.Report) {
	d.linef(`<section id="all-measurements">`)
	d.linef(`<h2>All measurements</h2>`)
	d.linef(`<p class="caption">Figures are medians over the rounds without failures; TTFT, TPOT and ITL are per request. Total tok/s is output across all simultaneous requests (prompt tok/s for prefill).</p>`)
	d.table("measurements", measurementsTable(r))
	d.linef(`</section>`)
}

// table writes t with the given id; numeric columns are aligned right.
func (d *htmlDoc) table(id string, t table) {
	num := func(i int) string {
		if i < len(t.num) && t.num[i] {
			return ` class="num"`
		}
		return ""
	}
	d.linef(`<div class="scroll"><table id="%s">`, esc(id))
	d.printf(`<thead><tr>`)
	for i, h := range t.head {
		d.printf(`<th%s>%s</th>`, num(i), esc(h))
	}
	d.linef(`</tr></thead>`)
	d.linef(`<tbody>`)
	for _, r := range t.rows {
		d.printf(`<tr class="%s">`, esc(r.class))
		for i, c := range r.cells {
			d.printf(`<td%s>%s</td>`, num(i), esc(c))
		}
		d.linef(`</tr>`)
	}
	d.linef(`</tbody></table></div>`)
}

// cssToken keeps the characters of s that may stand in a class name or an id.
func cssToken(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return -1
	}, strings.ToLower(s))
}

// pageCSS styles the page; it is the page's only style sheet.
const pageCSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1d2330;background:#fff;margin:0}
main{max-width:1280px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 12px}
h1 span{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
h2{font-size:17px;margin:30px 0 6px;padding-bottom:4px;border-bottom:1px solid #dde1e8}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
.meta dt{color:#5b6476}.meta dd{margin:0}
.caption{color:#5b6476;margin:4px 0 10px}
ul.gate{list-style:none;padding:0;margin:0}
.gate li{margin:2px 0}.gate .mark{display:inline-block;width:1.2em;font-weight:700}
.gate .pass .mark{color:#1a7f37}.gate .fail .mark,.gate .fail .verdict{color:#c62828;font-weight:600}.gate .skipped .mark{color:#6b7280}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:3px 9px;border-bottom:1px solid #e6e9ef;text-align:left;white-space:nowrap}
th{background:#f5f6f8;font-weight:600}
.num{text-align:right}
td:last-child{white-space:normal;min-width:12em}
tr:not(.state-valid) td{color:#6b7280}
tr.knee td{background:#fff4d6;color:#1d2330;font-weight:600}
.knee-note{font-weight:600;color:#92400e}
.legend{margin:8px 0 4px}
.legend ul{list-style:none;padding:0;margin:6px 0 0}
.legend li{margin:3px 0}
.swatch{display:inline-block;width:26px;height:14px;border:1px solid #b6bcc8;border-radius:2px;vertical-align:-2px;margin-right:8px}
.ramp{display:inline-block;width:180px;height:12px;border:1px solid #b6bcc8;vertical-align:-1px;margin:0 6px}
.note{color:#5b6476;margin-left:10px}
.plots{display:flex;flex-wrap:wrap;gap:12px 24px;margin-top:16px}
svg{font-family:inherit;font-size:11px;overflow:visible}
svg .title{font-size:13px;font-weight:600;fill:#1d2330}
svg .tick,svg .point-label{fill:#5b6476}
svg .axis-title{fill:#5b6476;font-size:12px}
svg .row-label{font-size:12px;font-weight:600;fill:#1d2330}
svg .cell-label{font-size:11px;pointer-events:none}
svg .empty{fill:#6b7280;font-size:13px}
`
