package enginesim

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric surfaces of the two engines, as their sources define them (vLLM v1
// vllm/v1/metrics/loggers.py; SGLang srt/metrics/collector.py). Names, help texts, label
// names and bucket boundaries match; values come from the simulated scheduler.

var (
	vllmLatencyBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	vllmTTFTBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	vllmITLBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	vllmIterBuckets    = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}

	sglangTTFTBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangITLBuckets   = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8}
	sglangE2EBuckets   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	sglangQueueBuckets = []float64{0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
)

const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

var vllmSpec = flavorSpec{
	labels:      []string{"model_name", "engine"},
	labelValues: func(p Profile) []string { return []string{p.Model, "0"} },
	hists: map[histKind]histSpec{
		histTTFT:         {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets},
		histITL:          {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", vllmITLBuckets},
		histTPOT:         {"vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", vllmITLBuckets},
		histE2E:          {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", vllmLatencyBuckets},
		histQueue:        {"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", vllmLatencyBuckets},
		histPrefill:      {"vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", vllmLatencyBuckets},
		histDecode:       {"vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", vllmLatencyBuckets},
		histInference:    {"vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", vllmLatencyBuckets},
		histPromptTokens: {"vllm:request_prompt_tokens", "Number of prefill tokens processed.", nil},
		histGenTokens:    {"vllm:request_generation_tokens", "Number of generation tokens processed.", nil},
		histMaxTokens:    {"vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", nil},
		histIterTokens:   {"vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", vllmIterBuckets},
	},
	values: []valueSpec{
		{"vllm:num_requests_running", "Number of requests in model execution batches.", gauge, running, "", ""},
		{"vllm:num_requests_waiting", "Number of requests waiting to be processed.", gauge, waiting, "", ""},
		{"vllm:num_requests_waiting_by_reason", "Number of requests waiting, by the reason they wait.", gauge, waiting, "reason", "capacity"},
		{"vllm:num_requests_waiting_by_reason", "Number of requests waiting, by the reason they wait.", gauge, zero, "reason", "deferred"},
		{"vllm:engine_sleep_state", vllmSleepHelp, gauge, sleepValue("awake"), "sleep_state", "awake"},
		{"vllm:engine_sleep_state", vllmSleepHelp, gauge, sleepValue("weights_offloaded"), "sleep_state", "weights_offloaded"},
		{"vllm:engine_sleep_state", vllmSleepHelp, gauge, sleepValue("discard_all"), "sleep_state", "discard_all"},
		{"vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", gauge, kvUsage, "", ""},
		{"vllm:prompt_tokens_total", "Number of prefill tokens processed.", counter, promptTokens, "", ""},
		{"vllm:generation_tokens_total", "Number of generation tokens processed.", counter, generationTokens, "", ""},
		{"vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", counter, preemptions, "", ""},
		{"vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", counter, prefixQueries, "", ""},
		{"vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", counter, prefixHits, "", ""},
	},
	specValues: []valueSpec{
		{"vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", counter, specDrafts, "", ""},
		{"vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", counter, specDraftTokens, "", ""},
		{"vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", counter, specAccepted, "", ""},
	},
	success:      valueSpec{name: "vllm:request_success_total", help: "Count of successfully processed requests."},
	successLabel: "finished_reason",
	info: func(p Profile) (string, string, prometheus.Labels) {
		return "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", vllmCacheConfig(p)
	},
}

var sglangSpec = flavorSpec{
	labels:      []string{"model_name", "engine_type", "tp_rank", "pp_rank"},
	labelValues: func(p Profile) []string { return []string{p.Model, "unified", "0", "0"} },
	hists: map[histKind]histSpec{
		histTTFT:  {"sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", sglangTTFTBuckets},
		histITL:   {"sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sglangITLBuckets},
		histE2E:   {"sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", sglangE2EBuckets},
		histQueue: {"sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sglangQueueBuckets},
	},
	itlPerToken: true,
	values: []valueSpec{
		{"sglang:num_running_reqs", "The number of running requests.", gauge, running, "", ""},
		{"sglang:num_queue_reqs", "The number of requests in the waiting queue.", gauge, waiting, "", ""},
		{"sglang:num_used_tokens", "The number of used tokens.", gauge, usedTokens, "", ""},
		{"sglang:token_usage", "The token usage.", gauge, kvUsage, "", ""},
		{"sglang:cache_hit_rate", "The prefix cache hit rate.", gauge, prefixHitRate, "", ""},
		{"sglang:gen_throughput", "The generation throughput (token/s).", gauge, genThroughput, "", ""},
		{"sglang:num_retracted_reqs", "The number of retracted requests.", gauge, preempted, "", ""},
		{"sglang:num_retracted_requests_total", "Total number of retracted requests.", counter, preemptions, "", ""},
		{"sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", gauge, kvCapacity, "", ""},
		{"sglang:prompt_tokens_total", "Number of prefill tokens processed.", counter, promptTokens, "", ""},
		{"sglang:generation_tokens_total", "Number of generation tokens processed.", counter, generationTokens, "", ""},
		{"sglang:cached_tokens_total", "Number of cached prompt tokens.", counter, prefixHits, "", ""},
		{"sglang:num_requests_total", "Number of requests processed.", counter, finishedTotal, "", ""},
		// SGLang sets both to 0 when it does not speculate (scheduler_metrics_mixin.py,
		// log_decode_stats), so they are always there.
		{"sglang:spec_accept_length", "The average acceptance length of speculative decoding.", gauge, specAcceptLength, "", ""},
		{"sglang:spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).", gauge, specAcceptRate, "", ""},
	},
	idleStart: true,
	priority:  sglangPriority,
	aborted:   "sglang:num_aborted_requests_total",
	info: func(p Profile) (string, string, prometheus.Labels) {
		return "sglang:cache_config_info", "Cache configuration information.", prometheus.Labels{
			"page_size": itoa(p.BlockSize),
			"num_pages": itoa(p.NumBlocks),
		}
	},
}

// sglangPriority says which SGLang metrics carry the priority label under
// --enable-priority-scheduling: the scheduler's (SchedulerMetricsCollector), not the
// tokenizer's counters; and which have a breakdown by priority besides the total: the
// running and queued requests (observability/metrics_collector.py).
func sglangPriority(name string) (labelled, breakdown bool) {
	switch name {
	case "sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:cached_tokens_total", "sglang:num_requests_total":
		return false, false
	case "sglang:num_running_reqs", "sglang:num_queue_reqs":
		return true, true
	}
	return true, false
}

func ratio(num, den int64) float64 {
	if den == 0 {
		return 0
	}
	return float64(num) / float64(den)
}

// pyBool renders a boolean as Python's str() does, as vLLM's info labels carry it.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// Accessors of the values the flavours export, shared by both tables.
func running(st Stats, _ Profile, _ *simMetrics) float64      { return float64(st.Running) }
func waiting(st Stats, _ Profile, _ *simMetrics) float64      { return float64(st.Waiting) }
func preempted(st Stats, _ Profile, _ *simMetrics) float64    { return float64(st.Preempted) }
func usedTokens(st Stats, _ Profile, _ *simMetrics) float64   { return float64(st.UsedTokens) }
func promptTokens(st Stats, _ Profile, _ *simMetrics) float64 { return float64(st.PromptTokens) }
func preemptions(st Stats, _ Profile, _ *simMetrics) float64  { return float64(st.Preemptions) }
func prefixHits(st Stats, _ Profile, _ *simMetrics) float64   { return float64(st.PrefixHits) }
func specDrafts(st Stats, _ Profile, _ *simMetrics) float64   { return float64(st.SpecDrafts) }
func specAccepted(st Stats, _ Profile, _ *simMetrics) float64 { return float64(st.SpecAccepted) }
func kvCapacity(_ Stats, p Profile, _ *simMetrics) float64    { return float64(p.KVCapacity()) }

func generationTokens(st Stats, _ Profile, _ *simMetrics) float64 {
	return float64(st.GenerationTokens)
}
func prefixQueries(st Stats, _ Profile, _ *simMetrics) float64 { return float64(st.PrefixQueries) }
func specDraftTokens(st Stats, _ Profile, _ *simMetrics) float64 {
	return float64(st.SpecDraftTokens)
}
func finishedTotal(st Stats, _ Profile, _ *simMetrics) float64 { return float64(st.finishedTotal()) }
func kvUsage(st Stats, p Profile, _ *simMetrics) float64 {
	return float64(st.UsedBlocks) / float64(p.NumBlocks)
}

// prefixHitRate is SGLang's cache_hit_rate: the last prefill batch's hit rate, 0 when
// the last step decoded only (its decode log writes 0).
func prefixHitRate(st Stats, _ Profile, m *simMetrics) float64 { return m.batchHitRate(st) }
func genThroughput(st Stats, _ Profile, m *simMetrics) float64 {
	return m.throughput(st.GenerationTokens)
}

// vllmSleepHelp is vllm:engine_sleep_state's help text (vllm/v1/metrics/loggers.py).
const vllmSleepHelp = "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."

func zero(Stats, Profile, *simMetrics) float64 { return 0 }

// specAcceptLength is SGLang's: tokens per verify step, the bonus token included; 0
// without speculation.
func specAcceptLength(st Stats, _ Profile, _ *simMetrics) float64 {
	if st.SpecDrafts == 0 {
		return 0
	}
	return 1 + ratio(st.SpecAccepted, st.SpecDrafts)
}

// specAcceptRate is SGLang's: accepted tokens with the bonus token over the verify
// slots (draft tokens plus the bonus slot of each step); 0 without speculation.
func specAcceptRate(st Stats, _ Profile, _ *simMetrics) float64 {
	return ratio(st.SpecAccepted+st.SpecDrafts, st.SpecDraftTokens+st.SpecDrafts)
}
