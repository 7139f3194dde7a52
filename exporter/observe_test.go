package exporter

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

func TestObserve(t *testing.T) {
	chat := wire.Request{Route: wire.RouteChatCompletions, Model: "llama", Stream: true}
	comp := wire.Request{Route: wire.RouteCompletions, Model: "llama"}
	tests := []struct {
		name        string
		req         wire.Request
		res         measure.Result
		want        map[string]float64
		queueSeries int // slogate_queue_wait_seconds series
	}{{
		name: "ok stream with usage",
		req:  chat,
		res: measure.Result{
			Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
			TTFT: 150 * time.Millisecond, TPOT: 20 * time.Millisecond, E2E: 2130 * time.Millisecond,
			OutputChunks: 100, InputTokens: 1000, OutputTokens: 100, Tokens: measure.TokensUsage, Ended: true,
		},
		want: map[string]float64{
			`slogate_requests_total{code="200",model="llama",outcome="ok",route="chat_completions",tier="none"}`: 1,
			`slogate_time_to_first_token_seconds_count{model="llama",tier="none"}`:                               1,
			`slogate_time_to_first_token_seconds_sum{model="llama",tier="none"}`:                                 0.15,
			`slogate_time_per_output_token_seconds_count{model="llama",tier="none"}`:                             1,
			`slogate_time_per_output_token_seconds_sum{model="llama",tier="none"}`:                               0.02,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:                              1,
			`slogate_e2e_request_duration_seconds_sum{model="llama",tier="none"}`:                                2.13,
			`slogate_inter_token_gap_seconds_count{model="llama"}`:                                               0,
			`slogate_prompt_tokens_total{model="llama"}`:                                                         1000,
			`slogate_generation_tokens_total{model="llama",source="usage"}`:                                      100,
			`slogate_generation_tokens_total{model="llama",source="chunks"}`:                                     0,
		},
	}, {
		name: "ok non-streaming: E2E only",
		req:  comp,
		res: measure.Result{
			Route: wire.RouteCompletions, Status: 200, Outcome: measure.OK, E2E: time.Second,
			OutputChunks: 1, InputTokens: 10, OutputTokens: 7, Tokens: measure.TokensUsage, Ended: true,
		},
		want: map[string]float64{
			`slogate_requests_total{code="200",model="llama",outcome="ok",route="completions",tier="none"}`: 1,
			`slogate_time_to_first_token_seconds_count{model="llama",tier="none"}`:                          0,
			`slogate_time_per_output_token_seconds_count{model="llama",tier="none"}`:                        0,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:                         1,
			`slogate_prompt_tokens_total{model="llama"}`:                                                    10,
			`slogate_generation_tokens_total{model="llama",source="usage"}`:                                 7,
		},
	}, {
		name: "ok stream of one token: TTFT, no TPOT",
		req:  chat,
		res: measure.Result{
			Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
			TTFT: 40 * time.Millisecond, E2E: 41 * time.Millisecond, OutputChunks: 1,
			OutputTokens: 1, Tokens: measure.TokensChunks, Ended: true,
		},
		want: map[string]float64{
			`slogate_time_to_first_token_seconds_count{model="llama",tier="none"}`:   1,
			`slogate_time_per_output_token_seconds_count{model="llama",tier="none"}`: 0,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:  1,
			`slogate_generation_tokens_total{model="llama",source="chunks"}`:         1,
		},
	}, {
		name: "client went away mid-stream: counted, tokens kept, no latency",
		req:  chat,
		res: measure.Result{
			Route: wire.RouteChatCompletions, Stream: true, Status: 499, Outcome: measure.ClientCancelled,
			TTFT: 100 * time.Millisecond, E2E: time.Second, OutputChunks: 5, OutputTokens: 5, Tokens: measure.TokensChunks,
		},
		want: map[string]float64{
			`slogate_requests_total{code="499",model="llama",outcome="client_cancelled",route="chat_completions",tier="none"}`: 1,
			`slogate_time_to_first_token_seconds_count{model="llama",tier="none"}`:                                             0,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:                                            0,
			`slogate_generation_tokens_total{model="llama",source="chunks"}`:                                                   5,
		},
	}, {
		name: "engine unreachable",
		req:  chat,
		res:  measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 502, Outcome: measure.UpstreamError, E2E: time.Millisecond},
		want: map[string]float64{
			`slogate_requests_total{code="502",model="llama",outcome="upstream_error",route="chat_completions",tier="none"}`: 1,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:                                          0,
			`slogate_prompt_tokens_total{model="llama"}`:                                                                     0,
		},
	}, {
		name: "kept gaps are observed whatever the outcome",
		req:  chat,
		res: measure.Result{
			Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.AbortedMidstream,
			TTFT: 10 * time.Millisecond, E2E: 80 * time.Millisecond, OutputChunks: 4, MaxGap: 30 * time.Millisecond,
			Gaps: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond},
		},
		want: map[string]float64{
			`slogate_requests_total{code="200",model="llama",outcome="aborted_midstream",route="chat_completions",tier="none"}`: 1,
			`slogate_inter_token_gap_seconds_count{model="llama"}`:                                                              3,
			`slogate_inter_token_gap_seconds_sum{model="llama"}`:                                                                0.06,
			`slogate_time_to_first_token_seconds_count{model="llama",tier="none"}`:                                              0,
		},
	}, {
		name: "no status: code unknown",
		req:  comp,
		res:  measure.Result{Route: wire.RouteCompletions, Outcome: measure.UpstreamError},
		want: map[string]float64{
			`slogate_requests_total{code="unknown",model="llama",outcome="upstream_error",route="completions",tier="none"}`: 1,
		},
	}, {
		name: "unserved model is other",
		req:  wire.Request{Route: wire.RouteCompletions, Model: "mallory's-free-form-name"},
		res:  measure.Result{Route: wire.RouteCompletions, Status: 400, Outcome: measure.BadRequest},
		want: map[string]float64{
			`slogate_requests_total{code="400",model="other",outcome="bad_request",route="completions",tier="none"}`: 1,
		},
	}, {
		name: "missing model is the only served model",
		req:  wire.Request{Route: wire.RouteCompletions},
		res:  measure.Result{Route: wire.RouteCompletions, Status: 200, Outcome: measure.OK, E2E: time.Second},
		want: map[string]float64{
			`slogate_requests_total{code="200",model="llama",outcome="ok",route="completions",tier="none"}`: 1,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:                         1,
		},
	}, {
		name: "queued, then ok: the wait counts in TTFT and E2E, not in TPOT",
		req:  chat,
		res: measure.Result{
			Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
			TTFT: 500 * time.Millisecond, TPOT: 20 * time.Millisecond, E2E: 2500 * time.Millisecond, OutputChunks: 101,
			Tier: "short", QueueWait: time.Second,
		},
		want: map[string]float64{
			`slogate_requests_total{code="200",model="llama",outcome="ok",route="chat_completions",tier="short"}`: 1,
			`slogate_time_to_first_token_seconds_count{model="llama",tier="short"}`:                               1,
			`slogate_time_to_first_token_seconds_sum{model="llama",tier="short"}`:                                 1.5,
			`slogate_time_per_output_token_seconds_sum{model="llama",tier="short"}`:                               0.02,
			`slogate_e2e_request_duration_seconds_sum{model="llama",tier="short"}`:                                3.5,
			`slogate_queue_wait_seconds_count{tier="short"}`:                                                      1,
			`slogate_queue_wait_seconds_sum{tier="short"}`:                                                        1,
			`slogate_time_to_first_token_seconds_count{model="llama",tier="none"}`:                                0,
		},
		queueSeries: 1,
	}, {
		name: "admitted at once: a wait of 0 is recorded",
		req:  comp,
		res:  measure.Result{Route: wire.RouteCompletions, Status: 200, Outcome: measure.OK, E2E: time.Second, Tier: "long"},
		want: map[string]float64{
			`slogate_requests_total{code="200",model="llama",outcome="ok",route="completions",tier="long"}`: 1,
			`slogate_e2e_request_duration_seconds_sum{model="llama",tier="long"}`:                           1,
			`slogate_queue_wait_seconds_count{tier="long"}`:                                                 1,
			`slogate_queue_wait_seconds_sum{tier="long"}`:                                                   0,
		},
		queueSeries: 1,
	}, {
		name: "rejected by admission: counted under its tier, no wait recorded",
		req:  chat,
		res:  measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 429, Outcome: measure.Rejected, Tier: "short"},
		want: map[string]float64{
			`slogate_requests_total{code="429",model="llama",outcome="rejected",route="chat_completions",tier="short"}`: 1,
			`slogate_queue_wait_seconds_count{tier="short"}`:                                                            0,
		},
		queueSeries: 1,
	}, {
		name: "dispatched after a wait, then the engine failed: the wait is recorded, no latency",
		req:  chat,
		res: measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 502, Outcome: measure.UpstreamError,
			E2E: time.Millisecond, Tier: "xlong", QueueWait: 3 * time.Second},
		want: map[string]float64{
			`slogate_requests_total{code="502",model="llama",outcome="upstream_error",route="chat_completions",tier="xlong"}`: 1,
			`slogate_queue_wait_seconds_count{tier="xlong"}`:                                                                  1,
			`slogate_queue_wait_seconds_sum{tier="xlong"}`:                                                                    3,
			`slogate_e2e_request_duration_seconds_count{model="llama",tier="none"}`:                                           0,
		},
		queueSeries: 1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newMetrics(t, Options{ServedModels: served("llama")})
			m.Observe(tc.req, tc.res)
			got := samples(t, reg, "slogate_")
			for _, d := range diffSamples(got, tc.want) {
				t.Error(d)
			}
			if n := testutil.CollectAndCount(m.requests); n != 1 {
				t.Errorf("%d request series, want 1", n)
			}
			if n := testutil.CollectAndCount(m.queueWait); n != tc.queueSeries {
				t.Errorf("%d queue wait series, want %d", n, tc.queueSeries)
			}
		})
	}
}

