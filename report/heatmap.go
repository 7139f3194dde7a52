package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/slogate/slogate/synth"
)

// The heatmap of the HTML report: rows × concurrencies as an inline SVG grid. A valid
// cell is coloured by its throughput on a sequential scale (relative to the fastest
// cell) with the figure printed; every other state has its own neutral or hatched fill
// and prints its label.

// Heatmap geometry, in pixels.
const (
	heatLabelW = 120
	heatCellW  = 96
	heatCellH  = 38
	heatHeadH  = 46
)

// rampStops is the sequential scale for throughput, light to dark (ColorBrewer GnBu).
var rampStops = [][3]float64{{0xe0, 0xf3, 0xdb}, {0xa8, 0xdd, 0xb5}, {0x4e, 0xb3, 0xd3}, {0x2b, 0x8c, 0xbe}, {0x08, 0x40, 0x81}}

// ramp returns the colour at t in [0, 1] on the sequential scale.
func ramp(t float64) string {
	t = max(0, min(1, t))
	if math.IsNaN(t) {
		t = 0
	}
	pos := t * float64(len(rampStops)-1)
	i := min(int(pos), len(rampStops)-2)
	f := pos - float64(i)
	var rgb [3]int
	for k := range rgb {
		rgb[k] = int(math.Round(rampStops[i][k] + f*(rampStops[i+1][k]-rampStops[i][k])))
	}
	return fmt.Sprintf("#%02x%02x%02x", rgb[0], rgb[1], rgb[2])
}

// rampCSS is the scale as a CSS gradient, for the legend.
func rampCSS() string {
	stops := make([]string, len(rampStops))
	for i := range rampStops {
		stops[i] = ramp(float64(i) / float64(len(rampStops)-1))
	}
	return "linear-gradient(to right," + strings.Join(stops, ",") + ")"
}

// stateStyle is how a state other than valid is drawn: a fill, an optional hatch
// colour, and the colour of its label.
type stateStyle struct{ fill, hatch, ink string }

var stateStyles = map[synth.State]stateStyle{
	synth.LoopedState:  {"#f6e7c1", "#dcc07e", "#5c4708"},
	synth.OverCapacity: {"#e6e8ec", "#c5cad3", "#3f4656"},
	synth.Rejected:     {"#f7d7d7", "#dca0a0", "#7a1f1f"},
	synth.NotCompleted: {"#ecdff3", "#c7aad6", "#4f2a63"},
	synth.Failed:       {"#efc0c0", "", "#7a1f1f"},
	synth.Skipped:      {"#f3f4f6", "", "#5b6476"},
	notRun:             {"#ffffff", "", "#9aa3b2"},
}

func styleOf(s synth.State) stateStyle {
	if st, ok := stateStyles[s]; ok {
		return st
	}
	return stateStyle{"#eeeeee", "", "#333333"}
}

// svgFill is the state's SVG fill: a colour, or the hatch pattern of hatchPatterns.
func (st stateStyle) svgFill(s synth.State) string {
	if st.hatch != "" {
		return "url(#hatch-" + stateClass(s) + ")"
	}
	return st.fill
}

// css is the state's fill as a CSS background, for legend swatches.
func (st stateStyle) css() string {
	if st.hatch != "" {
		return fmt.Sprintf("repeating-linear-gradient(135deg,%s 0 5px,%s 5px 7px)", st.fill, st.hatch)
	}
	return st.fill
}

// heatmap writes svg#heatmap for g.
func (d *htmlDoc) heatmap(g grid) {
	maxV := maxThroughput(g)
	w, h := heatLabelW+heatCellW*len(g.cols)+4, heatHeadH+heatCellH*len(g.rows)+4
	d.linef(`<svg id="heatmap" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="Total output tok/s by %s and concurrency">`,
		w, h, w, h, esc(strings.ToLower(g.rowHead)))
	d.hatchPatterns()
	d.linef(`<text class="axis-title" x="%d" y="14" text-anchor="middle">simultaneous requests</text>`, heatLabelW+heatCellW*len(g.cols)/2)
	d.linef(`<text class="axis-title" x="%d" y="%d" text-anchor="end">%s</text>`, heatLabelW-8, heatHeadH-10, esc(g.rowHead))
	for j, conc := range g.cols {
		d.linef(`<text class="col-label" x="%d" y="%d" text-anchor="middle">%d</text>`, heatLabelW+j*heatCellW+heatCellW/2, heatHeadH-10, conc)
	}
	for i, row := range g.rows {
		y := heatHeadH + i*heatCellH
		d.linef(`<text class="row-label" x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s<title>%s</title></text>`,
			heatLabelW-8, y+heatCellH/2, esc(clipRunes(row, 14)), esc(row))
		for j, conc := range g.cols {
			c, ok := g.at(row, conc)
			d.heatCell(heatLabelW+j*heatCellW, y, gridKey{row, conc}, c, ok, maxV)
		}
	}
	d.linef(`</svg>`)
}

