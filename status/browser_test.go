package status

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/internal/browser"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
	"github.com/slogate/slogate/wire"
)

// A status page as full as a busy sidecar's: four tiers (three with a λ*), four tenants
// with every budget, live traffic, a scrape error and long unbreakable names, a context-matrix probe, and a
// calibration of three tiers whose bisections crowd their points near the knee.

// busyStats are four tiers in enforce mode.
func busyStats() fixedAdmission {
	st := stats()
	st.Mode = admission.Enforce
	st.Tiers = append(st.Tiers,
		admission.TierStats{Name: "document-summarisation-128k", MaxInputTokens: 131072, InFlight: 2, Limit: 3, MinInFlight: 1, MaxInFlight: 4,
			MaxQueue: 2, MaxQueueWait: 2 * time.Second, Rate: 0.05, Burst: 1, SLO: measure.NewSLO(20*time.Second, 40*ms)},
		admission.TierStats{Name: "batch", InFlight: 0, Limit: 2, MinInFlight: 1, MaxInFlight: 2, MaxQueue: 64, MaxQueueWait: time.Minute, SLO: sloLong})
	st.Tiers[1].MaxInputTokens = 32768
	st.Tenants = append(tenantStats().Tenants[:2:2],
		admission.TenantStats{Name: "document-summarisation-team-eu-1", Weight: 0.25, MaxClass: admission.Batch, Counter: 1.25e6, Service: 312500,
			Open: 12, Queued: 9, Budget: admission.Budget{RequestsPerMinute: 1200, InputTokensPerMinute: 4e6, OutputTokensPerMinute: 250000, MaxConcurrent: 16},
			Quota: admission.Quota{Requests: admission.Allowance{Limit: 1200, Remaining: 1187, Reset: 650 * ms},
				InputTokens:  admission.Allowance{Limit: 4e6, Remaining: 3187345.5, Reset: 12 * time.Second},
				OutputTokens: admission.Allowance{Limit: 250000, Remaining: 1024, Reset: 59 * time.Second}}},
		tenantStats().Tenants[2])
	return st
}

// busyWindow holds the live window's requests, each of a tenant, a minute after it
// started, and requests of no tenant and of a tenant no longer in force.
func busyWindow() *Window {
	clk := clock.NewFake(epoch)
	w := NewWindow(WindowOptions{Clock: clk})
	for i, r := range []measure.Result{stream("short", 50*ms, 5*ms), stream("short", 150*ms, 5*ms), stream("short", 50*ms, 15*ms),
		stream("short", 120*ms, 6*ms), stream("long", 900*ms, 12*ms), ended("long", measure.Rejected), ended("", measure.BadRequest)} {
		w.Observe(wire.Request{}, of([]string{"acme", "batchco", "document-summarisation-team-eu-1", "other", "retired-tenant-of-last-quarter", "acme", ""}[i], r))
	}
	clk.Step(time.Minute)
	return w
}

// troubledEngine was last scraped with an error, and serves models with long names.
func troubledEngine() fixedEngine {
	s := snapshot()
	s.Err = errors.New(`Get "http://127.0.0.1:8000/metrics?name[]=vllm:num_requests_running&name[]=vllm:num_requests_waiting&name[]=vllm:kv_cache_usage_perc&name[]=vllm:gpu_prefix_cache_hit_rate": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`)
	s.Models = []string{"mimo-v2.6-flash-rl", // and a name with no place to break a line
		"Qwen3_235B_A22B_Instruct_2507_FP8_dynamic_tp8_ep8_max_model_len_262144_gpu_memory_utilization_0_92_enable_chunked_prefill_enable_prefix_caching_speculative_eagle3"}
	return fixedEngine(s)
}

