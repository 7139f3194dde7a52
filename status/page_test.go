package status

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/schedule"
	"github.com/slogate/slogate/synth"
	"github.com/slogate/slogate/wire"
)

// Fixed sources for the page.
type (
	fixedAdmission   admission.Stats
	fixedEngine      engine.Snapshot
	fixedProbe       Probe
	fixedCalibration Calibration
	fixedSustainable map[string]float64
)

func (f fixedAdmission) Stats() admission.Stats            { return admission.Stats(f) }
func (f fixedEngine) Latest() engine.Snapshot              { return engine.Snapshot(f) }
func (f fixedProbe) Probe() Probe                          { return Probe(f) }
func (f fixedCalibration) Calibration() Calibration        { return Calibration(f) }
func (f fixedSustainable) Sustainable() map[string]float64 { return f }

// stats are two tiers in shadow mode, with some traffic queued.
func stats() fixedAdmission {
	st := admission.Stats{Mode: admission.Shadow, Tiers: []admission.TierStats{
		{Name: "short", MaxInputTokens: 2048, InFlight: 3, Limit: 12.5, MinInFlight: 1, MaxInFlight: 64, MaxQueue: 32,
			MaxQueueWait: 50 * ms, SLO: sloShort, P95TTFT: 80 * ms, P95TPOT: 8 * ms, ServiceRate: 4.25},
		{Name: "long", InFlight: 1, Limit: 4, MinInFlight: 1, MaxInFlight: 8, MaxQueue: 4, MaxQueueWait: 500 * ms,
			Rate: 0.5, Burst: 2, SLO: sloLong},
	}}
	st.Tiers[0].Queued[admission.Interactive], st.Tiers[0].Queued[admission.Batch] = 2, 1
	return fixedAdmission(st)
}

// tenantStats are stats with three tenants: acme, weighted 3, with a request budget and
// a concurrency cap; batchco, held to the batch class, with token budgets (its output
// spent); and everyone else.
func tenantStats() fixedAdmission {
	st := stats()
	st.Identify = "header X-Tenant"
	st.Tenants = []admission.TenantStats{
		{Name: "acme", Weight: 3, MaxClass: admission.Interactive, Counter: 212.5, Service: 600, Open: 3, Queued: 1,
			Budget: admission.Budget{RequestsPerMinute: 60, MaxConcurrent: 8},
			Quota:  admission.Quota{Requests: admission.Allowance{Limit: 60, Remaining: 41.7, Reset: 19 * time.Second}}},
		{Name: "batchco", Weight: 1, MaxClass: admission.Batch, Counter: 300, Service: 300,
			Budget: admission.Budget{InputTokensPerMinute: 100000, OutputTokensPerMinute: 20000},
			Quota: admission.Quota{InputTokens: admission.Allowance{Limit: 100000, Remaining: 100000},
				OutputTokens: admission.Allowance{Limit: 20000, Reset: time.Minute}}},
		{Name: admission.OtherTenant, Weight: 1, Counter: 100, Service: 100},
	}
	return st
}

// tenantWindow holds, 10 s after it started, two short streams of acme (one within the
// SLO), a long stream of batchco turned away, a bad request of no tenant and a stream of
// a tenant no longer in force.
func tenantWindow() *Window {
	clk := clock.NewFake(epoch)
	w := NewWindow(WindowOptions{Clock: clk})
	for _, r := range []measure.Result{
		of("acme", stream("short", 50*ms, 5*ms)), of("acme", stream("short", 150*ms, 5*ms)),
		of("batchco", ended("long", measure.Rejected)), ended("", measure.BadRequest), of("gone", stream("long", 50*ms, 5*ms)),
	} {
		w.Observe(wire.Request{}, r)
	}
	clk.Step(10 * time.Second)
	return w
}

func snapshot() fixedEngine {
	s := engine.NewSnapshot()
	s.Kind, s.Up, s.At = engine.KindVLLM, true, epoch.Add(-2*time.Second)
	s.Waiting, s.Running, s.KVUsage, s.KVCapacityTokens = 2, 7, 0.42, 65536
	s.Models = []string{"tiny-model"}
	return fixedEngine(s)
}

