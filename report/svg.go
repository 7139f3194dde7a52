package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A small SVG line-chart writer for the HTML report: axes with ticks and grid lines,
// linear or logarithmic scales, one polyline per series (broken where a point is
// missing), a marker per point, dashed reference lines, annotated marks and a legend.
// Point and mark labels go where placeLabels puts them, so no two overlap and none
// leaves the plot area for the axes or the legend.
// Every text is escaped; coordinates are printed with one decimal, so output is
// deterministic.

// Chart geometry, in pixels.
const (
	chartW, chartH           = 620, 340
	chartLeft, chartRight    = 72, 160 // the right margin holds the legend
	chartTop, chartBottom    = 36, 50
	chartInset               = 12 // keeps extreme points off the frame
	legendRow, legendSwatchW = 18, 22
)

// Marker radii, in pixels.
const (
	pointR float64 = 3.5 // a point's marker
	markR  float64 = 10  // a mark's ring, to the outside of its stroke
)

// chart is one line chart.
type chart struct {
	id, title, xLabel, yLabel string
	x, y                      axis
	series                    []series
	refs                      []refLine
	marks                     []mark
	empty                     string // said instead of a plot when no series has a point
}

// axis maps data values onto pixels, linearly or logarithmically, and carries its ticks.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []tick
}

type tick struct {
	v     float64
	label string
}

// series is one line; points with ok false are gaps.
type series struct {
	name, color string
	pts         []point
}

type point struct {
	x, y  float64
	ok    bool
	title string // tooltip
	label string // printed beside the point, if any
}

// refLine is a dashed line between two points in data coordinates, with a legend entry.
type refLine struct {
	label, dash    string
	x0, y0, x1, y1 float64
}

// mark rings one point and labels it; attrs become data- attributes.
type mark struct {
	x, y  float64
	label string
	class string
	attrs [][2]string
}

// frac returns where v lies on the axis, 0 at lo and 1 at hi.
func (a axis) frac(v float64) float64 {
	lo, hi := a.lo, a.hi
	if a.log {
		if v <= 0 || lo <= 0 {
			return 0
		}
		v, lo, hi = math.Log(v), math.Log(lo), math.Log(hi)
	}
	if hi == lo {
		return 0.5
	}
	return (v - lo) / (hi - lo)
}

func (c chart) px(v float64) float64 {
	return chartLeft + chartInset + c.x.frac(v)*(chartW-chartLeft-chartRight-2*chartInset)
}

func (c chart) py(v float64) float64 {
	return chartH - chartBottom - chartInset - c.y.frac(v)*(chartH-chartTop-chartBottom-2*chartInset)
}

// write draws the chart into d as an <svg> element with the chart's id.
func (c chart) write(d *htmlDoc) {
	d.linef(`<svg id="%s" class="plot" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		esc(c.id), chartW, chartH, chartW, chartH, esc(c.title))
	d.linef(`<text class="title" x="%d" y="20">%s</text>`, chartLeft, esc(c.title))
	if !c.hasPoints() {
		d.linef(`<text class="empty" x="%d" y="%d" text-anchor="middle">%s</text></svg>`, chartW/2, chartH/2, esc(c.empty))
		return
	}
	c.frame(d)
	for _, r := range c.refs {
		d.linef(`<line class="ref" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#8a94a6" stroke-dasharray="%s"/>`,
			c.px(r.x0), c.py(r.y0), c.px(r.x1), c.py(r.y1), r.dash)
	}
	for _, s := range c.series {
		c.line(d, s)
	}
	marks, points := c.labels()
	for _, l := range points {
		if l.placed {
			d.linef(`<text class="point-label" x="%.1f" y="%.1f" font-size="%d">%s</text>`, l.box.x0+labelPad, l.box.y0+labelBase*labelSize, labelSize, esc(l.text))
		}
	}
	for i, m := range c.marks {
		c.mark(d, m, marks[i])
	}
	c.legend(d)
	d.WriteString("</svg>\n")
}

