package enginesim

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// scrape fetches /metrics and parses it as the Prometheus text format. Names contain
// colons, which UTF-8 validation (a superset of the legacy rules) accepts.
func (e *simEnv) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	status, h, data := e.do(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK {
		e.t.Fatalf("/metrics: status %d", status)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		e.t.Errorf("/metrics Content-Type = %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
	if err != nil {
		e.t.Fatalf("parsing /metrics: %v\n%s", err, data)
	}
	return fams
}

// findMetric returns the metric of family name whose labels include want.
func findMetric(t testing.TB, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("metric %s is missing", name)
	}
next:
	for _, m := range f.GetMetric() {
		labels := labelMap(m)
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		return m
	}
	t.Fatalf("metric %s has no series with labels %v", name, want)
	return nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// metricValue returns the value of a counter, gauge or untyped series.
func metricValue(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := findMetric(t, fams, name, labels)
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("metric %s is not a counter or gauge", name)
	return 0
}

// histogram returns the histogram series of family name.
func histogram(t testing.TB, fams map[string]*dto.MetricFamily, name string) *dto.Histogram {
	t.Helper()
	if f := fams[name]; f != nil && f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s is a %v, want a histogram", name, f.GetType())
	}
	h := findMetric(t, fams, name, nil).GetHistogram()
	if h == nil {
		t.Fatalf("%s has no histogram", name)
	}
	return h
}

// bounds returns the upper bounds of a histogram's buckets without the last, which must
// be +Inf.
func bounds(t testing.TB, h *dto.Histogram) []float64 {
	t.Helper()
	var out []float64
	for _, b := range h.GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	if len(out) == 0 || !math.IsInf(out[len(out)-1], 1) {
		t.Fatalf("buckets %v do not end with +Inf", out)
	}
	return out[:len(out)-1]
}

// namesAndTypes lists the metric families as "name type" lines, sorted.
func namesAndTypes(fams map[string]*dto.MetricFamily) string {
	var lines []string
	for name, f := range fams {
		lines = append(lines, name+" "+strings.ToLower(f.GetType().String()))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// sameFamilies checks that every family in expected (text format) is scraped exactly
// so: help, type, label sets and values.
func sameFamilies(t testing.TB, fams map[string]*dto.MetricFamily, expected string) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	want, err := parser.TextToMetricFamilies(strings.NewReader(expected))
	if err != nil {
		t.Fatalf("parsing expected metrics: %v", err)
	}
	for name, w := range want {
		g := fams[name]
		if g == nil {
			t.Errorf("metric %s is missing", name)
			continue
		}
		var gotText, wantText strings.Builder
		if _, err := expfmt.MetricFamilyToText(&gotText, g); err != nil {
			t.Fatal(err)
		}
		if _, err := expfmt.MetricFamilyToText(&wantText, w); err != nil {
			t.Fatal(err)
		}
		if gotText.String() != wantText.String() {
			t.Errorf("metric %s:\ngot:\n%s\nwant:\n%s", name, gotText.String(), wantText.String())
		}
	}
}

// TestMetricNamesGolden pins the metric surface of each flavour (names and types) to
// testdata/metric_names_<flavor>.golden. Run with -update to rewrite the files.
func TestMetricNamesGolden(t *testing.T) {
	for _, flavor := range []Flavor{FlavorVLLM, FlavorSGLang} {
		t.Run(string(flavor), func(t *testing.T) {
			sim := startSim(t, Config{Flavor: flavor})
			later := time.Now().Add(idleLog) // past SGLang's idle start
			sim.srv.metrics.now = func() time.Time { return later }
			got := namesAndTypes(sim.scrape())
			path := filepath.Join("testdata", "metric_names_"+string(flavor)+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("metric names differ from %s (run go test -update if the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// runRequests sends n non-streaming completions with ignore_eos and returns the total
// prompt and completion tokens the answers report.
func runRequests(t *testing.T, sim *simEnv, n int) (prompt, completion int64) {
	t.Helper()
	for i := range n {
		res, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model:     tinyModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(fmt.Sprintf("request number %d %s", i, strings.Repeat("pad ", i*7)))},
			MaxTokens: openai.Int(int64(5 + 3*i)),
		}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		prompt += res.Usage.PromptTokens
		completion += res.Usage.CompletionTokens
	}
	return prompt, completion
}

func TestVLLMMetrics(t *testing.T) {
	p := tinyProfile(t, nil)
	sim := startSim(t, Config{Profile: p})
	fams := sim.scrape()
	common := map[string]string{"model_name": tinyModel, "engine": "0"}

	t.Run("labels", func(t *testing.T) {
		for name, f := range fams {
			if !strings.HasPrefix(name, "vllm:") {
				t.Errorf("%s: not a vllm: name", name)
			}
			if name == "vllm:cache_config_info" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := labelMap(m)
				delete(labels, "finished_reason")
				delete(labels, "reason")      // num_requests_waiting_by_reason
				delete(labels, "sleep_state") // engine_sleep_state
				if len(labels) != 2 || labels["model_name"] != tinyModel || labels["engine"] != "0" {
					t.Errorf("%s labels = %v, want model_name=%s engine=0", name, labelMap(m), tinyModel)
				}
			}
		}
	})
	t.Run("idle gauges", func(t *testing.T) {
		for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
			if fams[name].GetType() != dto.MetricType_GAUGE {
				t.Errorf("%s is a %v, want a gauge", name, fams[name].GetType())
			}
			if v := metricValue(t, fams, name, common); v != 0 {
				t.Errorf("%s = %v on an idle engine, want 0", name, v)
			}
		}
		for _, name := range []string{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total",
			"vllm:prompt_tokens_total", "vllm:generation_tokens_total"} {
			if fams[name].GetType() != dto.MetricType_COUNTER || metricValue(t, fams, name, common) != 0 {
				t.Errorf("%s: want a counter at 0", name)
			}
		}
		// Every finish reason exists from the start, at zero.
		for _, reason := range []string{"stop", "length", "abort", "error"} {
			if v := metricValue(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": reason}); v != 0 {
				t.Errorf("request_success_total{%s} = %v, want 0", reason, v)
			}
		}
	})
	t.Run("cache_config_info", func(t *testing.T) {
		m := findMetric(t, fams, "vllm:cache_config_info", nil)
		labels := labelMap(m)
		want := map[string]string{
			"block_size": "16", "num_gpu_blocks": "131072", "kv_cache_size_tokens": "2097152",
			"engine": "0", "enable_prefix_caching": "False",
		}
		for k, v := range want {
			if labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, labels[k], v)
			}
		}
		if _, ok := labels["model_name"]; ok {
			t.Error("cache_config_info carries model_name; vLLM's does not")
		}
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("value %v, want 1", m.GetGauge().GetValue())
		}
		// The whole series, as testutil compares it.
		expected := `
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{_block_size_resolved="True",attn_group_size="None",block_size="16",cache_dtype="auto",effective_attention_block_size="None",enable_mamba_fine_grained_prefix_cache="False",enable_prefix_caching="False",engine="0",gpu_memory_utilization="0.9",is_attention_free="False",kv_cache_dtype_skip_layers="[]",kv_cache_layout="None",kv_cache_max_concurrency="512.0",kv_cache_memory_bytes="None",kv_cache_size_tokens="2097152",kv_offloading_backend="native",kv_offloading_size="None",kv_sharing_fast_prefill="False",mamba_block_size="None",mamba_cache_dtype="auto",mamba_cache_mode="none",mamba_page_size_padded="None",mamba_ssm_cache_dtype="auto",num_cpu_blocks="None",num_gpu_blocks="131072",num_gpu_blocks_override="None",prefix_cache_retention_interval="0",prefix_caching_hash_algo="sha256",prefix_match_unit="None",replayssm_buffer_len="16",skip_page_size_padded="None",sliding_window="None",use_kda_recoverssm="False",use_replayssm="False",user_specified_block_size="False",user_specified_mamba_block_size="False"} 1
`
		sameFamilies(t, fams, expected)
	})
	t.Run("buckets", func(t *testing.T) {
		cases := []struct {
			name string
			want []float64
		}{
			{"vllm:time_to_first_token_seconds", []float64{0.001, .005, .01, .02, .04, .06, .08, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}},
			{"vllm:e2e_request_latency_seconds", []float64{0.3, .5, .8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}},
			{"vllm:request_queue_time_seconds", []float64{0.3, .5, .8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}},
			{"vllm:inter_token_latency_seconds", []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}},
			// build_1_2_5_buckets(max_model_len = 4096)
			{"vllm:request_prompt_tokens", []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}},
			{"vllm:request_generation_tokens", []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}},
		}
		for _, tc := range cases {
			if got := bounds(t, histogram(t, fams, tc.name)); !slices.Equal(got, tc.want) {
				t.Errorf("%s buckets = %v, want %v", tc.name, got, tc.want)
			}
		}
	})
	t.Run("after requests", func(t *testing.T) {
		const n = 5
		prompt, completion := runRequests(t, sim, n)
		fams := sim.scrape()
		for name, want := range map[string]float64{
			"vllm:prompt_tokens_total":        float64(prompt),
			"vllm:generation_tokens_total":    float64(completion),
			"vllm:num_requests_running":       0,
			"vllm:num_requests_waiting":       0,
			"vllm:kv_cache_usage_perc":        0,
			"vllm:num_preemptions_total":      0,
			"vllm:prefix_cache_hits_total":    0,
			"vllm:prefix_cache_queries_total": 0,
		} {
			if got := metricValue(t, fams, name, common); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if got := metricValue(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": "length"}); got != n {
			t.Errorf("request_success_total{length} = %v, want %d", got, n)
		}
		for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
			"vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
			"vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds",
			"vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_params_max_tokens"} {
			if got := histogram(t, fams, name).GetSampleCount(); got != n {
				t.Errorf("%s count = %d, want %d (one per request)", name, got, n)
			}
		}
		if got := histogram(t, fams, "vllm:request_prompt_tokens").GetSampleSum(); got != float64(prompt) {
			t.Errorf("request_prompt_tokens sum = %v, want %d", got, prompt)
		}
		if got := histogram(t, fams, "vllm:request_generation_tokens").GetSampleSum(); got != float64(completion) {
			t.Errorf("request_generation_tokens sum = %v, want %d", got, completion)
		}
		// One inter-token gap per token after the first of each request.
		if got := histogram(t, fams, "vllm:inter_token_latency_seconds").GetSampleCount(); got != uint64(completion-n) {
			t.Errorf("inter_token_latency count = %d, want %d", got, completion-n)
		}
		// Every step is counted with the tokens it computed: prompts plus all but the
		// last token of each answer, which is sampled but never fed back.
		if got := histogram(t, fams, "vllm:iteration_tokens_total").GetSampleSum(); got != float64(prompt+completion-n) {
			t.Errorf("iteration_tokens_total sum = %v, want %d", got, prompt+completion-n)
		}
		for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"} {
			if h := histogram(t, fams, name); h.GetSampleSum() <= 0 {
				t.Errorf("%s sum = %v, want > 0", name, h.GetSampleSum())
			}
		}
	})
}

