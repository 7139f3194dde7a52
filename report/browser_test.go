package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium returns the path of a headless browser, skipping the test when there is none
// (make test installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH; make test installs it")
	return ""
}

// headless runs the browser on file with extra arguments and returns what it printed.
func headless(t *testing.T, browser, file string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, browser, append(append(base, args...), "file://"+file)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	return out
}

// TestHTMLReportInBrowser opens a matrix report in headless Chromium: the rendered
// document holds the heatmap with one cell per report cell and both plots, and a
// screenshot of it is a real picture (not blank).
func TestHTMLReportInBrowser(t *testing.T) {
	browser := chromium(t)
	var page bytes.Buffer
	rep := matrixReport()
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(headless(t, browser, file, "--dump-dom"))
	for _, want := range []string{`id="heatmap"`, `id="throughput-plot"`, `id="ttft-plot"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered document lacks %s", want)
		}
	}
	if got := strings.Count(dom, `class="cell"`); got != len(rep.Cells) {
		t.Errorf("the rendered heatmap has %d cells, the report %d", got, len(rep.Cells))
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	headless(t, browser, file, "--screenshot="+shot, "--window-size=1280,1600", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	colours := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 8 {
		for x := b.Min.X; x < b.Max.X; x += 8 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if b.Dx() < 1000 || len(colours) < 16 {
		t.Errorf("the screenshot is %dx%d with %d colours: not the rendered report", b.Dx(), b.Dy(), len(colours))
	}
	if dir := os.Getenv("SLOGATE_KEEP_SCREENSHOT"); dir != "" {
		data, _ := os.ReadFile(shot)
		_ = os.WriteFile(filepath.Join(dir, "report.png"), data, 0o644)
	}
}