// wideMatrix is a finished context matrix of five contexts at nine concurrencies.
func wideMatrix() *synth.Report {
	r := &synth.Report{Model: "mimo-v2.6-flash-rl", Finished: epoch.Add(-10 * time.Minute),
		Workload: synth.Workload{Name: "context-matrix", Kind: synth.Matrix, Contexts: []int{8192, 32768, 65536, 131072, 257024},
			Concurrency: []int{1, 2, 4, 8, 16, 32, 64, 128, 256}},
		Gate: []synth.Check{{Name: "model_id", Verdict: synth.Pass}, {Name: "streaming", Verdict: synth.Pass}}}
	for i, ctx := range r.Workload.Contexts {
		for _, conc := range r.Workload.Concurrency {
			c := synth.Cell{Row: synth.ContextLabel(ctx), Input: ctx - 1024, Output: 1024, Concurrency: conc, State: synth.Valid,
				Throughput: 60 * float64(conc) / (1 + float64(conc*(i+1))/64), TTFTp95: 0.2 * float64(i+1) * math.Sqrt(float64(conc)), TPOTp95: 0.02}
			if conc*ctx > 4<<20 {
				c = synth.Cell{Row: c.Row, Input: c.Input, Output: c.Output, Concurrency: conc, State: synth.OverCapacity,
					Detail: fmt.Sprintf("%d x %d tokens > KV capacity %d", conc, ctx, 4<<20)}
			}
			r.Cells = append(r.Cells, c)
		}
	}
	return r
}

// crowdedCalibration calibrated three tiers the way slogate calibrate does: 0.5, 0.8
// and 1.1 times the reference, a step of 1.4 past the last sustainable rate, then a
// bisection of the bracket to within 5%; the knee is the highest rate within the SLO.
func crowdedCalibration() *calibrate.Outcome {
	var res calibrate.Result
	res.Finished = epoch.Add(-3 * time.Minute)
	var cfg admission.Config
	for i, name := range []string{"short", "medium", "document-summarisation-128k"} {
		ref := 90 / float64(i*i+1)
		capacity := ref * (1.3 + 0.1*float64(i)) // completions level off here
		slo := measure.NewSLO(2*time.Second, 50*ms)
		tr := calibrate.TierResult{Tier: name, Shape: synth.Shape{Name: name, Input: 1024 << (2 * i), Output: 128}, SLO: slo, Reference: ref}
		rates := []float64{0.5, 0.8, 1.1, 1.54}
		lo, hi := 1.1, 1.54
		for hi/lo-1 > 0.05 {
			mid := math.Sqrt(lo * hi)
			rates = append(rates, mid)
			if mid*ref < capacity {
				lo = mid
			} else {
				hi = mid
			}
		}
		for _, m := range rates {
			off := m * ref
			thr := min(off, capacity) * 0.98
			p95 := time.Duration(float64(40*ms) * math.Exp(6*max(off/capacity-0.9, 0)/0.2))
			if off > capacity {
				p95 = 3 * time.Second
			}
			tr.Points = append(tr.Points, calibrate.Point{Offered: off, Throughput: thr, Completion: thr / off, TTFTp50: p95 / 3, TTFTp95: p95, TPOTp95: 20 * ms})
		}
		slices.SortFunc(tr.Points, func(a, b calibrate.Point) int { return cmp.Compare(a.Offered, b.Offered) })
		tr.Knee = -1
		for k, p := range tr.Points {
			if p.TTFTp95 <= 2*time.Second {
				tr.Knee, tr.KneeRate = k, p.Offered
			}
		}
		tr.Rule = fmt.Sprintf("%.0f req/s is the highest sustainable rate; above it p95 TTFT exceeds the SLO of 2s", tr.KneeRate)
		res.Tiers = append(res.Tiers, tr)
		cfg.Tiers = append(cfg.Tiers, admission.TierConfig{Name: name, Rate: tr.KneeRate * 0.9, Burst: 4, MinInFlight: 1, MaxInFlight: 16, MaxQueue: 8})
	}
	return &calibrate.Outcome{Result: res, Config: cfg,
		ApplyErr: "the tiers file /var/lib/slogate/calibration/tiers-2031-03-04T05:03:07Z-short,medium,document-summarisation-128k.yaml.tmp could not be renamed into place"}
}