func TestSGLangMetrics(t *testing.T) {
	p := tinyProfile(t, nil)
	sim := startSim(t, Config{Profile: p, Flavor: FlavorSGLang})
	// Just after start SGLang exposes only cache_config_info, until its first batch or
	// its idle stats log 30 s later (scheduler_metrics_mixin.py).
	if fams := sim.scrape(); len(fams) != 1 || fams["sglang:cache_config_info"] == nil {
		t.Errorf("at start: %d families, want only sglang:cache_config_info", len(fams))
	}
	later := time.Now().Add(idleLog)
	sim.srv.metrics.now = func() time.Time { return later }
	fams := sim.scrape()
	for name, f := range fams {
		if !strings.HasPrefix(name, "sglang:") {
			t.Errorf("%s: not an sglang: name", name)
		}
		if name == "sglang:cache_config_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := labelMap(m)
			if len(l) != 4 || l["model_name"] != tinyModel || l["engine_type"] != "unified" || l["tp_rank"] != "0" || l["pp_rank"] != "0" {
				t.Errorf("%s labels = %v", name, l)
			}
		}
	}
	for _, name := range []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
		"sglang:cache_hit_rate", "sglang:gen_throughput", "sglang:num_used_tokens"} {
		if fams[name].GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s: want a gauge", name)
		} else if v := metricValue(t, fams, name, nil); v != 0 {
			t.Errorf("%s = %v on an idle engine, want 0", name, v)
		}
	}
	if got := metricValue(t, fams, "sglang:max_total_num_tokens", nil); got != float64(p.KVCapacity()) {
		t.Errorf("max_total_num_tokens = %v, want %d", got, p.KVCapacity())
	}
	expected := `
# HELP sglang:cache_config_info Cache configuration information.
# TYPE sglang:cache_config_info gauge
sglang:cache_config_info{num_pages="131072",page_size="16"} 1
`
	sameFamilies(t, fams, expected)
	wantBuckets := map[string][]float64{
		"sglang:time_to_first_token_seconds": {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400},
		"sglang:e2e_request_latency_seconds": {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400},
		"sglang:inter_token_latency_seconds": {0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8},
	}
	for name, want := range wantBuckets {
		if got := bounds(t, histogram(t, fams, name)); !slices.Equal(got, want) {
			t.Errorf("%s buckets = %v, want %v", name, got, want)
		}
	}

	const n = 4
	prompt, completion := runRequests(t, sim, n)
	fams = sim.scrape()
	for name, want := range map[string]float64{
		"sglang:prompt_tokens_total":        float64(prompt),
		"sglang:generation_tokens_total":    float64(completion),
		"sglang:num_requests_total":         n,
		"sglang:num_aborted_requests_total": 0,
		"sglang:cached_tokens_total":        0,
		"sglang:num_running_reqs":           0,
		"sglang:token_usage":                0,
	} {
		if got := metricValue(t, fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, name := range []string{"sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds", "sglang:queue_time_seconds"} {
		if got := histogram(t, fams, name).GetSampleCount(); got != n {
			t.Errorf("%s count = %d, want %d", name, got, n)
		}
	}
	// SGLang counts inter-token latency per token: one-token chunks give one sample each.
	if got := histogram(t, fams, "sglang:inter_token_latency_seconds").GetSampleCount(); got != uint64(completion-n) {
		t.Errorf("inter_token_latency count = %d, want %d", got, completion-n)
	}
}

// TestPrefixCaching sends the same 200-token prompt twice to an engine with prefix
// caching: the second finds the first's full blocks. Different prompts find nothing.
func TestPrefixCaching(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randomPrompt := func() []int64 {
		ids := make([]int64, 200)
		for i := range ids {
			ids[i] = int64(256 + rng.IntN(32000-256))
		}
		return ids
	}
	same := randomPrompt()
	cases := []struct {
		name    string
		flavor  Flavor
		caching bool
		prompts [][]int64
		hits    float64 // prompt tokens served from the cache
	}{
		// 200 tokens hold 12 full blocks of 16; the last token is always computed.
		{"vllm same prompt twice", FlavorVLLM, true, [][]int64{same, same}, 192},
		{"vllm different prompts", FlavorVLLM, true, [][]int64{randomPrompt(), randomPrompt()}, 0},
		{"vllm same prompt without caching", FlavorVLLM, false, [][]int64{same, same}, 0},
		{"sglang same prompt twice", FlavorSGLang, true, [][]int64{same, same}, 192},
		{"sglang different prompts", FlavorSGLang, true, [][]int64{randomPrompt(), randomPrompt()}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tinyProfile(t, func(p *Profile) { p.PrefixCaching = tc.caching })
			sim := startSim(t, Config{Profile: p, Flavor: tc.flavor})
			for _, ids := range tc.prompts {
				res, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
					Model:     tinyModel,
					Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
					MaxTokens: openai.Int(4),
				}, option.WithJSONSet("ignore_eos", true))
				if err != nil {
					t.Fatal(err)
				}
				if res.Usage.PromptTokens != 200 {
					t.Fatalf("prompt_tokens = %d, want 200", res.Usage.PromptTokens)
				}
			}
			fams := sim.scrape()
			var queries float64
			if tc.caching {
				queries = 400
			}
			if tc.flavor == FlavorSGLang {
				if got := metricValue(t, fams, "sglang:cached_tokens_total", nil); got != tc.hits {
					t.Errorf("cached_tokens_total = %v, want %v", got, tc.hits)
				}
				// The last steps decoded: SGLang's decode log writes 0 to the batch gauge.
				if got := metricValue(t, fams, "sglang:cache_hit_rate", nil); got != 0 {
					t.Errorf("cache_hit_rate = %v after decoding, want 0", got)
				}
				return
			}
			if got := metricValue(t, fams, "vllm:prefix_cache_hits_total", nil); got != tc.hits {
				t.Errorf("prefix_cache_hits_total = %v, want %v", got, tc.hits)
			}
			if got := metricValue(t, fams, "vllm:prefix_cache_queries_total", nil); got != queries {
				t.Errorf("prefix_cache_queries_total = %v, want %v", got, queries)
			}
			// Cached blocks are free once their requests finish.
			if got := metricValue(t, fams, "vllm:kv_cache_usage_perc", nil); got != 0 {
				t.Errorf("kv_cache_usage_perc = %v after all requests finished, want 0", got)
			}
		})
	}
}
