// Package browser runs a headless Chromium for tests, which render slogate's HTML pages
// (the probe report, the status page) in a real browser to measure their layout and
// take screenshots. It is a test helper: only tests import it.
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Chromium is a headless browser on the machine.
type Chromium struct{ path string }

// Find returns the Chromium on PATH, skipping the test when there is none (make test
// installs Debian's chromium).
func Find(t testing.TB) Chromium {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return Chromium{p}
		}
	}
	t.Skip("no chromium on PATH; make test installs it")
	return Chromium{}
}

// Run opens the page in file headless, with a fresh profile and no network of its
// own, and the extra arguments (--dump-dom, --screenshot=..., --window-size=W,H); it
// returns what the browser printed on stdout and fails the test if it fails or takes
// longer than a minute.
func (c Chromium) Run(t testing.TB, file string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, c.path, append(append(base, args...), "file://"+abs)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", c.path, err, stderr.String())
	}
	return out
}

// Screenshot renders the page in file in a window of w × h pixels and returns the
// picture, which it keeps as name under the test's temporary directory (and logs the
// path of), or also under $SLOGATE_KEEP_SCREENSHOT when that names a directory.
func (c Chromium) Screenshot(t testing.TB, file, name string, w, h int) image.Image {
	t.Helper()
	shot := filepath.Join(t.TempDir(), name)
	c.Run(t, file, "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", w, h), "--hide-scrollbars")
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	t.Logf("screenshot: %s", shot)
	if dir := os.Getenv("SLOGATE_KEEP_SCREENSHOT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Errorf("keeping the screenshot: %v", err)
		}
	}
	return img
}

// Measure opens html (a whole page) in a window of w × h pixels with the script
// MeasureScript added at the end of its body, and returns what the script measured
// once the page was laid out.
func (c Chromium) Measure(t testing.TB, page string, w, h int) Layout {
	t.Helper()
	i := strings.LastIndex(page, "</body>")
	if i < 0 {
		t.Fatal("the page has no </body>")
	}
	file := filepath.Join(t.TempDir(), "page.html")
	page = page[:i] + "<script>" + MeasureScript + "</script>\n" + page[i:]
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := c.Run(t, file, "--dump-dom", fmt.Sprintf("--window-size=%d,%d", w, h))
	m := measured.FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page holds no measurements (did its script run?):\n%.2000s", dom)
	}
	var l Layout
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &l); err != nil {
		t.Fatalf("reading the measurements: %v", err)
	}
	return l
}

var measured = regexp.MustCompile(`(?s)<pre id="slogate-layout">(.*?)</pre>`)

// Layout is what MeasureScript measures, in CSS pixels of the page.
type Layout struct {
	InnerWidth  int    `json:"innerWidth"`  // the window
	ClientWidth int    `json:"clientWidth"` // the viewport, without a vertical scrollbar
	ScrollWidth int    `json:"scrollWidth"` // the document: wider than ClientWidth means a horizontal scrollbar
	Plots       []Plot `json:"plots"`
}

// Plot is one chart (svg.plot): its labels, and its other texts (title, ticks, axis
// titles, legend), which the labels must not cover.
type Plot struct {
	ID     string `json:"id"`
	Frame  Box    `json:"frame"` // the plot area, rect.frame
	Knees  int    `json:"knees"` // g.knee elements
	Labels []Text `json:"labels"`
	Others []Text `json:"others"`
}

// LabelProblems lists, in words, what is wrong with the labels of the plots: a label
// that overlaps another label or another text of its plot, or leaves its plot area
// (each by more than tol pixels), and a knee (g.knee) without its label
// (text.mark-label).
func (l Layout) LabelProblems(tol float64) []string {
	var out []string
	for _, p := range l.Plots {
		marks := 0
		for i, a := range p.Labels {
			if a.Class == "mark-label" {
				marks++
			}
			if !a.Box.Inside(p.Frame, tol) {
				out = append(out, fmt.Sprintf("%s: label %q at %+v leaves the plot area %+v", p.ID, a.Text, a.Box, p.Frame))
			}
			for _, b := range p.Labels[:i] {
				if a.Box.Overlaps(b.Box, tol) {
					out = append(out, fmt.Sprintf("%s: labels %q at %+v and %q at %+v overlap", p.ID, a.Text, a.Box, b.Text, b.Box))
				}
			}
			for _, o := range p.Others {
				if a.Box.Overlaps(o.Box, tol) {
					out = append(out, fmt.Sprintf("%s: label %q at %+v covers the %s %q at %+v", p.ID, a.Text, a.Box, o.Class, o.Text, o.Box))
				}
			}
		}
		if marks != p.Knees {
			out = append(out, fmt.Sprintf("%s: %d knee labels for %d knees", p.ID, marks, p.Knees))
		}
	}
	return out
}

// Labels counts the labels of the plots.
func (l Layout) Labels() int {
	n := 0
	for _, p := range l.Plots {
		n += len(p.Labels)
	}
	return n
}

// Text is a text element and its box on the page.
type Text struct {
	Class string `json:"class"`
	Text  string `json:"text"`
	Box   Box    `json:"box"`
}

// Box is a rectangle on the page.
type Box struct{ Left, Top, Right, Bottom float64 }

// Overlaps reports whether b and o share more than a sliver of area (tol pixels each
// way, for anti-aliasing and rounding).
func (b Box) Overlaps(o Box, tol float64) bool {
	return b.Left < o.Right-tol && o.Left < b.Right-tol && b.Top < o.Bottom-tol && o.Top < b.Bottom-tol
}

// Inside reports whether b lies within o, give or take tol pixels.
func (b Box) Inside(o Box, tol float64) bool {
	return b.Left >= o.Left-tol && b.Top >= o.Top-tol && b.Right <= o.Right+tol && b.Bottom <= o.Bottom+tol
}

// MeasureScript measures the page where it runs: the window's and document's widths,
// and for every svg.plot its knees and the boxes of its frame and of its texts (labels:
// text.point-label and text.mark-label), as the browser laid them out; it writes them
// as JSON into pre#slogate-layout at the end of the body.
const MeasureScript = `(() => {
  const box = e => { const r = e.getBoundingClientRect(); return {Left: r.left + scrollX, Top: r.top + scrollY, Right: r.right + scrollX, Bottom: r.bottom + scrollY}; };
  const out = {innerWidth: innerWidth, clientWidth: document.documentElement.clientWidth, scrollWidth: document.documentElement.scrollWidth, plots: []};
  for (const svg of document.querySelectorAll('svg.plot')) {
    const frame = svg.querySelector('rect.frame');
    const p = {id: svg.id, frame: frame ? box(frame) : null, knees: svg.querySelectorAll('g.knee').length, labels: [], others: []};
    for (const t of svg.querySelectorAll('text')) {
      const cls = t.getAttribute('class') || '';
      const rec = {class: cls, text: t.textContent, box: box(t)};
      (cls === 'point-label' || cls === 'mark-label' ? p.labels : p.others).push(rec);
    }
    out.plots.push(p);
  }
  const pre = document.createElement('pre');
  pre.id = 'slogate-layout';
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();`
