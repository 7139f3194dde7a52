package engine

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// want builds the expected snapshot of a fixture.
// The fields it does not take are unknown; with sets them.
func want(k Kind, waiting, running, kv, capacity, prefix, preempt, spec float64) Snapshot {
	s := NewSnapshot()
	s.Kind, s.Waiting, s.Running, s.KVUsage, s.KVCapacityTokens = k, waiting, running, kv, capacity
	s.PrefixHitRatio, s.Preemptions, s.SpecAcceptRate = prefix, preempt, spec
	return s
}

// with returns s changed by f.
func with(s Snapshot, f func(s *Snapshot)) Snapshot { f(&s); return s }

// TestReadFixtures reads every exposition in testdata and checks every Snapshot field.
func TestReadFixtures(t *testing.T) {
	tests := []struct {
		file string
		want Snapshot
		err  error // the error read returns with KindAuto; ErrMalformed from the parser
	}{
		// vLLM v1 with data parallelism: queues, counters and capacities add up over
		// engine="0" and "1", usage is the fuller engine's. Capacity comes from
		// kv_cache_size_tokens (551520 per engine). One reading has no window: the
		// ratios are unknown (TestScrapeWindowRatio covers them).
		{file: "vllm_v1_dp.prom", want: want(KindVLLM, 3, 19, 0.4375, 2*551520, nan, 5, nan)},
		// vLLM 0.8: gpu_cache_usage_perc and gpu_prefix_cache_*; capacity only from
		// num_gpu_blocks x block_size (27000 x 16).
		{file: "vllm_v08_old_names.prom", want: want(KindVLLM, 9, 4, 0.9875, 432000, nan, 17, nan)},
		// A hybrid model: kv_cache_size_tokens (1134784) wins over the block product
		// (544 x 522 = 283968).
		{file: "vllm_v1_hybrid.prom", want: want(KindVLLM, 0, 0, 0, 1134784, nan, 0, nan)},
		// What prometheus_client writes as OpenMetrics: counters typed without _total,
		// _created inside the family, a final # EOF. kv_cache_size_tokens="None" falls
		// back to the product 16 x 4096.
		{file: "vllm_v1_openmetrics.prom", want: want(KindVLLM, 1, 2, 0.0625, 65536, nan, 3, nan)},
		// vLLM with two DP engines, engine 1 asleep (sleep level 1): the engine sleeps.
		// 9 of engine 0's 12 waiting requests wait for capacity; lora_requests_info keeps
		// every label set it was ever set to, the newest (largest value) is current:
		// 2 adapters running, 3 waiting, max_lora 4. Adapter names are not read.
		{file: "vllm_v1_sleep_lora_spec.prom", want: with(want(KindVLLM, 12, 6, 0.8, 200000, nan, 4, nan), func(s *Snapshot) {
			s.Sleeping, s.WaitingCapacity = true, 9
			s.LoRARunning, s.LoRAWaiting, s.LoRAMax = 2, 3, 4
		})},
		// vLLM asleep at level 0 (scheduling paused, memory kept): awake 0 with neither
		// weights_offloaded nor discard_all set still means asleep. The 3 requests sent
		// since wait (for capacity) until wake_up.
		{file: "vllm_v1_sleep_level0.prom", want: with(want(KindVLLM, 3, 0, 0, 262144, nan, 0, nan), func(s *Snapshot) {
			s.Sleeping, s.WaitingCapacity = true, 3
		})},
		// SGLang 0.5: capacity from cache_config_info page_size x num_pages (64 x 5120);
		// cache_hit_rate and num_retracted_reqs are not read (per-batch, reset per log).
		// Speculation: length 2.89 and rate 0.63 with the bonus token give a draft size
		// of 2.89/0.63 and a rate without it of 0.63 x 1.89 / (2.89 - 0.63).
		{file: "sglang_cache_config.prom", want: with(want(KindSGLang, 6, 24, 0.31, 327680, nan, nan, 0.63*1.89/(2.89-0.63)), func(s *Snapshot) {
			s.SpecAcceptLength = 2.89
		})},
		// SGLang with two DP ranks and max_total_num_tokens: ranks add up, usage is the
		// fuller rank's, no speculative decoding.
		{file: "sglang_dp_max_total.prom", want: want(KindSGLang, 4, 24, 0.61, 2*327680, nan, nan, nan)},
		// SGLang with --enable-metrics-for-all-schedulers at TP 2: both ranks report the
		// same batch, which counts once. A rate gauge without the length is not enough.
		{file: "sglang_all_schedulers.prom", want: want(KindSGLang, 2, 8, 0.125, 200000, nan, nan, nan)},
		// SGLang --enable-priority-scheduling at DP 2: the totals are priority="", the
		// priority="0","1" breakdown is not added to them (5+1 waiting, 12+10 running);
		// spec_accept_* 0 means no speculation.
		{file: "sglang_priority_dp.prom", want: want(KindSGLang, 6, 22, 0.42, 800000, nan, 9, nan)},
		// SGLang just after start: only cache_config_info until the first batch or the
		// idle log. Recognised, capacity known, the rest unknown.
		{file: "sglang_idle_start.prom", want: want(KindSGLang, nan, nan, nan, 327680, nan, nan, nan)},
		// SGLang 0.5.11 gauges: max_total_num_tokens 0 before the first log, so the
		// capacity is page_size x num_pages (16 x 65088); kv_used/available_tokens; the
		// retraction counter; speculation length 3, rate 0.75 with the bonus token:
		// 4 draft slots, 2 of 3 drafts accepted.
		{file: "sglang_v0511_gauges.prom", want: with(want(KindSGLang, 0, 3, 0.05, 16*65088, nan, 11, 2.0/3), func(s *Snapshot) {
			s.KVUsedTokens, s.KVAvailableTokens, s.SpecAcceptLength = 52070, 900000, 3
		})},
		{file: "none.prom", err: ErrUnrecognised},
		{file: "malformed.prom", err: ErrMalformed},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			fams, err := parseExposition(bytes.NewReader(fixture(t, tt.file)))
			if err != nil {
				if !errors.Is(err, tt.err) || !errors.Is(tt.err, ErrMalformed) {
					t.Fatalf("parseExposition: %v, want error %v", err, tt.err)
				}
				if errors.Is(err, ErrUnrecognised) {
					t.Errorf("a parse error is not ErrUnrecognised: %v", err)
				}
				return
			}
			rd, err := read(fams, KindAuto)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("read: %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			got := rd.snapshot(nil)
			for _, d := range measurementDiff(got, tt.want) {
				t.Error(d)
			}
			if got.Up || !got.At.IsZero() || got.Err != nil || got.Models != nil {
				t.Errorf("snapshot() sets scrape fields: %+v", got)
			}

			// The engine named explicitly reads the same; the other engine finds nothing.
			rd2, err := read(fams, tt.want.Kind)
			if err != nil {
				t.Errorf("read(%v): %v", tt.want.Kind, err)
			}
			for _, d := range measurementDiff(rd2.snapshot(nil), tt.want) {
				t.Errorf("read(%v): %s", tt.want.Kind, d)
			}
			other := KindSGLang
			if tt.want.Kind == KindSGLang {
				other = KindVLLM
			}
			if _, err := read(fams, other); !errors.Is(err, ErrUnrecognised) {
				t.Errorf("read(%v) = %v, want ErrUnrecognised", other, err)
			}
		})
	}
	for _, name := range fixtureNames(t) {
		if !covered[name] {
			t.Errorf("fixture %s has no expectations", name)
		}
	}
}

