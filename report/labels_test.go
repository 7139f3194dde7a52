package report

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// calibrationScan is the "medium" tier of a quick calibration against slogate sim
// --profile tiny (3,968 in / 128 out, SLO TTFT 2 s): three first rates, a step up, then
// the bisection that crowds the points near the knee at 222 req/s, as calibrate's
// Result.Reports gives it to the report writers.
func calibrationScan() synth.Report {
	ms := time.Millisecond
	tr := calibrate.TierResult{Tier: "medium", Shape: synth.Shape{Name: "medium", Input: 3968, Output: 128},
		SLO: measure.SLO{TTFT: measure.Duration(2 * time.Second)}, Reference: 96.2, Knee: 5, KneeRate: 222.2,
		Rule: "222 req/s is the highest sustainable rate; at 232 req/s p95 TTFT 2.455s over the SLO 2s"}
	for _, p := range []struct {
		off, thr float64
		p95      time.Duration
	}{{52.3, 51.3, 11 * ms}, {83.5, 81.4, 14 * ms}, {110, 107, 18 * ms}, {154, 150, 68 * ms}, {213, 207, 120 * ms},
		{222.2, 202, 804 * ms}, {232, 210, 2455 * ms}, {253, 214, 3387 * ms}, {300, 232, 3109 * ms}} {
		tr.Points = append(tr.Points, calibrate.Point{Offered: p.off, Throughput: p.thr, Completion: p.thr / p.off,
			TTFTp50: p.p95 / 2, TTFTp95: p.p95, TPOTp95: 5 * ms})
	}
	res := calibrate.Result{Started: fixtureStart, Finished: fixtureStart.Add(4 * time.Minute), Model: "tiny-model", Engine: "vllm",
		Tiers: []calibrate.TierResult{tr}}
	return res.Reports()[0]
}

// crowdedScan is a scan no calibration makes, to crowd the labels: 24 rates within 4%
// of each other around the knee, several offered at the same rate, with equal TTFTs.
func crowdedScan() synth.Report {
	r := scanReport()
	base := r.Cells[0]
	r.Cells = nil
	for i := range 24 {
		c := base
		c.Multiple = 1.2 + 0.002*float64(i/2) // pairs at one rate
		c.Rate = c.Multiple * r.Reference
		c.CompletionRate = c.Rate * (1 - 0.001*float64(i))
		c.TTFTp95 = 2 + float64(i%3)
		r.Cells = append(r.Cells, c)
	}
	return r
}

// checkPlaced fails unless every placed label of out lies inside area, no two come
// closer than labelGap, and no label that does not keep covers a marker.
func checkPlaced(t *testing.T, area box, markers []box, out []label) {
	t.Helper()
	for i, a := range out {
		if !a.placed {
			continue
		}
		if !a.box.within(area) || !finite(a.box.x0) || !finite(a.box.y1) {
			t.Fatalf("label %d %q at %+v, outside the area %+v", i, a.text, a.box, area)
		}
		for j, b := range out[:i] {
			if b.placed && a.box.overlaps(b.box, labelGap) {
				t.Fatalf("labels %d %q at %+v and %d %q at %+v overlap", j, b.text, b.box, i, a.text, a.box)
			}
		}
		if !a.keep {
			for _, m := range markers {
				if a.box.overlaps(m, 0) {
					t.Fatalf("label %d %q at %+v covers the marker %+v", i, a.text, a.box, m)
				}
			}
		}
	}
}

