package exporter

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
)

func TestEngineCollector(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	snap := func(edit func(*engine.Snapshot)) engine.Snapshot {
		s := engine.NewSnapshot()
		edit(&s)
		return s
	}
	tests := []struct {
		name string
		snap engine.Snapshot
		now  time.Time
		want map[string]float64
	}{{
		name: "vllm, everything known",
		snap: snap(func(s *engine.Snapshot) {
			s.Kind, s.Up, s.At = engine.KindVLLM, true, at
			s.Waiting, s.Running, s.KVUsage, s.KVCapacityTokens = 3, 16, 0.82, 250000
			s.PrefixHitRatio, s.Preemptions, s.SpecAcceptRate = 0.4, 12, 0.65
			s.SpecAcceptLength, s.WaitingCapacity, s.QueueTimeMean, s.Sleeping = 2.95, 2, 0.125, true
			s.KVUsedTokens, s.KVAvailableTokens = 205000, 45000
			s.LoRARunning, s.LoRAWaiting, s.LoRAMax = 1, 2, 4
			s.Models = []string{"llama", "llama-lora"}
		}),
		now: at.Add(1500 * time.Millisecond),
		want: map[string]float64{
			`slogate_engine_up`:                             1,
			`slogate_engine_info{engine="vllm"}`:            1,
			`slogate_engine_scrape_age_seconds`:             1.5,
			`slogate_engine_served_models`:                  2,
			`slogate_engine_waiting_requests`:               3,
			`slogate_engine_running_requests`:               16,
			`slogate_engine_kv_cache_usage_ratio`:           0.82,
			`slogate_engine_kv_cache_capacity_tokens`:       250000,
			`slogate_engine_prefix_cache_hit_ratio`:         0.4,
			`slogate_engine_preemptions_total`:              12,
			`slogate_engine_spec_decode_acceptance_ratio`:   0.65,
			`slogate_engine_spec_decode_acceptance_length`:  2.95,
			`slogate_engine_waiting_capacity_requests`:      2,
			`slogate_engine_queue_time_mean_seconds`:        0.125,
			`slogate_engine_sleeping`:                       1,
			`slogate_engine_kv_cache_used_tokens`:           205000,
			`slogate_engine_kv_cache_available_tokens`:      45000,
			`slogate_engine_lora_adapters{state="running"}`: 1,
			`slogate_engine_lora_adapters{state="waiting"}`: 2,
			`slogate_engine_lora_max_adapters`:              4,
		},
	}, {
		name: "sglang, unknowns skipped, retractions as a gauge",
		snap: snap(func(s *engine.Snapshot) {
			s.Kind, s.Up, s.At = engine.KindSGLang, true, at
			s.Waiting, s.Running, s.KVUsage, s.Preemptions = 0, 4, 0.1, 2
			s.Models = []string{"qwen"}
		}),
		now: at.Add(250 * time.Millisecond),
		want: map[string]float64{
			`slogate_engine_up`:                    1,
			`slogate_engine_info{engine="sglang"}`: 1,
			`slogate_engine_scrape_age_seconds`:    0.25,
			`slogate_engine_served_models`:         1,
			`slogate_engine_waiting_requests`:      0,
			`slogate_engine_running_requests`:      4,
			`slogate_engine_kv_cache_usage_ratio`:  0.1,
			`slogate_engine_preemptions_total`:     2,
			`slogate_engine_sleeping`:              0,
		},
	}, {
		name: "down after a good scrape: no stale measurements, age grows",
		snap: snap(func(s *engine.Snapshot) {
			s.Kind, s.Up, s.At, s.Err = engine.KindVLLM, false, at, errors.New("connection refused")
			s.Waiting, s.Running = 5, 5
			s.Models = []string{"llama"}
		}),
		now: at.Add(time.Minute),
		want: map[string]float64{
			`slogate_engine_up`:                  0,
			`slogate_engine_info{engine="vllm"}`: 1,
			`slogate_engine_scrape_age_seconds`:  60,
			`slogate_engine_served_models`:       1,
		},
	}, {
		name: "never scraped",
		snap: snap(func(s *engine.Snapshot) { s.Err = errors.New("engine: not scraped yet") }),
		now:  at,
		want: map[string]float64{
			`slogate_engine_up`:                  0,
			`slogate_engine_info{engine="auto"}`: 1,
			`slogate_engine_served_models`:       0,
		},
	}, {
		name: "clock behind the scrape: age 0",
		snap: snap(func(s *engine.Snapshot) {
			s.Kind, s.Up, s.At, s.Running = engine.KindVLLM, true, at, math.NaN()
		}),
		now: at.Add(-time.Second),
		want: map[string]float64{
			`slogate_engine_up`:                  1,
			`slogate_engine_info{engine="vllm"}`: 1,
			`slogate_engine_scrape_age_seconds`:  0,
			`slogate_engine_served_models`:       0,
			`slogate_engine_sleeping`:            0,
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(tc.now)
			_, reg := newMetrics(t, Options{Engine: engineStub{tc.snap}, Clock: clk})
			got := samples(t, reg, "slogate_engine_")
			if len(got) != len(tc.want) {
				t.Errorf("got %d samples, want %d: %v", len(got), len(tc.want), got)
			}
			for _, d := range diffSamples(got, tc.want) {
				t.Error(d)
			}
			// The collector is checked: everything it emits was described.
			if _, err := testutil.CollectAndLint(engineCollector{src: engineStub{tc.snap}, clock: clk}); err != nil {
				t.Errorf("CollectAndLint: %v", err)
			}
		})
	}
}

func TestEngineScrapeAgeFollowsClock(t *testing.T) {
	at := time.Unix(5000, 0)
	s := engine.NewSnapshot()
	s.Kind, s.Up, s.At = engine.KindVLLM, true, at
	clk := clock.NewFake(at)
	_, reg := newMetrics(t, Options{Engine: engineStub{s}, Clock: clk})
	for _, step := range []time.Duration{0, 3 * time.Second, 90 * time.Second} {
		clk.SetTime(at.Add(step))
		got := samples(t, reg, "slogate_engine_scrape_age_seconds")["slogate_engine_scrape_age_seconds"]
		if got != step.Seconds() {
			t.Errorf("at +%v: age %v, want %v", step, got, step.Seconds())
		}
	}
}

func TestEngineNotRegisteredWithoutSource(t *testing.T) {
	_, reg := newMetrics(t, Options{})
	if got := samples(t, reg, "slogate_engine_"); len(got) != 0 {
		t.Errorf("engine metrics without an engine source: %v", got)
	}
}