// shapesReport is a finished probe of two shapes at 1 and 4 streams, whose last cell
// was not run.
func shapesReport(model string) *synth.Report {
	r := &synth.Report{
		Model: model, Finished: epoch.Add(-time.Minute),
		Workload: synth.Workload{Name: "demo", Kind: synth.Shapes, Concurrency: []int{1, 4},
			Shapes: []synth.Shape{{Name: "chat", Input: 256, Output: 64}, {Name: "document", Input: 2048, Output: 128}}},
		Gate: []synth.Check{{Name: "model_id", Verdict: synth.Pass}, {Name: "usage", Verdict: synth.Fail}},
		Cells: []synth.Cell{
			{Row: "chat", Concurrency: 1, State: synth.Valid, Throughput: 120, TTFTp95: 0.02, TPOTp95: 0.008},
			{Row: "chat", Concurrency: 4, State: synth.Valid, Throughput: 410, TTFTp95: 0.05, TPOTp95: 0.009},
			{Row: "document", Concurrency: 1, State: synth.Failed, Detail: "2 of 5 requests failed"},
		},
	}
	return r
}

// scanReport is a finished rate-scan probe.
func scanReport() *synth.Report {
	r := &synth.Report{Finished: epoch.Add(-time.Minute), Reference: 2,
		Workload: synth.Workload{Name: "rate-scan", Kind: synth.Scan}}
	for i, m := range []float64{0.5, 1, 2} {
		r.Cells = append(r.Cells, synth.Cell{Row: "scan", Multiple: m, Rate: 2 * m, CompletionRate: 2 * m * (1 - 0.1*float64(i)),
			State: synth.Valid, TTFTp95: 0.05 * float64(i+1)})
	}
	return r
}

// outcome is a finished calibration of the short tier, knee at 4 req/s, not applied.
func outcome() *calibrate.Outcome {
	tr := calibrate.TierResult{Tier: "short", Shape: synth.Shape{Name: "short", Input: 256, Output: 32}, SLO: sloShort,
		Reference: 4, Knee: 1, KneeRate: 4, Rule: "the highest sustainable rate"}
	for _, p := range []struct{ off, thr float64 }{{2, 2}, {4, 3.9}, {8, 4.5}} {
		tr.Points = append(tr.Points, calibrate.Point{Offered: p.off, Throughput: p.thr, Completion: p.thr / p.off,
			TTFTp50: time.Duration(p.off) * 5 * ms, TTFTp95: time.Duration(p.off) * 10 * ms, TPOTp95: 5 * ms})
	}
	return &calibrate.Outcome{
		Result: calibrate.Result{Finished: epoch.Add(-3 * time.Minute), Tiers: []calibrate.TierResult{tr}},
		Config: admission.Config{Tiers: []admission.TierConfig{{Name: "short", Rate: 3.6, Burst: 4, MinInFlight: 1, MaxInFlight: 9, MaxQueue: 8}}},
	}
}

// liveWindow holds four short streams, one within its SLO, and one long stream.
func liveWindow() *Window {
	w := NewWindow(WindowOptions{Clock: clock.NewFake(epoch)})
	for _, r := range []struct{ ttft, tpot time.Duration }{{50 * ms, 5 * ms}, {150 * ms, 5 * ms}, {50 * ms, 15 * ms}, {120 * ms, 6 * ms}} {
		w.Observe(wire.Request{}, stream("short", r.ttft, r.tpot))
	}
	w.Observe(wire.Request{}, stream("long", 900*ms, 12*ms))
	return w
}

// capacityWindow holds, 10 s after it started, ten requests of the short tier — five
// within its SLO, two over it, three turned away — two of the long tier within its SLO,
// and a bad request no tier classified: 1 req/s offered to short with 0.5 req/s of
// goodput, 0.2 req/s to long, all of it goodput.
func capacityWindow() *Window {
	clk := clock.NewFake(epoch)
	w := NewWindow(WindowOptions{Clock: clk})
	var rs []measure.Result
	for range 5 {
		rs = append(rs, stream("short", 50*ms, 5*ms))
	}
	rs = append(rs, stream("short", 150*ms, 5*ms), stream("short", 50*ms, 15*ms))
	for range 3 {
		rs = append(rs, ended("short", measure.Rejected))
	}
	rs = append(rs, stream("long", 50*ms, 5*ms), stream("long", 900*ms, 12*ms), ended("", measure.BadRequest))
	for _, r := range rs {
		w.Observe(wire.Request{}, r)
	}
	clk.Step(10 * time.Second)
	return w
}