// TestPlaceLabels: whatever the points, the placed labels are inside the plot area and
// pairwise disjoint, a mark's label placed first is always placed, labels that have
// room are all placed, and the placement is the same every time.
func TestPlaceLabels(t *testing.T) {
	area := box{72, 36, 460, 290}
	points := func(n int, at func(i int) (float64, float64)) ([]box, []label) {
		var markers []box
		var ls []label
		for i := range n {
			x, y := at(i)
			markers = append(markers, square(x, y, pointR+1))
			ls = append(ls, label{text: fmt.Sprintf("%.2f×", 1+float64(i)/100), x: x, y: y, clear: pointR + 2})
		}
		return markers, ls
	}
	withMark := func(markers []box, ls []label, x, y float64) ([]box, []label) {
		return append(markers, square(x, y, markR)), append([]label{{text: "knee 1.23×", x: x, y: y, clear: markR + 2, bold: true, keep: true, mark: true}}, ls...)
	}
	type tc struct {
		name    string
		markers []box
		labels  []label
		all     bool // every label has room
	}
	var cases []tc
	add := func(name string, all bool, m []box, l []label) { cases = append(cases, tc{name, m, l, all}) }
	m, l := points(5, func(i int) (float64, float64) { return 100 + 80*float64(i), 250 - 45*float64(i) })
	add("spread", true, m, l)
	m, l = points(30, func(int) (float64, float64) { return 300, 150 })
	add("one pixel", false, m, l)
	m, l = points(30, func(i int) (float64, float64) { return 300, 60 + 7*float64(i) })
	add("equal x", false, m, l)
	m, l = points(40, func(i int) (float64, float64) { return 90 + 9*float64(i), 150 })
	add("equal y", false, m, l)
	m, l = points(40, func(i int) (float64, float64) { return 400 + 0.01*float64(i), 200 - 0.01*float64(i) })
	add("tiny spread", false, m, l)
	m, l = points(12, func(i int) (float64, float64) {
		return [2]float64{area.x0 + 12, area.x1 - 12}[i%2], [2]float64{area.y0 + 12, area.y1 - 12}[i/2%2]
	})
	add("corners", false, m, l)
	m, l = points(20, func(i int) (float64, float64) { return 380 + 3*float64(i), 80 + 2*float64(i) })
	m, l = withMark(m, l, 410, 100)
	add("knee among crowded points", false, m, l)
	m, l = points(6, func(i int) (float64, float64) { return 450 - float64(i), 40 })
	m, l = withMark(m, l, 455, 38)
	add("knee in the corner", false, m, l)
	m, l = points(3, func(i int) (float64, float64) { return []float64{-1e9, math.NaN(), math.Inf(1)}[i], 100 })
	add("anchors off the chart", false, m, l)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := placeLabels(area, c.markers, c.labels)
			checkPlaced(t, area, c.markers, out)
			n := 0
			for _, l := range out {
				if l.placed {
					n++
				}
			}
			if out[0].keep && !out[0].placed {
				t.Errorf("the mark's label %q was dropped", out[0].text)
			}
			if c.all && n != len(out) {
				t.Errorf("%d of %d labels placed, want all: they have room", n, len(out))
			}
			if n == 0 && c.name != "anchors off the chart" {
				t.Error("no label placed")
			}
			if again := placeLabels(area, c.markers, c.labels); fmt.Sprint(again) != fmt.Sprint(out) {
				t.Error("a second placement differs")
			}
			t.Logf("%d of %d labels placed", n, len(out))
		})
	}
}

// TestChartLabels: on the scan charts of a calibration and of a crowded scan, the
// knee's label is placed inside the plot area (off the axes, ticks and legend), so are
// the first and last rates' labels, no two labels overlap, the ringed point is not
// labelled twice, and a spread scan has every label.
func TestChartLabels(t *testing.T) {
	for name, rep := range map[string]synth.Report{"calibration": calibrationScan(), "crowded": crowdedScan(), "spread": scanReport()} {
		comp, lat := scanCharts(rep)
		for _, c := range []chart{comp, lat} {
			t.Run(name+"/"+c.id, func(t *testing.T) {
				marks, points := c.labels()
				if len(marks) != 1 || !marks[0].placed || !strings.HasPrefix(marks[0].text, "knee ") {
					t.Fatalf("the knee's label: %+v", marks)
				}
				all := append(marks, points...)
				checkPlaced(t, c.area(), nil, all)
				placed := map[string]bool{}
				for _, l := range all {
					if l.placed {
						placed[l.text] = true
					}
				}
				for _, l := range points {
					if l.x == marks[0].x && l.y == marks[0].y {
						t.Errorf("the knee's point is labelled again (%q)", l.text)
					}
				}
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, l := range points {
					lo, hi = min(lo, l.x), max(hi, l.x)
				}
				if first, last := points[0], points[1]; first.x != lo || last.x != hi || !first.placed || !last.placed {
					t.Errorf("the extremes are not labelled first: %+v, %+v", first, last)
				}
				if name == "spread" && len(placed) != len(all) {
					t.Errorf("%d of %d labels placed on a spread scan", len(placed), len(all))
				}
			})
		}
	}
}