// vllmText is a minimal vLLM exposition with the given body lines.
func vllmText(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// TestReadEdgeCases covers the rules read applies beyond the fixtures.
func TestReadEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		text string
		kind Kind
		want Snapshot
		err  error
	}{
		{
			name: "current names win over deprecated ones",
			text: vllmText(
				`vllm:kv_cache_usage_perc{engine="0"} 0.5`,
				`vllm:gpu_cache_usage_perc{engine="0"} 0.7`,
				`vllm:prefix_cache_hits_total{engine="0"} 10`,
				`vllm:prefix_cache_queries_total{engine="0"} 100`,
				`vllm:gpu_prefix_cache_hits_total{engine="0"} 90`,
				`vllm:gpu_prefix_cache_queries_total{engine="0"} 100`,
			),
			want: want(KindVLLM, nan, nan, 0.5, nan, nan, nan, nan),
		},
		{
			name: "untyped samples without HELP or TYPE",
			text: vllmText(`vllm:num_requests_running 2`, `vllm:num_requests_waiting 5`),
			want: want(KindVLLM, 5, 2, nan, nan, nan, nan, nan),
		},
		{
			name: "non-finite samples are unknown and skipped",
			text: vllmText(
				`vllm:num_requests_running{engine="0"} +Inf`,
				`vllm:num_requests_running{engine="1"} 3`,
				`vllm:num_requests_waiting{engine="0"} NaN`,
				`vllm:kv_cache_usage_perc{engine="0"} -Inf`,
			),
			want: want(KindVLLM, nan, 3, nan, nan, nan, nan, nan),
		},
		{
			name: "an overflowing sum is unknown",
			text: vllmText(
				`vllm:num_requests_waiting{engine="0"} 1.7e308`,
				`vllm:num_requests_waiting{engine="1"} 1.7e308`,
			),
			want: want(KindVLLM, nan, nan, nan, nan, nan, nan, nan),
		},
		{
			name: "capacity unknown before the KV cache is sized",
			text: vllmText(
				`vllm:num_requests_running{engine="0"} 0`,
				`vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="None"} 1`,
			),
			want: want(KindVLLM, nan, 0, nan, nan, nan, nan, nan),
		},
		{
			name: "kv_cache_size_tokens None or 0 falls back to the block product",
			text: vllmText(
				`vllm:num_requests_running{engine="0"} 0`,
				`vllm:cache_config_info{block_size="16",engine="0",kv_cache_size_tokens="0",num_gpu_blocks="10"} 1`,
				`vllm:cache_config_info{block_size="16",engine="1",kv_cache_size_tokens="None",num_gpu_blocks="20"} 1`,
			),
			want: want(KindVLLM, nan, 0, nan, 480, nan, nan, nan),
		},
		{
			name: "an overflowing capacity product is unknown",
			text: vllmText(
				`vllm:num_requests_running 0`,
				`vllm:cache_config_info{block_size="1e200",num_gpu_blocks="1e200"} 1`,
			),
			want: want(KindVLLM, nan, 0, nan, nan, nan, nan, nan),
		},
		{
			name: "SGLang max_total_num_tokens wins over cache_config_info",
			text: vllmText(
				`sglang:num_running_reqs{tp_rank="0"} 1`,
				`sglang:max_total_num_tokens{tp_rank="0"} 1000`,
				`sglang:cache_config_info{num_pages="10",page_size="64"} 1`,
			),
			want: want(KindSGLang, nan, 1, nan, 1000, nan, nan, nan),
		},
		{
			name: "SGLang DP ranks add up, TP ranks of one DP rank do not",
			text: vllmText(
				`sglang:num_queue_reqs{dp_rank="0",tp_rank="0"} 3`,
				`sglang:num_queue_reqs{dp_rank="0",tp_rank="1"} 3`,
				`sglang:num_queue_reqs{dp_rank="1",tp_rank="2"} 4`,
				`sglang:num_queue_reqs{dp_rank="1",tp_rank="3"} 4`,
			),
			want: want(KindSGLang, 7, nan, nan, nan, nan, nan, nan),
		},
		{
			name: "vLLM engines always add up",
			text: vllmText(
				`vllm:num_requests_waiting{engine="0",model_name="m"} 3`,
				`vllm:num_requests_waiting{engine="1",model_name="m"} 3`,
			),
			want: want(KindVLLM, 6, nan, nan, nan, nan, nan, nan),
		},
		{
			name: "both engines' names: vLLM, whatever the map order",
			text: vllmText(`sglang:num_running_reqs 1`, `vllm:num_requests_running 2`),
			want: want(KindVLLM, nan, 2, nan, nan, nan, nan, nan),
		},
		{
			name: "an engine prefix without a known metric",
			text: vllmText(`vllm:some_future_metric{engine="0"} 1`),
			err:  ErrUnrecognised,
		},
		{
			name: "the info metric alone is an engine starting up",
			text: vllmText(`vllm:cache_config_info{block_size="16",num_gpu_blocks="10"} 1`),
			want: want(KindVLLM, nan, nan, nan, 160, nan, nan, nan),
		},
		{name: "empty exposition", text: "", err: ErrUnrecognised},
		{
			name: "SGLang asked for, vLLM served",
			text: vllmText(`vllm:num_requests_running 2`),
			kind: KindSGLang,
			err:  ErrUnrecognised,
		},
		{name: "no final newline", text: `vllm:num_requests_running 2`, err: ErrMalformed},
		{name: "OpenMetrics exemplar", text: vllmText(`vllm:num_requests_running 2 # {trace_id="a"} 1`), err: ErrMalformed},
		{name: "OpenMetrics info type", text: vllmText(`# TYPE vllm:build info`, `vllm:build_info{version="1"} 1`), err: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Map order varies between runs of read; the result must not.
			for range 20 {
				fams, err := parseExposition(strings.NewReader(tt.text))
				if err == nil {
					var rd reading
					rd, err = read(fams, tt.kind)
					if err == nil {
						for _, d := range measurementDiff(rd.snapshot(nil), tt.want) {
							t.Fatal(d)
						}
					}
				}
				if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		in      string
		want    Kind
		wantErr bool
	}{
		{"", KindAuto, false},
		{"auto", KindAuto, false},
		{"vllm", KindVLLM, false},
		{"sglang", KindSGLang, false},
		{"VLLM", KindAuto, true},
		{"tgi", KindAuto, true},
	}
	for _, tt := range tests {
		got, err := ParseKind(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseKind(%q) = %v, %v", tt.in, got, err)
		}
		if err == nil && tt.in != "" && got.String() != tt.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tt.in)
		}
	}
}

func TestNewSnapshotUnknown(t *testing.T) {
	s := NewSnapshot()
	for name, v := range fields(s) {
		if Known(v) {
			t.Errorf("%s = %v, want unknown", name, v)
		}
	}
	if s.Up || s.Kind != KindAuto || !s.At.IsZero() || s.Err != nil || s.Models != nil {
		t.Errorf("NewSnapshot() = %+v", s)
	}
}