// busyPage serves the busy status page and returns its HTML.
func busyPage(t *testing.T) string {
	t.Helper()
	page := New(Config{Admission: busyStats(), Engine: troubledEngine(), Live: busyWindow(), SLO: sloDef, Clock: clock.NewFake(epoch),
		Probe:       fixedProbe{Workload: "/etc/slogate/workloads/context_matrix_8k_to_251k_at_1_to_256_streams_with_warmup_and_a_shared_prefix_of_2048_tokens_for_the_h200_nvl_nodes.yaml", Status: done, Report: wideMatrix()},
		Calibration: fixedCalibration{Status: done, Outcome: crowdedCalibration()},
		Sustainable: fixedSustainable{"short": 0.8, "long": 0.5, "document-summarisation-128k": 0.05}, // batch: unknown
		History:     storedRuns(t, "shapes_for_the_h200_nvl_nodes_with_every_workload_shape_of_the_published_write_up")})
	srv := httptest.NewServer(page)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// TestPageInBrowser lays the busy status page out in Chromium in a window 1280 pixels
// wide: the page is no wider than the window (no horizontal scrollbar; wide tables and
// figures scroll inside their boxes, long names wrap), no two chart labels overlap or
// cover another text of their chart, every knee is labelled, and a screenshot is of
// the window's size.
func TestPageInBrowser(t *testing.T) {
	chromium := browser.Find(t)
	const width, height = 1280, 2400
	page := busyPage(t)
	layout := chromium.Measure(t, page, width, height)
	if layout.InnerWidth != width {
		t.Fatalf("the window is %d px wide, want %d", layout.InnerWidth, width)
	}
	if layout.ScrollWidth > width || layout.ScrollWidth > layout.ClientWidth {
		t.Errorf("the page is %d px wide in a %d px viewport (window %d px): a horizontal scrollbar", layout.ScrollWidth, layout.ClientWidth, width)
	}
	if want := 3 * 2; len(layout.Plots) != want {
		t.Fatalf("the browser found %d plots, want %d (the tiers' charts)", len(layout.Plots), want)
	}
	for _, p := range layout.LabelProblems(0.5) {
		t.Error(p)
	}
	t.Logf("%d labels on %d plots; page %d px wide", layout.Labels(), len(layout.Plots), layout.ScrollWidth)

	file := filepath.Join(t.TempDir(), "status.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	img := chromium.Screenshot(t, file, "status.png", width, height)
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("the screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), width, height)
	}
	if !strings.Contains(page, `id="probe-history"`) || !strings.Contains(page, `data-workload="shapes_for_the_h200`) {
		t.Error("the page shows no probe history")
	}
	if !strings.Contains(page, `data-tenant="document-summarisation-team-eu-1"`) || !strings.Contains(page, `data-tenant="(former)"`) {
		t.Error("the page shows no tenant table")
	}
	if !strings.Contains(page, `id="capacity-table"`) || !strings.Contains(page, `id="capacity-unknown"`) {
		t.Error("the page shows no capacity table, or no note on the tier without a λ*")
	}
	if !strings.Contains(page, `id="cal-short-scan-table"`) {
		t.Error("the calibration's points are not listed in a table")
	}
}

// TestTenantTableInBrowser: in a window 1280 pixels wide, the busy page's tenant table —
// four tenants with every budget, long names and live traffic — fits its box, so every
// column is in view without scrolling it.
func TestTenantTableInBrowser(t *testing.T) {
	chromium := browser.Find(t)
	page := busyPage(t)
	const script = `<script>(function(){var box=document.getElementById("tenant-table").parentElement;` +
		`var pre=document.createElement("pre");pre.id="tenant-fit";pre.textContent=box.scrollWidth+" "+box.clientWidth;` +
		`document.body.appendChild(pre);})();</script>`
	i := strings.LastIndex(page, "</body>")
	file := filepath.Join(t.TempDir(), "status.html")
	if err := os.WriteFile(file, []byte(page[:i]+script+page[i:]), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := chromium.Run(t, file, "--dump-dom", "--window-size=1280,2400")
	var scroll, client int
	j := strings.Index(string(dom), `<pre id="tenant-fit">`)
	if j < 0 {
		t.Fatal("the page holds no measurement of the tenant table (did its script run?)")
	}
	if _, err := fmt.Sscanf(string(dom[j+len(`<pre id="tenant-fit">`):]), "%d %d", &scroll, &client); err != nil || client == 0 {
		t.Fatalf("reading the measurement: %v", err)
	}
	if scroll > client {
		t.Errorf("the tenant table is %d px wide in its box of %d px: its last columns scroll out of view", scroll, client)
	}
	t.Logf("the tenant table is %d px wide in its box of %d px", scroll, client)
}