// capacityCells are the capacity table's cells of capacityWindow's tiers that do not
// depend on long's λ*, with more.
func capacityCells(more map[string]map[string]string) map[[3]string]string {
	rows := map[string]map[string]string{
		"short": {"offered": "1", "goodput": "0.5", "knee": "0.8", "in-use": "62.5%", "demand": "1.25",
			"note": "running at 62.5% of measured capacity"},
		"long":  {"offered": "0.2", "goodput": "0.2"},
		"(all)": {"offered": "1.2", "goodput": "0.7", "knee": "–"},
	}
	for row, fields := range more {
		for f, v := range fields {
			rows[row][f] = v
		}
	}
	return tableCells("capacity-table", rows)
}

// demandClassOf returns the class of a tier's demand cell in the capacity table.
func demandClassOf(t *testing.T, doc *html.Node, tier string) string {
	t.Helper()
	for _, row := range find(byID(doc, "capacity-table"), hasAttr("data-tier", tier)) {
		for _, c := range find(row, hasAttr("data-field", "demand")) {
			class, _ := attr(c, "class")
			return class
		}
	}
	t.Fatalf("no demand cell of tier %s", tier)
	return ""
}

var done = schedule.Status{Runs: 1, LastStart: epoch.Add(-2 * time.Minute), LastEnd: epoch.Add(-time.Minute)}

// pageCase is a page rendered from fixed sources, and what it must show.
type pageCase struct {
	name  string
	cfg   Config
	texts map[string]string    // element id: a text it contains
	cells map[[3]string]string // table id, row (data-tier or data-tenant), data-field: the field's text
	check func(t *testing.T, doc *html.Node)
}