func (c chart) hasPoints() bool {
	for _, s := range c.series {
		if slices.ContainsFunc(s.pts, func(p point) bool { return p.ok }) {
			return true
		}
	}
	return false
}

// frame draws the plot area, grid lines, ticks and axis titles.
func (c chart) frame(d *htmlDoc) {
	x0, x1, y0, y1 := chartLeft, chartW-chartRight, chartTop, chartH-chartBottom
	d.linef(`<rect class="frame" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#c9ced8"/>`, x0, y0, x1-x0, y1-y0)
	for _, t := range c.y.ticks {
		y := c.py(t.v)
		d.linef(`<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eceef2"/>`, x0, y, x1, y)
		d.linef(`<text class="tick" x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, x0-6, y, esc(t.label))
	}
	for _, t := range c.x.ticks {
		x := c.px(t.v)
		d.linef(`<line class="grid" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eceef2"/>`, x, y0, x, y1)
		d.linef(`<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, y1+16, esc(t.label))
	}
	d.linef(`<text class="axis-title" x="%d" y="%d" text-anchor="middle">%s</text>`, (x0+x1)/2, chartH-12, esc(c.xLabel))
	d.linef(`<text class="axis-title" x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`,
		(y0+y1)/2, (y0+y1)/2, esc(c.yLabel))
}

// line draws a series: a polyline per run of consecutive points, and a marker per point.
func (c chart) line(d *htmlDoc, s series) {
	var run []string
	flush := func() {
		if len(run) > 1 {
			d.linef(`<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`,
				esc(s.name), s.color, strings.Join(run, " "))
		}
		run = run[:0]
	}
	for _, p := range s.pts {
		if !p.ok {
			flush()
			continue
		}
		run = append(run, fmt.Sprintf("%.1f,%.1f", c.px(p.x), c.py(p.y)))
	}
	flush()
	for _, p := range s.pts {
		if !p.ok {
			continue
		}
		x, y := c.px(p.x), c.py(p.y)
		d.linef(`<circle class="point" data-series="%s" cx="%.1f" cy="%.1f" r="%g" fill="%s"><title>%s</title></circle>`,
			esc(s.name), x, y, pointR, s.color, esc(p.title))
	}
}

// labels places the marks' labels and the points' (see placeLabels) inside the plot
// area: first the marks' (one per mark, in order), then those of the first and last
// labelled point of each series (these keep, so they may cover a marker), then the
// others from left to right. A point a mark rings is not labelled twice.
func (c chart) labels() (marks, points []label) {
	var markers []box
	var in []label
	for _, m := range c.marks {
		x, y := c.px(m.x), c.py(m.y)
		markers = append(markers, square(x, y, markR))
		in = append(in, label{text: m.label, x: x, y: y, clear: markR + 2, bold: true, keep: true, mark: true})
	}
	ringed := func(p point) bool {
		return slices.ContainsFunc(c.marks, func(m mark) bool { return m.x == p.x && m.y == p.y })
	}
	var ends, middle []label
	for _, s := range c.series {
		var own []label
		for _, p := range s.pts {
			if !p.ok {
				continue
			}
			x, y := c.px(p.x), c.py(p.y)
			markers = append(markers, square(x, y, pointR+1))
			if p.label != "" && !ringed(p) {
				own = append(own, label{text: p.label, x: x, y: y, clear: pointR + 2})
			}
		}
		if n := len(own); n > 0 { // the extremes keep their labels
			own[0].keep, own[n-1].keep = true, true
			ends = append(ends, own[0])
			if n > 1 {
				ends = append(ends, own[n-1])
				middle = append(middle, own[1:n-1]...)
			}
		}
	}
	slices.SortStableFunc(middle, func(a, b label) int { return cmp.Compare(a.x, b.x) })
	in = append(append(in, ends...), middle...)
	out := placeLabels(c.area(), markers, in)
	return out[:len(c.marks)], out[len(c.marks):]
}

// area is the plot area, inside the frame: labels stay in it, off the axes and legend.
func (c chart) area() box {
	return box{chartLeft, chartTop, chartW - chartRight, chartH - chartBottom}
}

// mark rings a point and writes its label where placeLabels put it (l).
func (c chart) mark(d *htmlDoc, m mark, l label) {
	x, y := c.px(m.x), c.py(m.y)
	d.printf(`<g class="%s"`, esc(m.class))
	for _, a := range m.attrs {
		d.printf(` data-%s="%s"`, esc(a[0]), esc(a[1]))
	}
	d.printf(`><circle cx="%.1f" cy="%.1f" r="%g" fill="none" stroke="#d97706" stroke-width="2"/>`, x, y, markR-1)
	if l.placed {
		d.printf("\n"+`<text class="mark-label" x="%.1f" y="%.1f" font-size="%d" fill="#b45309" font-weight="600">%s</text>`,
			l.box.x0+labelPad, l.box.y0+labelBase*labelSize, labelSize, esc(l.text))
	}
	d.linef(`</g>`)
}

// legend lists the series and reference lines in the right margin.
func (c chart) legend(d *htmlDoc) {
	x := chartW - chartRight + 14
	y := chartTop + 8
	for _, s := range c.series {
		d.linef(`<g class="legend-item"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`, x, y, x+legendSwatchW, y, s.color)
		d.linef(`<text x="%d" y="%d" dominant-baseline="middle">%s<title>%s</title></text></g>`, x+legendSwatchW+6, y, esc(clipRunes(s.name, 16)), esc(s.name))
		y += legendRow
	}
	for _, r := range c.refs {
		d.linef(`<g class="legend-item"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8a94a6" stroke-dasharray="%s"/>`, x, y, x+legendSwatchW, y, r.dash)
		d.linef(`<text x="%d" y="%d" dominant-baseline="middle">%s</text></g>`, x+legendSwatchW+6, y, esc(r.label))
		y += legendRow
	}
}

// linearAxis spans [lo, hi] widened to round ticks, about n of them: never more than
// 2n+3, whatever lo and hi are (a span that is not finite, or overflows when widened,
// gets no sensible ticks, but the axis ends).
func linearAxis(lo, hi float64, n int, format func(float64) string) axis {
	if !(hi > lo) {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / float64(n))
	a := axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step}
	for i := 0; i <= 2*n+2; i++ { // a step of at least raw/1.5 gives at most 1.5n+3
		v := roundSig(a.lo + float64(i)*step)
		if v > a.hi+step/2 {
			break
		}
		a.ticks = append(a.ticks, tick{v, format(v)})
	}
	return a
}

// niceStep rounds a raw tick step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / exp; {
	case f < 1.5:
		return exp
	case f < 3:
		return 2 * exp
	case f < 7:
		return 5 * exp
	}
	return 10 * exp
}