// heatCell writes one position of the heatmap: rect.cell for a report cell, rect.gap
// where the run ended before it.
func (d *htmlDoc) heatCell(x, y int, at gridKey, c synth.Cell, ok bool, maxV float64) {
	class, state := "cell", c.State
	if !ok {
		class, state = "gap", notRun
	}
	var fill, ink, text, tip string
	switch {
	case state == synth.Valid:
		t := 1.0
		if maxV > 0 {
			t = c.Throughput / maxV
		}
		fill, ink, text = ramp(t), "#10253a", fmtTokS(c.Throughput)
		if t > 0.55 {
			ink = "#ffffff"
		}
		if disagreed(c) {
			text += "†"
		}
		tip = fmt.Sprintf("%s tok/s · TTFT p95 %s ms · TPOT p95 %s ms", text, fmtMS(c.TTFTp95), fmtMS(c.TPOTp95))
	default:
		st := styleOf(state)
		fill, ink, text, tip = st.svgFill(state), st.ink, stateLabel(state), stateLabel(state)+": "+stateMeanings[state]
		if c.Detail != "" {
			tip = stateLabel(state) + ": " + c.Detail
		}
	}
	stroke := `stroke="#ffffff" stroke-width="2"`
	if !ok {
		stroke = `stroke="#c9ced8" stroke-dasharray="3 3"`
	}
	d.linef(`<rect class="%s" data-state="%s" data-row="%s" data-concurrency="%d" x="%d" y="%d" width="%d" height="%d" rx="3" fill="%s" %s><title>%s × %d: %s</title></rect>`,
		class, esc(string(state)), esc(at.row), at.conc, x+1, y+1, heatCellW-2, heatCellH-2, fill, stroke, esc(at.row), at.conc, esc(tip))
	d.linef(`<text class="cell-label" x="%d" y="%d" text-anchor="middle" dominant-baseline="middle" fill="%s">%s</text>`,
		x+heatCellW/2, y+heatCellH/2, ink, esc(text))
}

func maxThroughput(g grid) float64 {
	m := 0.0
	for _, c := range g.cells {
		if c.State == synth.Valid && !math.IsInf(c.Throughput, 0) {
			m = max(m, c.Throughput)
		}
	}
	return m
}

// hatchPatterns defines the hatch fills of the states that have one.
func (d *htmlDoc) hatchPatterns() {
	d.linef(`<defs>`)
	for _, s := range synth.States() {
		st := styleOf(s)
		if st.hatch == "" {
			continue
		}
		d.linef(`<pattern id="hatch-%s" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(45)"><rect width="8" height="8" fill="%s"/><rect width="2.5" height="8" fill="%s"/></pattern>`,
			stateClass(s), st.fill, st.hatch)
	}
	d.linef(`</defs>`)
}

// heatLegend explains the heatmap's colours: the throughput scale and each other state
// that occurs.
func (d *htmlDoc) heatLegend(g grid) {
	_, present, starred := gridTable(g)
	d.linef(`<div id="heatmap-legend" class="legend">`)
	if present[synth.Valid] {
		d.linef(`<div><span>0</span><span class="ramp" style="background:%s"></span><span>%s tok/s</span><span class="note">valid cells: total output tok/s, darker is faster</span></div>`,
			rampCSS(), fmtTokS(maxThroughput(g)))
	}
	d.linef(`<ul>`)
	for _, s := range legendStates(present) {
		d.linef(`<li data-state="%s"><span class="swatch" style="background:%s"></span><b>%s</b>: %s.</li>`,
			esc(string(s)), styleOf(s).css(), esc(stateLabel(s)), esc(stateMeanings[s]))
	}
	if starred {
		d.linef(`<li><span class="swatch" style="background:#ffffff;text-align:center;line-height:14px">†</span><b>†</b>: %s.</li>`, esc(starMeaning))
	}
	d.linef(`</ul>`)
	d.linef(`</div>`)
}