func TestModelLabel(t *testing.T) {
	tests := []struct {
		name   string
		served func() []string
		model  string
		want   string
	}{
		{"served", served("a", "b"), "b", "b"},
		{"not served", served("a", "b"), "c", OtherModel},
		{"empty, one served", served("a"), "", "a"},
		{"empty, one served listed twice", served("a", "a"), "", "a"},
		{"empty, two served", served("a", "b"), "", OtherModel},
		{"empty, none served", served(), "", OtherModel},
		{"no served list", nil, "a", OtherModel},
		{"case matters", served("Llama"), "llama", OtherModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newMetrics(t, Options{ServedModels: tc.served})
			if got := m.Model(tc.model); got != tc.want {
				t.Errorf("Model(%q) = %q, want %q", tc.model, got, tc.want)
			}
		})
	}
}

func TestServedModelsChange(t *testing.T) {
	var names atomic.Pointer[[]string]
	names.Store(&[]string{})
	m, _ := newMetrics(t, Options{ServedModels: func() []string { return *names.Load() }})
	steps := []struct {
		served []string
		model  string
		want   string
	}{
		{nil, "llama", OtherModel}, // not known yet
		{[]string{"llama"}, "llama", "llama"},
		{[]string{"llama"}, "", "llama"},
		{[]string{"llama", "qwen"}, "", OtherModel},
		{[]string{"llama", "qwen"}, "qwen", "qwen"},
		{[]string{"qwen"}, "llama", OtherModel},
	}
	for i, s := range steps {
		names.Store(&s.served)
		if got := m.Model(s.model); got != s.want {
			t.Errorf("step %d: served %q: Model(%q) = %q, want %q", i, s.served, s.model, got, s.want)
		}
	}
}