func pageCases() []pageCase {
	return []pageCase{{
		name: "nothing yet",
		cfg: Config{Admission: stats(), Engine: snapshot(), Live: NewWindow(WindowOptions{Clock: clock.NewFake(epoch)}),
			Probe: fixedProbe{Workload: "demo"}, Calibration: fixedCalibration{}},
		texts: map[string]string{
			"probe-none": "No probe has finished yet", "probe-state": "no probe has run yet",
			"calibration-none": "No calibration has finished yet", "admission-mode": "shadow", "engine-state": "ok",
		},
		cells: map[[3]string]string{
			{"live-table", "short", "ttft-p95"}: "–", {"live-table", "short", "attainment"}: "–",
			{"live-table", "all", "requests"}:      "0",
			{"admission-table", "short", "queued"}: "3", {"admission-table", "long", "limit"}: "4",
		},
		check: func(t *testing.T, doc *html.Node) {
			if byID(doc, "heatmap") != nil || len(elements(doc, "svg", "")) != 0 {
				t.Error("a figure without a probe or calibration")
			}
			if got := text(byID(doc, "engine-snapshot")); !strings.Contains(got, "42.0%") || !strings.Contains(got, "65536 tokens") || !strings.Contains(got, "tiny-model") {
				t.Errorf("engine snapshot %q lacks its KV usage, capacity and model", got)
			}
		},
	}, {
		name: "prober and calibrator off",
		cfg:  Config{Admission: stats(), Engine: fixedEngine(engine.NewSnapshot())},
		texts: map[string]string{"probe": "does not probe", "calibration": "does not calibrate", "live": "not measured", "engine": "down",
			"tenants": "no tenants section", "capacity": "Live requests are not measured here", "capacity-unknown": "short, long"},
		cells: tableCells("capacity-table", map[string]map[string]string{
			"short": {"offered": "–", "goodput": "–", "knee": "unknown", "demand": "–"},
			"(all)": {"offered": "–", "in-use": "–", "note": ""},
		}),
		check: func(t *testing.T, doc *html.Node) {
			if byID(doc, "tenant-table") != nil {
				t.Error("a tenant table without tenants")
			}
		},
	}, {
		name: "tenants",
		cfg:  Config{Admission: tenantStats(), Engine: snapshot(), Live: tenantWindow(), SLO: sloDef},
		cells: tableCells("tenant-table", map[string]map[string]string{
			"acme": {"weight": "3", "max-class": "interactive", "open": "3", "queued": "1", "served": "60.0%", "fair": "60.0%",
				"budget-requests": "41 / 60", "budget-input-tokens": "—", "budget-output-tokens": "—", "budget-concurrent": "3 / 8",
				"requests": "2", "rejected": "0", "goodput": "0.1", "attainment": "50.0%"},
			"batchco": {"max-class": "batch", "served": "30.0%", "fair": "20.0%",
				"budget-requests": "—", "budget-input-tokens": "100k / 100k", "budget-output-tokens": "0 / 20k", "budget-concurrent": "—",
				"requests": "1", "rejected": "1", "goodput": "0", "attainment": "–"},
			"other":    {"served": "10.0%", "fair": "20.0%", "requests": "0"},
			"(none)":   {"requests": "1", "attainment": "–"},
			"(former)": {"requests": "1", "attainment": "100.0%"},
		}),
		check: func(t *testing.T, doc *html.Node) {
			tab := byID(doc, "tenant-table")
			var rows []string
			for _, r := range find(tab, func(n *html.Node) bool { _, ok := attr(n, "data-tenant"); return ok }) {
				id, _ := attr(r, "data-tenant")
				rows = append(rows, id)
			}
			if want := []string{"acme", "batchco", "other", "(none)", "(former)"}; !slices.Equal(rows, want) {
				t.Errorf("tenant rows %v, want %v", rows, want)
			}
			for field, title := range map[string]string{"budget-requests": "41 of 60 a minute left; full again in 19s", "served": "virtual token counter 212.5"} {
				for _, c := range find(tab, hasAttr("data-field", field)) {
					if got, _ := attr(c, "title"); got == title {
						title = ""
					}
				}
				if title != "" {
					t.Errorf("no %s cell says %q", field, title)
				}
			}
			if got := text(byID(doc, "tenant-identify")); got != "header X-Tenant" {
				t.Errorf("the caption says tenants are told apart by %q, want the rule", got)
			}
			if got := rowCells(tab, "(none)"); got != 6 {
				t.Errorf("the row of no tenant has %d cells, want its name, one for admission's columns and 4 live ones", got)
			}
		},
	}, {
		name:  "tenants without a live source",
		cfg:   Config{Admission: tenantStats(), Engine: snapshot()},
		cells: tableCells("tenant-table", map[string]map[string]string{"acme": {"served": "60.0%"}, "batchco": {"budget-requests": "—"}}),
		check: func(t *testing.T, doc *html.Node) {
			tab := byID(doc, "tenant-table")
			if n := len(find(tab, hasAttr("data-field", "requests"))); n != 0 || rowCells(tab, "acme") != 11 {
				t.Errorf("without a live source: %d live request cells, %d cells in a row; want 0 and 11", n, rowCells(tab, "acme"))
			}
		},
	}, {
		name: "live traffic",
		cfg:  Config{Admission: stats(), Engine: snapshot(), Live: liveWindow(), SLO: sloDef},
		cells: map[[3]string]string{
			{"live-table", "short", "ttft-p95"}: "150 ms", {"live-table", "short", "tpot-p95"}: "15 ms",
			{"live-table", "short", "attainment"}: "25.0%", {"live-table", "short", "judged"}: "4",
			{"live-table", "long", "attainment"}: "100.0%", {"live-table", "all", "attainment"}: "40.0%",
			{"live-table", "all", "ttft-p95"}: "900 ms",
		},
	}, {
		// short runs at 0.5 of its λ* of 0.8 req/s with 1 req/s offered; long's λ* is
		// not known, so neither is the engine's load as a whole.
		name: "capacity against λ*",
		cfg: Config{Admission: stats(), Engine: snapshot(), Live: capacityWindow(), SLO: sloDef,
			Sustainable: fixedSustainable{"short": 0.8, "retired": 3}},
		texts: map[string]string{"capacity-unknown": "of long,", "capacity": "Over the last 5m"},
		cells: capacityCells(map[string]map[string]string{
			"long":  {"knee": "unknown", "in-use": "–", "demand": "–", "note": "λ* unknown: calibrate the tier"},
			"(all)": {"in-use": "–", "demand": "–", "note": "a tier with traffic has no λ*"},
		}),
		check: func(t *testing.T, doc *html.Node) {
			if got := demandClassOf(t, doc, "short"); !strings.Contains(got, "bad") {
				t.Errorf("short's demand of 1.25 × λ* is of class %q, want bad", got)
			}
			hint := text(byID(doc, "capacity-unknown"))
			for _, want := range []string{"slogate calibrate", "--calibrate", "POST /-/calibrate"} {
				if !strings.Contains(hint, want) {
					t.Errorf("the note on unknown λ* %q does not say %q", hint, want)
				}
			}
			if n := len(find(byID(doc, "capacity-table"), hasAttr("data-tier", "retired"))); n != 0 {
				t.Error("a row for a λ* of no tier in force")
			}
		},
	}, {
		// long at 0.2 req/s of 0.5 adds 0.4 to short's 0.625 of goodput and 1.25 of
		// demand: the engine is past its knee.
		name: "capacity, every tier calibrated",
		cfg: Config{Admission: stats(), Engine: snapshot(), Live: capacityWindow(), SLO: sloDef,
			Sustainable: fixedSustainable{"short": 0.8, "long": 0.5}},
		cells: capacityCells(map[string]map[string]string{
			"long":  {"knee": "0.5", "in-use": "40.0%", "demand": "0.4", "note": "running at 40.0% of measured capacity"},
			"(all)": {"in-use": "102.5%", "demand": "1.65", "note": "running at 102.5% of measured capacity"},
		}),
		check: func(t *testing.T, doc *html.Node) {
			if byID(doc, "capacity-unknown") != nil {
				t.Error("a note on unknown λ* when every tier has one")
			}
			if got := demandClassOf(t, doc, "long"); strings.Contains(got, "bad") {
				t.Errorf("long's demand of 0.4 × λ* is of class %q, want not bad", got)
			}
			if got := demandClassOf(t, doc, "(all)"); !strings.Contains(got, "bad") {
				t.Errorf("the tiers' demand of 1.65 is of class %q, want bad", got)
			}
		},
	}, {
		name:  "capacity without a calibration",
		cfg:   Config{Admission: stats(), Engine: snapshot(), Live: capacityWindow(), SLO: sloDef},
		texts: map[string]string{"capacity-unknown": "of short, long,"},
		cells: capacityCells(map[string]map[string]string{
			"short": {"knee": "unknown", "in-use": "–", "demand": "–", "note": "λ* unknown: calibrate the tier"},
			"long":  {"knee": "unknown"},
			"(all)": {"in-use": "–", "demand": "–", "note": "no tier has a λ*"},
		}),
	}, {
		name: "with a probe",
		cfg: Config{Admission: stats(), Engine: snapshot(),
			Probe: fixedProbe{Workload: "demo", Status: done, Report: shapesReport("tiny-model")}},
		texts: map[string]string{"probe-state": "the last probe ended 2031-03-04 05:05:07 UTC (1m0s ago); 1 completed", "probe-cells": "3"},
		check: func(t *testing.T, doc *html.Node) {
			heat := byID(doc, "heatmap")
			if heat == nil {
				t.Fatal("no svg#heatmap")
			}
			cells := elements(heat, "rect", "cell")
			if len(cells) != 3 || len(elements(heat, "rect", "gap")) != 1 {
				t.Errorf("heatmap has %d rect.cell and %d rect.gap, want 3 and 1", len(cells), len(elements(heat, "rect", "gap")))
			}
			for _, c := range cells {
				state, _ := attr(c, "data-state")
				if tip := elements(c, "title", ""); state == "" || len(tip) != 1 || text(tip[0]) == "" {
					t.Errorf("cell %v lacks its state or tooltip", c.Attr)
				}
			}
			if byID(doc, "heatmap-legend") == nil {
				t.Error("no heatmap legend")
			}
		},
	}, {
		name: "with a scan probe",
		cfg: Config{Admission: stats(), Engine: snapshot(),
			Probe: fixedProbe{Workload: "rate-scan", Status: done, Report: scanReport()}},
		check: func(t *testing.T, doc *html.Node) {
			if byID(doc, "probe-completion-plot") == nil || byID(doc, "probe-ttft-plot") == nil || byID(doc, "heatmap") != nil {
				t.Error("a scan probe wants its two charts and no heatmap")
			}
		},
	}, {
		name: "with a calibration",
		cfg: Config{Admission: stats(), Engine: snapshot(),
			Calibration: fixedCalibration{Status: done, Outcome: outcome()}},
		texts: map[string]string{"calibration-applied": "published for review, not applied", "calibration": "rate 3.6 req/s, burst 4, in flight 1–9, queue 8"},
		check: func(t *testing.T, doc *html.Node) {
			for _, id := range []string{"cal-short-completion-plot", "cal-short-ttft-plot"} {
				plot := byID(doc, id)
				if plot == nil {
					t.Fatalf("no svg#%s", id)
				}
				knee := elements(plot, "g", "knee")
				if len(knee) != 1 {
					t.Fatalf("svg#%s marks the knee %d times, want once", id, len(knee))
				}
				if rate, _ := attr(knee[0], "data-rate"); rate != "4" {
					t.Errorf("svg#%s marks the knee at %q req/s, want 4", id, rate)
				}
			}
			if k := find(byID(doc, "calibration"), hasAttr("data-field", "knee")); len(k) != 1 || text(k[0]) != "4 req/s" {
				t.Errorf("the knee is not stated as 4 req/s")
			}
		},
	}, {
		name: "hostile names escaped",
		cfg: Config{
			Admission: fixedAdmission{Tiers: []admission.TierStats{{Name: `<script>alert("tier")</script>`}},
				Tenants: []admission.TenantStats{{Name: `<script>alert("tenant")</script>`, Weight: 1}}},
			Engine: fixedEngine{Err: errors.New(`<img src=x onerror=alert(1)>`), Models: []string{"<b>m</b>"}},
			Probe:  fixedProbe{Workload: `"><script>x</script>`, Status: done, Report: shapesReport(`<script>alert("model")</script>`)},
		},
		texts: map[string]string{
			"engine-error": `<img src=x onerror=alert(1)>`, "engine-snapshot": "<b>m</b>",
			"probe": `<script>alert("model")</script>`, "admission-table": `<script>alert("tier")</script>`,
			"tenant-table": `<script>alert("tenant")</script>`,
		},
		check: func(t *testing.T, doc *html.Node) {
			if n := len(elements(doc, "script", "")) + len(elements(doc, "img", "")); n > 0 {
				t.Errorf("%d script or img elements from the sources' text", n)
			}
		},
	}}
}

