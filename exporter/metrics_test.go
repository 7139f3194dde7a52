package exporter

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero value", Options{}, true},
		{"SLOs and buckets", Options{TTFT: time.Second, TPOT: time.Millisecond, E2EBuckets: []float64{0, 1, 2}}, true},
		{"negative TTFT", Options{TTFT: -time.Second}, false},
		{"negative TPOT", Options{TPOT: -time.Millisecond}, false},
		{"NaN bucket", Options{E2EBuckets: []float64{1, math.NaN()}}, false},
		{"infinite bucket", Options{TTFTBuckets: []float64{math.Inf(1)}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("Validate() = %v, want ok=%v or ErrInvalidOptions", err, tc.ok)
			}
		})
	}
}

func TestNewPanicsOnWiringMistakes(t *testing.T) {
	tests := []struct {
		name string
		run  func()
	}{
		{"nil registerer", func() { New(nil, Options{}) }},
		{"invalid options", func() { New(prometheus.NewRegistry(), Options{TTFT: -1}) }},
		{"registered twice", func() {
			reg := prometheus.NewRegistry()
			New(reg, Options{})
			New(reg, Options{})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			tc.run()
		})
	}
}

// scrapeText fetches /metrics in the Prometheus text format and parses it.
func scrapeText(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// llamaSeries reports whether m is the series of model "llama" without admission: tier
// "none" where the family has a tier label.
func llamaSeries(m *dto.Metric) bool {
	ls := labelString(m)
	return ls == `{model="llama"}` || ls == `{model="llama",tier="none"}`
}

// leValues returns the le labels of family name's series of llamaSeries, as text.
func leValues(t *testing.T, fams map[string]*dto.MetricFamily, name string) []string {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("%s missing from the exposition", name)
	}
	for _, m := range f.GetMetric() {
		if !llamaSeries(m) {
			continue
		}
		var les []string
		for _, b := range m.GetHistogram().GetBucket() {
			les = append(les, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
		}
		return les
	}
	t.Fatalf("%s has no llama series", name)
	return nil
}

func TestSLOBucketBoundaries(t *testing.T) {
	tests := []struct {
		name      string
		ttft      time.Duration
		tpot      time.Duration
		ttftLE    string
		tpotLE    string
		extraTTFT int // boundaries added to the default TTFT list
	}{
		{"in the defaults", 2500 * time.Millisecond, 100 * time.Millisecond, "2.5", "0.1", 0},
		{"round", 2 * time.Second, 100 * time.Millisecond, "2", "0.1", 1},
		{"odd", 1700 * time.Millisecond, 37 * time.Millisecond, "1.7", "0.037", 1},
		{"sub-millisecond and long", 90 * time.Minute, 700 * time.Microsecond, "5400", "0.0007", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newMetrics(t, Options{TTFT: tc.ttft, TPOT: tc.tpot, ServedModels: served("llama")})
			// An observation exactly at each threshold is good: it falls in the threshold's bucket.
			m.Observe(wire.Request{Model: "llama"}, measure.Result{Stream: true, Status: 200, Outcome: measure.OK,
				TTFT: tc.ttft, TPOT: tc.tpot, E2E: 2 * tc.ttft, OutputChunks: 2, Gaps: []time.Duration{tc.tpot}})
			fams := scrapeText(t, reg)
			for name, le := range map[string]string{
				"slogate_time_to_first_token_seconds":   tc.ttftLE,
				"slogate_time_per_output_token_seconds": tc.tpotLE,
				"slogate_inter_token_gap_seconds":       tc.tpotLE,
			} {
				les := leValues(t, fams, name)
				if !slices.Contains(les, le) {
					t.Errorf("%s: no le=%q in %q", name, le, les)
				}
				if got := cumulativeAt(fams[name], le); got != 1 {
					t.Errorf("%s: cumulative count at le=%s is %v, want 1", name, le, got)
				}
			}
			// The text format lists +Inf too.
			if n, want := len(leValues(t, fams, "slogate_time_to_first_token_seconds")), len(DefaultTTFTBuckets)+tc.extraTTFT+1; n != want {
				t.Errorf("TTFT has %d buckets, want %d", n, want)
			}
		})
	}
}