func TestModelCardinalityBounded(t *testing.T) {
	m, reg := newMetrics(t, Options{ServedModels: served("llama")})
	res := measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
		TTFT: time.Millisecond, E2E: time.Second, OutputChunks: 3, OutputTokens: 3, Tokens: measure.TokensChunks}
	for i := range 10000 {
		m.Observe(wire.Request{Route: wire.RouteChatCompletions, Model: fmt.Sprintf("model-%d", i)}, res)
	}
	for name, want := range map[string]int{
		"slogate_requests_total":              1, // other only: llama saw no request
		"slogate_time_to_first_token_seconds": 2, // llama (pre-created) and other
		"slogate_generation_tokens_total":     4, // {llama, other} x {usage, chunks}
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (err %v), want %d", name, n, err, want)
		}
	}
	got := samples(t, reg, "slogate_requests_total")
	key := `slogate_requests_total{code="200",model="other",outcome="ok",route="chat_completions",tier="none"}`
	if got[key] != 10000 {
		t.Errorf("%s = %v, want 10000", key, got[key])
	}
}

func TestGapObserver(t *testing.T) {
	m, reg := newMetrics(t, Options{ServedModels: served("llama")})
	llama := m.GapObserver(wire.Request{Model: "llama"})
	other := m.GapObserver(wire.Request{Model: "unknown"})
	for _, g := range []time.Duration{5 * time.Millisecond, 15 * time.Millisecond} {
		llama(g)
	}
	other(time.Second)
	want := map[string]float64{
		`slogate_inter_token_gap_seconds_count{model="llama"}`: 2,
		`slogate_inter_token_gap_seconds_sum{model="llama"}`:   0.02,
		`slogate_inter_token_gap_seconds_count{model="other"}`: 1,
		`slogate_inter_token_gap_seconds_sum{model="other"}`:   1,
	}
	for _, d := range diffSamples(samples(t, reg, "slogate_inter_token_gap"), want) {
		t.Error(d)
	}
}

