package report

import (
	"io"

	"github.com/slogate/slogate/synth"
)

// WriteComparisonHTML writes c as one self-contained HTML page in the look of
// WriteHTML's (its style sheet, no script, no external asset), with the content of
// WriteComparisonMarkdown: dl#meta, table#runs, table#differences (or p#same), ul#summary,
// and per headline figure table#values-NAME and table#deltas-NAME (NAME as in the JSON:
// output_tok_per_s, ...). In those, a best cell is td.best, a change's td carries its
// movement as its class (better, worse, within_noise, state_changed, not_measured), and a
// cell that is not valid its state (state-rej, ...). All text from the reports is
// HTML-escaped. The page goes to w in a single Write.
func WriteComparisonHTML(w io.Writer, c Comparison) error {
	if err := c.check(); err != nil {
		return err
	}
	var d htmlDoc
	title := esc(c.workloadTitle())
	d.linef(`<!DOCTYPE html>`)
	d.linef(`<html lang="en">`)
	d.linef(`<head>`)
	d.linef(`<meta charset="utf-8">`)
	d.linef(`<meta name="viewport" content="width=device-width, initial-scale=1">`)
	d.linef(`<meta name="generator" content="slogate compare (%s)">`, esc(CompareSchema))
	d.linef(`<title>slogate compare: %s</title>`, title)
	d.linef(`<style>%s%s</style>`, pageCSS, compareCSS)
	d.linef(`</head>`)
	d.linef(`<body>`)
	d.linef(`<main>`)
	d.linef(`<h1>slogate compare: <span id="workload-name">%s</span></h1>`, title)
	d.linef(`<dl id="meta" class="meta">`)
	for _, f := range c.compareHeader() {
		d.linef(`<dt>%s</dt><dd>%s</dd>`, esc(f.key), esc(f.value))
	}
	d.linef(`</dl>`)
	d.linef(`<h2>Runs</h2>`)
	d.cmpTable(c.runsTable())
	d.linef(`<h2>What differed</h2>`)
	if len(c.Differences) == 0 {
		d.linef(`<p id="same" class="caption">%s</p>`, esc(sameText))
	} else {
		if t := c.differencesTable(false); len(t.rows) > 0 {
			d.cmpTable(t)
		}
		if t := c.differencesTable(true); len(t.rows) > 0 {
			open := ""
			if len(t.rows) <= shownFlags {
				open = " open"
			}
			d.linef(`<details id="flags"%s><summary>Engine flags that differ (%d)</summary>`, open, len(t.rows))
			d.cmpTable(t)
			d.linef(`</details>`)
		}
	}
	d.linef(`<h2>Summary</h2>`)
	d.linef(`<ul id="summary">`)
	for _, s := range c.Summary() {
		d.linef(`<li>%s</li>`, esc(s))
	}
	d.linef(`</ul>`)
	for _, f := range synth.Headline {
		d.linef(`<section id="figure-%s">`, esc(f.Name))
		d.linef(`<h2>%s</h2>`, esc(figureTitle(f)))
		d.linef(`<p class="caption">%s</p>`, esc(valuesCaption(f)))
		d.cmpTable(c.valuesTable(f))
		d.linef(`<p class="caption">%s</p>`, esc(c.deltasCaption()))
		d.cmpTable(c.deltasTable(f))
		d.linef(`</section>`)
	}
	d.linef(`<h2>Legend</h2>`)
	d.linef(`<ul id="legend" class="legend">`)
	for _, m := range moveMeanings {
		d.linef(`<li><b>%s</b>: %s.</li>`, esc(m.key), esc(m.value))
	}
	for _, s := range c.compareLegendStates() {
		d.linef(`<li data-state="%s"><b>%s</b>: %s.</li>`, esc(string(s)), esc(compareState(s)), esc(stateMeanings[s]))
	}
	d.linef(`</ul>`)
	d.WriteString("</main>\n</body>\n</html>\n")
	_, err := w.Write(d.Bytes())
	return err
}

// cmpTable writes a comparison table, its header cells th.
func (d *htmlDoc) cmpTable(t cmpTable) {
	num := ""
	if t.num {
		num = ` class="num"`
	}
	d.linef(`<div class="scroll"><table id="%s" class="compare">`, esc(t.id))
	d.printf(`<thead><tr><th>%s</th>`, esc(t.corner))
	for _, c := range t.cols {
		d.printf(`<th%s>%s</th>`, num, esc(c))
	}
	d.linef(`</tr></thead>`)
	d.linef(`<tbody>`)
	for _, r := range t.rows {
		d.printf(`<tr><th scope="row">%s</th>`, esc(r.head))
		for _, c := range r.cells {
			class := c.class
			if t.num {
				class += " num"
			}
			d.printf(`<td class="%s">%s</td>`, esc(class), esc(c.text))
		}
		d.linef(`</tr>`)
	}
	d.linef(`</tbody></table></div>`)
}

// compareCSS adds to pageCSS what a comparison's tables need: every row in full colour
// (pageCSS greys the rows of cells that are not valid), the best cell bold, changes in
// the colours of the gate's marks.
const compareCSS = `
table.compare td{color:#1d2330}
table.compare td:last-child{min-width:0}
table.compare tbody th{background:none;font-weight:600;text-align:left}
table.compare td.best{font-weight:700}
table.compare td.better{color:#1a7f37}
table.compare td.worse{color:#c62828;font-weight:600}
table.compare td.state_changed{color:#92400e;font-weight:600}
table.compare td.within_noise,table.compare td.not_measured,table.compare td[class^="state-"]{color:#6b7280}
`