// tableCells keys the fields of rows (row: field: text) for pageCase.cells.
func tableCells(table string, rows map[string]map[string]string) map[[3]string]string {
	out := map[[3]string]string{}
	for row, fields := range rows {
		for f, v := range fields {
			out[[3]string{table, row, f}] = v
		}
	}
	return out
}

// TestPage renders the page from fixed sources and checks what it shows.
func TestPage(t *testing.T) {
	for _, tc := range pageCases() {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Clock = clock.NewFake(epoch)
			srv := httptest.NewServer(New(tc.cfg))
			defer srv.Close()
			doc := fetch(t, srv.URL+"/")
			for id, want := range tc.texts {
				if n := byID(doc, id); n == nil || !strings.Contains(text(n), want) {
					t.Errorf("#%s does not say %q", id, want)
				}
			}
			for at, want := range tc.cells {
				if got, ok := rowField(doc, at[0], at[1], at[2]); got != want {
					t.Errorf("%s row %s %s: %q (found %v), want %q", at[0], at[1], at[2], got, ok, want)
				}
			}
			if tc.check != nil {
				tc.check(t, doc)
			}
		})
	}
}

// TestPageMethods: the page answers GET and HEAD, and nothing else.
func TestPageMethods(t *testing.T) {
	srv := httptest.NewServer(New(Config{Admission: stats(), Engine: snapshot()}))
	defer srv.Close()
	for _, tc := range []struct {
		method string
		status int
		body   bool
	}{{http.MethodGet, 200, true}, {http.MethodHead, 200, false}, {http.MethodPost, 405, true}} {
		t.Run(tc.method, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			_, _ = io.Copy(&b, resp.Body)
			if resp.StatusCode != tc.status || (b.Len() > 0) != tc.body {
				t.Errorf("%s: %d with %d bytes, want %d (body %v)", tc.method, resp.StatusCode, b.Len(), tc.status, tc.body)
			}
		})
	}
}
