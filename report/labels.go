package report

import (
	"math"
	"slices"
)

// Where a chart's labels go. Each label gets a box beside its point, in priority order:
// the first of a fixed list of positions (above, below, the diagonals, right, left)
// where the box lies inside the plot area, clear of every point's marker and
// of every label placed before it. A label with no such position is left off: its point
// keeps its tooltip, and the report's tables list every point. A label that keeps (a
// mark's, an extreme point's) is placed before the others, over a marker or pushed
// inside the area when nothing else is free, but never over another label.
//
// A box is estimated from the text's length at the label font size with widths at
// least those of the common sans-serif faces (DejaVu Sans, Liberation Sans, Noto Sans)
// and the height of the tallest of them, so the glyphs a browser draws stay inside it.
// The placement depends on its input only, so a chart's bytes do too.

// Label metrics, in pixels unless said otherwise.
const (
	labelSize   = 11   // font size of point and mark labels (the charts set it on each label)
	labelHeight = 1.4  // a box's height, in ems: Noto Sans's ascent and descent are 1.36 em
	labelBase   = 1.07 // from a box's top to the text's baseline, in ems
	labelPad    = 2    // on each side of the text
	labelGap    = 1    // between two labels' boxes, more than coordinate rounding moves them
	labelRunes  = 20   // longer label texts are clipped
)

// box is an axis-aligned rectangle in a chart's pixels.
type box struct{ x0, y0, x1, y1 float64 }

// overlaps reports whether b and o come closer than gap.
func (b box) overlaps(o box, gap float64) bool {
	return b.x0 < o.x1+gap && o.x0 < b.x1+gap && b.y0 < o.y1+gap && o.y0 < b.y1+gap
}

// within reports whether b lies inside o.
func (b box) within(o box) bool {
	return b.x0 >= o.x0 && b.y0 >= o.y0 && b.x1 <= o.x1 && b.y1 <= o.y1
}

// square is the box of a marker of radius r at (x, y).
func square(x, y, r float64) box { return box{x - r, y - r, x + r, y + r} }

// textWidth estimates the advance width of s at size px, never less than the common
// sans-serif faces draw it (their digits are 0.56–0.64 em, × is 0.84 em in DejaVu Sans,
// bold is up to a tenth wider).
func textWidth(s string, size float64, bold bool) float64 {
	em := 0.0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			em += 0.64
		case r == '.' || r == ',' || r == ':' || r == ';' || r == ' ' || r == '\'' || r == '!' || r == '|' ||
			r == 'i' || r == 'j' || r == 'l' || r == 'f' || r == 't' || r == 'r' || r == 'I':
			em += 0.42
		case r == 'm' || r == 'w' || r == 'M' || r == 'W':
			em += 1.0
		case r >= 'a' && r <= 'z':
			em += 0.64
		case r >= 'A' && r <= 'Z':
			em += 0.78
		case r == '×' || r == '+' || r == '-' || r == '=' || r == '<' || r == '>' || r == '%' || r == '/':
			em += 0.9
		default:
			em += 1.05 // dashes, symbols, wide scripts
		}
	}
	if bold {
		em *= 1.1
	}
	return em * size
}

// label is a text to place beside its anchor, and where it went.
type label struct {
	text  string
	x, y  float64 // the anchor: the point the label names, in pixels
	clear float64 // the box keeps this far from the anchor (its marker's radius and a margin)
	bold  bool
	keep  bool // placed before the others, over a marker if need be
	mark  bool // tried right of the anchor first, as a ringed point's label reads best

	box    box  // where the text goes, when placed
	placed bool //
}

// size returns the width and height of l's box.
func (l label) size() (float64, float64) {
	return textWidth(l.text, labelSize, l.bold) + 2*labelPad, labelHeight * labelSize
}

// candidates are the boxes l may take, in order of preference: above and below its
// anchor (slid sideways to stay inside area, as far as the anchor stays under the box),
// the diagonals, then right and left (slid up or down likewise). Above and below come
// first because the line through a point mostly runs left and right of it.
func (l label) candidates(area box) []box {
	w, h := l.size()
	c, x, y := l.clear, l.x, l.y
	at := func(x0, y0 float64) box { return box{x0, y0, x0 + w, y0 + h} }
	slideX := func(b box) box {
		if x0 := max(min(b.x0, area.x1-w), area.x0); x0 <= x && x <= x0+w {
			return at(x0, b.y0)
		}
		return b
	}
	slideY := func(b box) box {
		if y0 := max(min(b.y0, area.y1-h), area.y0); y0 <= y && y <= y0+h {
			return at(b.x0, y0)
		}
		return b
	}
	above, below := slideX(at(x-w/2, y-c-h)), slideX(at(x-w/2, y+c))
	right, left := slideY(at(x+c, y-h/2)), slideY(at(x-c-w, y-h/2))
	aboveRight, belowRight := at(x+c, y-c-h), at(x+c, y+c)
	aboveLeft, belowLeft := at(x-c-w, y-c-h), at(x-c-w, y+c)
	if l.mark {
		return []box{belowRight, right, aboveRight, belowLeft, left, aboveLeft, below, above}
	}
	return []box{above, below, aboveRight, aboveLeft, belowRight, belowLeft, right, left}
}

// placeLabels places labels inside area: the labels that keep first, then the others,
// each in the order given, as the comment above says. markers are the boxes of the
// chart's markers. It returns the labels with their boxes: the placed boxes lie inside
// area and no two of them come closer than labelGap. A label whose text is empty or
// whose anchor is not finite is not placed.
func placeLabels(area box, markers []box, labels []label) []label {
	out := make([]label, len(labels))
	var taken []box
	free := func(b box, avoidMarkers bool) bool {
		if !b.within(area) {
			return false
		}
		for _, t := range taken {
			if b.overlaps(t, labelGap) {
				return false
			}
		}
		if avoidMarkers {
			for _, m := range markers {
				if b.overlaps(m, 0) {
					return false
				}
			}
		}
		return true
	}
	try := func(l label) label {
		l.text = clipRunes(l.text, labelRunes)
		if l.text == "" || !finite(l.x) || !finite(l.y) || !finite(l.clear) {
			return l
		}
		first := l.candidates(area)
		cands := first
		if l.keep { // then over markers, then beside the anchor moved into the area, pushed inside it
			cands = append(slices.Clone(first), first...)
			in := l
			in.x, in.y = min(max(l.x, area.x0), area.x1), min(max(l.y, area.y0), area.y1)
			for _, b := range in.candidates(area) {
				cands = append(cands, clampBox(b, area))
			}
		}
		for i, b := range cands {
			if free(b, i < len(first)) {
				l.box, l.placed = b, true
				taken = append(taken, b)
				return l
			}
		}
		return l
	}
	for pass := range 2 {
		for i, l := range labels {
			if l.keep == (pass == 0) {
				out[i] = try(l)
			}
		}
	}
	return out
}

// clampBox moves b inside area, or leaves it where it is when it does not fit.
func clampBox(b box, area box) box {
	w, h := b.x1-b.x0, b.y1-b.y0
	if !(w <= area.x1-area.x0 && h <= area.y1-area.y0) {
		return b
	}
	x0 := max(min(b.x0, area.x1-w), area.x0)
	y0 := max(min(b.y0, area.y1-h), area.y0)
	return box{x0, y0, min(x0+w, area.x1), min(y0+h, area.y1)}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