// TestObserveConcurrent observes from many goroutines while the served models change;
// run with -race. Every request must be counted exactly once.
func TestObserveConcurrent(t *testing.T) {
	var flip atomic.Bool
	m, reg := newMetrics(t, Options{ServedModels: func() []string {
		if flip.Load() {
			return []string{"a", "b"}
		}
		return []string{"a"}
	}})
	const workers, each = 8, 500
	res := measure.Result{Route: wire.RouteCompletions, Status: 200, Outcome: measure.OK, E2E: time.Millisecond}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if w == 0 && i%50 == 0 {
					flip.Store(!flip.Load())
				}
				req := wire.Request{Route: wire.RouteCompletions, Model: []string{"a", "b", "", "z"}[i%4]}
				m.GapObserver(req)(time.Millisecond)
				m.Observe(req, res)
			}
		})
	}
	wg.Wait()
	var total, gaps float64
	for k, v := range samples(t, reg, "slogate_") {
		switch {
		case strings.HasPrefix(k, "slogate_requests_total{"):
			total += v
		case strings.HasPrefix(k, "slogate_inter_token_gap_seconds_count{"):
			gaps += v
		}
	}
	if total != workers*each || gaps != workers*each {
		t.Errorf("counted %v requests and %v gaps, want %d of each", total, gaps, workers*each)
	}
}

func TestObserveAllocs(t *testing.T) {
	m, _ := newMetrics(t, Options{ServedModels: served("llama")})
	req := wire.Request{Route: wire.RouteChatCompletions, Model: "llama", Stream: true}
	res := measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
		TTFT: 100 * time.Millisecond, TPOT: 10 * time.Millisecond, E2E: time.Second, OutputChunks: 91,
		InputTokens: 100, OutputTokens: 91, Tokens: measure.TokensUsage,
		Gaps: []time.Duration{time.Millisecond}}
	tiered := res
	tiered.Tier, tiered.QueueWait = "short", 300*time.Millisecond
	m.Observe(req, res) // creates the request series
	m.Observe(req, tiered)
	gap := m.GapObserver(req)
	allocs := testing.AllocsPerRun(1000, func() {
		m.Observe(req, res)
		m.Observe(req, tiered)
		gap(time.Millisecond)
		_ = m.GapObserver(req)
	})
	if allocs != 0 {
		t.Errorf("Observe + GapObserver allocate %v times per request, want 0", allocs)
	}
}

func BenchmarkObserve(b *testing.B) {
	m, _ := newMetrics(b, Options{ServedModels: served("llama"), TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond})
	req := wire.Request{Route: wire.RouteChatCompletions, Model: "llama", Stream: true}
	res := measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
		TTFT: 100 * time.Millisecond, TPOT: 10 * time.Millisecond, E2E: time.Second, OutputChunks: 91,
		InputTokens: 100, OutputTokens: 91, Tokens: measure.TokensUsage}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(req, res)
		}
	})
}