// cumulativeAt returns the llama series' cumulative count at bucket le, and the count
// of the bucket below it must be 0: the observation sits exactly on the boundary.
func cumulativeAt(f *dto.MetricFamily, le string) float64 {
	for _, m := range f.GetMetric() {
		if !llamaSeries(m) {
			continue
		}
		bs := m.GetHistogram().GetBucket()
		for i, b := range bs {
			if strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64) != le {
				continue
			}
			if i > 0 && bs[i-1].GetCumulativeCount() != 0 {
				return -1
			}
			return float64(b.GetCumulativeCount())
		}
	}
	return -1
}

func TestCustomBucketsMerged(t *testing.T) {
	got := buckets([]float64{5, 1, 1, 0.5}, DefaultE2EBuckets, 2*time.Second, 0, time.Second)
	want := []float64{0.5, 1, 2, 5}
	if !slices.Equal(got, want) {
		t.Errorf("buckets = %v, want %v", got, want)
	}
	if def := buckets(nil, DefaultE2EBuckets); !slices.Equal(def, DefaultE2EBuckets) {
		t.Errorf("default buckets changed: %v", def)
	}
}

// engineStub is an EngineSource that returns a fixed snapshot.
type engineStub struct{ snap engine.Snapshot }

func (e engineStub) Latest() engine.Snapshot { return e.snap }

// inFlightStub is an InFlightSource with fixed values.
type inFlightStub struct {
	n  int
	kv int64
}

func (s inFlightStub) InFlight() (int, int64) { return s.n, s.kv }

// fullSeries is the labels of the latency series fullRegistry observes.
const fullSeries = `{model="llama",tier="short"}`

// fullRegistry is what slogate serve builds: every collector, every metric fed, with
// admission in shadow mode over the built-in tiers and a tiers file.
func fullRegistry(t *testing.T, native bool) (*Metrics, *prometheus.Registry) {
	t.Helper()
	snap := engine.NewSnapshot()
	snap.Kind, snap.Up, snap.At = engine.KindVLLM, true, time.Unix(1000, 0)
	snap.Waiting, snap.Running, snap.KVUsage, snap.KVCapacityTokens = 2, 8, 0.5, 1e6
	snap.PrefixHitRatio, snap.Preemptions, snap.SpecAcceptRate = 0.3, 4, 0.7
	snap.Models = []string{"llama"}
	clk := clock.NewFake(time.Unix(1002, 0))
	var relay decisionRelay
	ctrl := newController(t, admission.Shadow, clk, admission.Options{Engine: engineStub{snap}, Observers: []admission.DecisionObserver{&relay}})
	reloads := admission.NewReloader(writeTiers(t, t.TempDir(), validTiers), ctrl)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := New(reg, Options{
		TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond, ServedModels: served("llama"),
		NativeHistograms: native, Version: "v1.2.3", Revision: "abc123",
		InFlight: inFlightStub{3, 4096}, Engine: engineStub{snap},
		Admission: ctrl, Reloads: reloads, Clock: clk,
	})
	relay.m = m
	exercise(t, ctrl, clk)
	for _, src := range []measure.TokenSource{measure.TokensUsage, measure.TokensChunks} {
		m.Observe(wire.Request{Route: wire.RouteChatCompletions, Model: "llama", Stream: true},
			measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
				TTFT: 300 * time.Millisecond, TPOT: 12 * time.Millisecond, E2E: 3 * time.Second, OutputChunks: 200,
				InputTokens: 500, OutputTokens: 200, Tokens: src, Gaps: []time.Duration{12 * time.Millisecond},
				Tier: "short", QueueWait: 40 * time.Millisecond})
	}
	return m, reg
}

func TestLint(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run("native="+strconv.FormatBool(native), func(t *testing.T) {
			_, reg := fullRegistry(t, native)
			_ = Handler(reg) // registers the handler's own metrics too
			checkLint(t, reg)
		})
	}
}

