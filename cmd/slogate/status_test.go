package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/slogate/slogate/internal/simtest"
)

// TestStatusPageChromium runs `slogate demo` with its synthetic load, waits for its first
// probe and for live numbers, and loads the status page in headless Chromium (Debian's
// chromium, which `make test` installs): the rendered document holds the probe heatmap
// with one rect.cell per cell of the probe report, each with its state, and the live
// SLO table's p95 TTFT and attainment as figures. The demo's calibration is turned off:
// it takes minutes, and the status package's tests cover its curves.
func TestStatusPageChromium(t *testing.T) {
	browser := statusChromium(t)
	admin := startStatusDemo(t)
	base := "http://" + admin + "/"
	simtest.WaitFor(t, "the demo's first probe", 2*time.Minute, func() bool { return simtest.Status(base+"probe/report.json") == http.StatusOK })
	liveTTFT := regexp.MustCompile(`data-tier="all">.*?data-field="ttft-p95">[0-9]`)
	simtest.WaitFor(t, "live numbers on the status page", time.Minute, func() bool { return liveTTFT.MatchString(get(t, base)) })
	if got := simtest.Status(base + "metrics"); got != http.StatusOK {
		t.Errorf("GET /metrics beside the status page: %d, want 200", got)
	}
	if got := simtest.Status(base + "no-such-page"); got != http.StatusNotFound {
		t.Errorf("GET /no-such-page: %d, want 404 (the status page is at / only)", got)
	}

	var rep struct{ Cells []json.RawMessage }
	if err := json.Unmarshal([]byte(get(t, base+"probe/report.json")), &rep); err != nil || len(rep.Cells) == 0 {
		t.Fatalf("the probe report has %d cells (%v), want some", len(rep.Cells), err)
	}
	doc, err := html.Parse(strings.NewReader(dumpDOM(t, browser, base)))
	if err != nil {
		t.Fatal(err)
	}
	heat := statusFind(doc, "id", "heatmap")
	if len(heat) != 1 {
		t.Fatalf("the rendered page has %d svg#heatmap, want 1", len(heat))
	}
	cells := statusFind(heat[0], "class", "cell")
	if len(cells) != len(rep.Cells) {
		t.Errorf("the rendered heatmap has %d cells, the probe report %d", len(cells), len(rep.Cells))
	}
	for _, c := range cells {
		if state := statusAttr(c, "data-state"); c.Data != "rect" || state == "" {
			t.Errorf("heatmap cell <%s> has state %q, want a rect with a state", c.Data, state)
		}
	}
	figures := map[string]*regexp.Regexp{
		"ttft-p95":   regexp.MustCompile(`^[0-9.]+ m?s$`),
		"tpot-p95":   regexp.MustCompile(`^[0-9.]+ m?s$`),
		"attainment": regexp.MustCompile(`^[0-9.]+%$`),
	}
	all := statusFind(doc, "data-tier", "all")
	if len(all) != 1 {
		t.Fatalf("the rendered page has %d live rows for all requests, want 1", len(all))
	}
	for name, want := range figures {
		f := statusFind(all[0], "data-field", name)
		if len(f) != 1 || !want.MatchString(statusText(f[0])) {
			t.Errorf("live %s of all requests: %d elements, %q; want a figure", name, len(f), statusTexts(f))
		}
	}
}

// statusChromium returns the path of Debian's chromium, failing the test without it.
func statusChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: make test installs chromium (apt-get install chromium)")
	return ""
}

// startStatusDemo runs `slogate demo --load` without calibration on free loopback ports
// until the test ends, and returns its admin address once it is ready and its banner
// has named the status page.
func startStatusDemo(t *testing.T) string {
	t.Helper()
	data, admin := simtest.FreeAddr(t), simtest.FreeAddr(t)
	out, err := os.Create(filepath.Join(t.TempDir(), "demo.log")) // safe for concurrent writes
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	args := []string{"demo", "--listen", data, "--admin-listen", admin, "--load", "--streams", "2", "--calibrate=false"}
	go func() { done <- run(ctx, args, out, out) }()
	t.Cleanup(func() {
		cancel()
		code := <-done
		out.Close()
		if code != 0 || t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("demo exited %d:\n%s", code, log)
		}
		if code != 0 {
			t.Errorf("demo exited %d", code)
		}
	})
	simtest.WaitFor(t, "the demo to be ready", 30*time.Second, func() bool { return simtest.Status("http://"+admin+"/readyz") == http.StatusOK })
	// A newcomer finds the page from the demo's banner.
	simtest.WaitFor(t, "the status page's address in the demo's banner", 10*time.Second, func() bool {
		log, _ := os.ReadFile(out.Name())
		return strings.Contains(string(log), "slogate status page          http://"+admin+"/\n")
	})
	return admin
}

// dumpDOM loads url in headless Chromium and returns the document it rendered. The
// browser runs in its own process group, killed at the end, so none of its helper
// processes outlive the test.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Start()
	if err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}
	err = cmd.Wait()
	if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
		t.Errorf("killing chromium's process group: %v", kerr)
	}
	if err != nil {
		t.Fatalf("%s --dump-dom %s: %v\n%s", browser, url, err, stderr.String())
	}
	return stdout.String()
}

// statusFind returns the elements under n with the attribute key set to val.
func statusFind(n *html.Node, key, val string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && statusAttr(d, key) == val {
			out = append(out, d)
		}
	}
	return out
}

func statusAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// statusText returns the text under n, spaces collapsed.
func statusText(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func statusTexts(ns []*html.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = statusText(n)
	}
	return out
}
