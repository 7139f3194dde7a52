package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/slogate/slogate/synth"
)

// WriteMarkdown writes r as a Markdown document laid out like the results of the
// published write-ups (docs/simulator.md): a header (workload, target, model, engine and
// its version, KV capacity, times, then the engine's flags as a nested list), the functional gate, then by the workload's kind the prefill table and the sustained-decode
// matrix, the shapes matrix, or the rate-scan table with its knee, and last every
// measurement in one table. Text taken from the report is escaped, so no name, reason or
// detail can break a table or inject HTML. The document goes to w in a single Write.
func WriteMarkdown(w io.Writer, r synth.Report) error {
	var d mdDoc
	d.header(r)
	d.gate(r)
	switch r.Workload.Kind {
	case synth.Matrix:
		d.prefill(r)
		d.grid(r, "Sustained decode", "Total output tok/s · rows are context length, columns are simultaneous requests.")
	case synth.Shapes:
		d.h2("Throughput by shape")
		d.para("Shapes: " + mdEsc(shapesSummary(r.Workload.Shapes)) + ".")
		d.grid(r, "", "Total output tok/s · rows are workload shapes, columns are simultaneous requests.")
	case synth.Scan:
		d.scan(r)
	}
	d.measurements(r)
	_, err := w.Write(d.Bytes())
	return err
}

// mdDoc accumulates a Markdown document.
type mdDoc struct{ bytes.Buffer }

func (d *mdDoc) h2(title string) { fmt.Fprintf(d, "## %s\n\n", title) }

func (d *mdDoc) para(text string) { fmt.Fprintf(d, "%s\n\n", text) }

func (d *mdDoc) header(r synth.Report) {
	fmt.Fprintf(d, "# slogate probe: %s\n\n", mdEsc(orDash(r.Workload.Name)))
	for _, f := range headerFields(r) {
		fmt.Fprintf(d, "- **%s:** %s\n", f.key, mdEsc(f.value))
	}
	if flags := engineFlags(r); len(flags) > 0 {
		fmt.Fprintf(d, "- **%s:**\n", flagsTitle(len(flags)))
		for _, f := range flags {
			fmt.Fprintf(d, "  - %s = %s\n", mdEsc(f.key), mdEsc(f.value))
		}
	}
	d.WriteString("\n")
}

func (d *mdDoc) gate(r synth.Report) {
	d.h2("Functional gate")
	d.para(gateSummary(r))
	if len(r.Gate) == 0 {
		return
	}
	for _, c := range r.Gate {
		line := fmt.Sprintf("- %s **%s**: %s", verdictMark(c.Verdict), mdEsc(c.Name), mdEsc(string(c.Verdict)))
		if c.Reason != "" {
			line += " — " + mdEsc(c.Reason)
		}
		d.WriteString(line + "\n")
	}
	d.WriteString("\n")
}

func (d *mdDoc) prefill(r synth.Report) {
	d.h2("Prefill")
	if len(r.Prefill) == 0 {
		d.para("Not measured.")
		return
	}
	d.para("Prompt tok/s and TTFT of one request per context length, measured on the row's warm-up.")
	d.table(prefillTable(r))
}

// grid writes the matrix of a matrix or shapes report and its legend.
func (d *mdDoc) grid(r synth.Report, title, caption string) {
	if title != "" {
		d.h2(title)
	}
	if len(r.Cells) == 0 {
		d.para("No cells were measured.")
		return
	}
	g := newGrid(r)
	d.para(caption)
	t, present, starred := gridTable(g)
	d.table(t)
	for _, s := range legendStates(present) {
		fmt.Fprintf(d, "- **%s**: %s.\n", mdEsc(stateLabel(s)), stateMeanings[s])
	}
	if starred {
		fmt.Fprintf(d, "- **†**: %s.\n", starMeaning)
	}
	if len(legendStates(present)) > 0 || starred {
		d.WriteString("\n")
	}
}

func (d *mdDoc) scan(r synth.Report) {
	d.h2("Arrival-rate scan")
	if len(r.Cells) == 0 {
		d.para("No offered rate was measured.")
		return
	}
	d.para(fmt.Sprintf("Open-loop arrivals at multiples of %s. Completed / offered is the share of the offered rate that completed.",
		mdEsc(referenceSummary(r))))
	d.table(scanTable(r))
	_, knee := scanKnee(r)
	d.para(mdEsc(knee))
}

func (d *mdDoc) measurements(r synth.Report) {
	d.h2("All measurements")
	t := measurementsTable(r)
	if len(t.rows) == 0 {
		d.para("None.")
		return
	}
	d.para("Figures are medians over the rounds without failures; TTFT, TPOT and ITL are per request. Total tok/s is output across all simultaneous requests (prompt tok/s for prefill).")
	d.table(t)
}

// table writes a GitHub-flavoured Markdown table, numeric columns aligned right.
func (d *mdDoc) table(t table) {
	d.row(t.head)
	d.WriteString("|")
	for i := range t.head {
		if i < len(t.num) && t.num[i] {
			d.WriteString("---:|")
		} else {
			d.WriteString("---|")
		}
	}
	d.WriteString("\n")
	for _, r := range t.rows {
		d.row(r.cells)
	}
	d.WriteString("\n")
}

func (d *mdDoc) row(cells []string) {
	d.WriteString("|")
	for _, c := range cells {
		d.WriteString(" " + mdEsc(c) + " |")
	}
	d.WriteString("\n")
}

// mdEscaper backslash-escapes what could end a table cell, open a link, code span or
// emphasis, or start raw HTML or an entity, and folds line breaks into spaces. (A ">"
// needs no escape: it quotes only at the start of a line, where report text never is.)
var mdEscaper = strings.NewReplacer(
	"\r\n", " ", "\n", " ", "\r", " ",
	`\`, `\\`, "`", "\\`", "*", `\*`, "[", `\[`, "]", `\]`, "<", `\<`, "|", `\|`, "&", `\&`,
)

// mdEsc makes text from a report safe inside Markdown prose and table cells.
func mdEsc(s string) string { return mdEscaper.Replace(s) }