// TestTextWidth: the estimate is at least what DejaVu Sans draws (its advance widths:
// digits 0.636 em, "." 0.318, "×" 0.838, "k" 0.579, "n" 0.634, "e" 0.615, space 0.318;
// the bold face's digits 0.696, "×" 0.838).
func TestTextWidth(t *testing.T) {
	for _, tc := range []struct {
		s    string
		bold bool
		em   float64
	}{
		{"1.25×", false, 3*0.636 + 0.318 + 0.838},
		{"knee 1.25×", true, 0.667 + 0.712 + 2*0.678 + 0.348 + 3*0.696 + 0.380 + 0.838},
		{"0.5×", false, 2*0.636 + 0.318 + 0.838},
	} {
		if got, floor := textWidth(tc.s, labelSize, tc.bold), tc.em*labelSize; got < floor {
			t.Errorf("%q: estimated %.1f px, DejaVu Sans draws %.1f px", tc.s, got, floor)
		}
	}
}

// FuzzPlaceLabels places arbitrary labels, anchors anywhere (inside, outside, not
// finite, crowded): the placed labels lie inside the area, none overlaps another, none
// that does not keep covers a marker, and a keeping label placed first is placed
// whenever its box fits the area.
func FuzzPlaceLabels(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x07\x00\x00\x00\x00\x07\x00\x00\x00\x00\x07"))
	f.Add([]byte("\x10\x00\x20\x00\x0b\x11\x00\x21\x00\x0a\x12\x00\x22\x00\x09\xff\x7f\xff\x7f\x3f\x00\x80\x00\x80\x80"))
	f.Add([]byte(strings.Repeat("\x01\x00\x01\x00\x22", 40)))
	const glyphs = "0123456789.×knee mW–"
	runes := []rune(glyphs)
	area := box{72, 36, 460, 290}
	f.Fuzz(func(t *testing.T, data []byte) {
		var markers []box
		var ls []label
		for len(data) >= 5 && len(ls) < 200 {
			x := 266 + float64(int16(binary.LittleEndian.Uint16(data)))/64 // ±512 px around the centre, 1/64 px steps
			y := 163 + float64(int16(binary.LittleEndian.Uint16(data[2:])))/64
			flags := data[4]
			data = data[5:]
			if flags&0x80 != 0 {
				x = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64}[flags&3]
			}
			var text strings.Builder
			for i := range int(flags>>2&0x1f) + 1 {
				text.WriteRune(runes[(i*7+int(flags))%len(runes)])
			}
			l := label{text: text.String(), x: x, y: y, clear: pointR + 2, keep: flags&1 != 0, mark: flags&2 != 0, bold: flags&1 != 0}
			r := pointR + 1
			if l.keep {
				l.clear, r = markR+2, markR
			}
			markers = append(markers, square(x, y, r))
			ls = append(ls, l)
		}
		out := placeLabels(area, markers, ls)
		checkPlaced(t, area, markers, out)
		if len(ls) > 0 && ls[0].keep && finite(ls[0].x) && finite(ls[0].y) {
			w, h := label{text: clipRunes(ls[0].text, labelRunes), bold: true}.size()
			if w <= area.x1-area.x0 && h <= area.y1-area.y0 && !out[0].placed {
				t.Fatalf("the first mark's label %q at (%v, %v) was dropped", ls[0].text, ls[0].x, ls[0].y)
			}
		}
	})
}