// logAxis spans [lo, hi] (both positive) widened to whole decades, with a tick at each
// decade, and at 2 and 5 times each decade when it spans fewer than three. It ends
// whatever lo and hi are, after at most 700 decades (more than a float64 spans).
func logAxis(lo, hi float64, format func(float64) string) axis {
	a := axis{log: true, lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi)))}
	if !(a.hi > a.lo) {
		a.hi = a.lo * 10
	}
	fine := math.Log10(a.hi/a.lo) < 3
	for dec, i := a.lo, 0; dec <= a.hi*1.0001 && i < 700; dec, i = dec*10, i+1 {
		for _, m := range []float64{1, 2, 5} {
			v := roundSig(dec * m)
			if (m == 1 || fine) && v <= a.hi*1.0001 {
				a.ticks = append(a.ticks, tick{v, format(v)})
			}
		}
	}
	return a
}

// valueAxis is a logarithmic axis whose ticks are the given values (concurrencies).
func valueAxis(values []int) axis {
	a := axis{log: true}
	for i, v := range values {
		if i == 0 || float64(v) < a.lo {
			a.lo = float64(v)
		}
		a.hi = max(a.hi, float64(v))
		a.ticks = append(a.ticks, tick{float64(v), strconv.Itoa(v)})
	}
	return a
}

// roundSig removes floating-point noise from a tick value (0.30000000000000004 → 0.3).
func roundSig(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return r
}