func TestBuildInfo(t *testing.T) {
	tests := []struct {
		name              string
		version, revision string
		want              string
	}{
		{"set", "v1.2.3", "abc123", `slogate_build_info{goversion="GO",revision="abc123",version="v1.2.3"}`},
		{"unset", "", "", `slogate_build_info{goversion="GO",revision="unknown",version="unknown"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, reg := newMetrics(t, Options{Version: tc.version, Revision: tc.revision})
			want := map[string]float64{strings.Replace(tc.want, `"GO"`, strconv.Quote(runtime.Version()), 1): 1}
			for _, d := range diffSamples(samples(t, reg, "slogate_build_info"), want) {
				t.Error(d)
			}
		})
	}
}

func TestInFlightGauges(t *testing.T) {
	tests := []struct {
		name string
		src  InFlightSource
		want map[string]float64
	}{
		{"idle", inFlightStub{}, map[string]float64{"slogate_inflight_requests": 0, "slogate_inflight_kv_tokens": 0}},
		{"busy", inFlightStub{12, 65536}, map[string]float64{"slogate_inflight_requests": 12, "slogate_inflight_kv_tokens": 65536}},
		{"no source", nil, map[string]float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, reg := newMetrics(t, Options{InFlight: tc.src})
			got := samples(t, reg, "slogate_inflight_")
			if len(got) != len(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for _, d := range diffSamples(got, tc.want) {
				t.Error(d)
			}
		})
	}
}

func TestNativeHistograms(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run("native="+strconv.FormatBool(native), func(t *testing.T) {
			_, reg := fullRegistry(t, native)
			srv := httptest.NewServer(Handler(reg))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
			req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
			for {
				var mf dto.MetricFamily
				if err := dec.Decode(&mf); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if mf.GetName() != "slogate_time_to_first_token_seconds" {
					continue
				}
				for _, m := range mf.GetMetric() {
					h := m.GetHistogram()
					hasNative := h.Schema != nil && len(h.GetPositiveSpan()) > 0
					if labelString(m) == fullSeries && hasNative != native {
						t.Errorf("native buckets present = %v, want %v", hasNative, native)
					}
					if len(h.GetBucket()) == 0 {
						t.Error("classic buckets missing")
					}
				}
				return
			}
			t.Error("no TTFT histogram in the exposition")
		})
	}
}

// TestMetricsExpositionParses: every family slogate exports is in the text exposition,
// and it parses.
func TestMetricsExpositionParses(t *testing.T) {
	_, reg := fullRegistry(t, true)
	fams := scrapeText(t, reg)
	for _, name := range []string{
		"slogate_requests_total", "slogate_time_to_first_token_seconds", "slogate_time_per_output_token_seconds",
		"slogate_inter_token_gap_seconds", "slogate_e2e_request_duration_seconds", "slogate_prompt_tokens_total",
		"slogate_generation_tokens_total", "slogate_inflight_requests", "slogate_inflight_kv_tokens",
		"slogate_engine_up", "slogate_engine_info", "slogate_engine_kv_cache_usage_ratio",
		"slogate_engine_preemptions_total", "slogate_engine_scrape_age_seconds", "slogate_build_info",
		"slogate_queue_wait_seconds", "slogate_admission_decisions_total", "slogate_admission_mode",
		"slogate_admission_engine_state", "slogate_admission_inflight_requests", "slogate_admission_inflight_limit",
		"slogate_admission_inflight_limit_min", "slogate_admission_inflight_limit_max", "slogate_admission_queue_length",
		"slogate_admission_queue_limit", "slogate_admission_queue_wait_limit_seconds", "slogate_admission_rate_limit",
		"slogate_admission_slo_seconds", "slogate_admission_observed_p95_seconds", "slogate_admission_service_rate",
		"slogate_admission_tier_max_input_tokens", "slogate_admission_config_last_reload_successful",
		"slogate_admission_config_last_reload_success_timestamp_seconds",
		"go_goroutines", "process_start_time_seconds",
	} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing from /metrics", name)
		}
	}
}
