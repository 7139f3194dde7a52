package report

import (
	"fmt"
	"io"

	"github.com/slogate/slogate/synth"
)

// WriteComparisonMarkdown writes c as a Markdown document: a header (workload, plan,
// baseline), the runs, what differed between them, a summary line per run, and per
// headline figure (synth.Headline) a table of every run's values, the best of each cell
// bold and starred, and a table of each run's changes from the baseline. Text from the
// reports is escaped. The document goes to w in a single Write.
func WriteComparisonMarkdown(w io.Writer, c Comparison) error {
	if err := c.check(); err != nil {
		return err
	}
	var d mdDoc
	fmt.Fprintf(&d, "# slogate compare: %s\n\n", mdEsc(c.workloadTitle()))
	for _, f := range c.compareHeader() {
		fmt.Fprintf(&d, "- **%s:** %s\n", f.key, mdEsc(f.value))
	}
	d.WriteString("\n")
	d.h2("Runs")
	d.cmpTable(c.runsTable())
	d.h2("What differed")
	if len(c.Differences) == 0 {
		d.para(sameText)
	} else {
		if t := c.differencesTable(false); len(t.rows) > 0 {
			d.cmpTable(t)
		}
		if t := c.differencesTable(true); len(t.rows) > 0 {
			d.para(fmt.Sprintf("Engine flags that differ (%d):", len(t.rows)))
			d.cmpTable(t)
		}
	}
	d.h2("Summary")
	for _, s := range c.Summary() {
		d.WriteString("- " + mdEsc(s) + "\n")
	}
	d.WriteString("\n")
	for _, f := range synth.Headline {
		d.h2(figureTitle(f))
		d.para(mdEsc(valuesCaption(f)))
		d.cmpTable(c.valuesTable(f))
		d.para(mdEsc(c.deltasCaption()))
		d.cmpTable(c.deltasTable(f))
	}
	d.h2("Legend")
	for _, m := range moveMeanings {
		fmt.Fprintf(&d, "- **%s**: %s.\n", m.key, m.value)
	}
	for _, s := range c.compareLegendStates() {
		fmt.Fprintf(&d, "- **%s**: %s.\n", mdEsc(compareState(s)), stateMeanings[s])
	}
	_, err := w.Write(d.Bytes())
	return err
}

// cmpTable writes a comparison table; a best cell is bold.
func (d *mdDoc) cmpTable(t cmpTable) {
	d.WriteString("| " + mdEsc(t.corner) + " |")
	for _, c := range t.cols {
		d.WriteString(" " + mdEsc(c) + " |")
	}
	d.WriteString("\n|---|")
	for range t.cols {
		if t.num {
			d.WriteString("---:|")
		} else {
			d.WriteString("---|")
		}
	}
	d.WriteString("\n")
	for _, r := range t.rows {
		d.WriteString("| " + mdEsc(r.head) + " |")
		for _, c := range r.cells {
			s := mdEsc(c.text)
			if c.best {
				s = "**" + s + "**"
			}
			d.WriteString(" " + s + " |")
		}
		d.WriteString("\n")
	}
	d.WriteString("\n")
}
