package engine

import (
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// field is one engine-neutral quantity a metric can feed.
type field uint8

const (
	fWaiting         field = iota
	fWaitingCapacity       // requests waiting because the KV cache or batch is full
	fRunning
	fKVUsage
	fKVCapacity    // tokens, as a gauge value
	fPageSize      // tokens per KV page, as a gauge value
	fNumPages      // KV pages, as a gauge value
	fKVUsed        // KV tokens held by running requests
	fKVAvailable   // KV tokens free for new requests
	fPrefixHits    // cumulative cached tokens
	fPrefixQueries // cumulative queried tokens
	fPreemptions   // cumulative preemptions (vLLM) or retractions (SGLang)
	fSpecDrafts    // cumulative draft proposals (one per speculative step and request)
	fSpecDrafted   // cumulative draft tokens
	fSpecAccepted  // cumulative accepted draft tokens, the bonus token excluded
	fSpecLength    // SGLang's gauge: mean tokens per verify step, the bonus token included
	fSpecRate      // SGLang's gauge: accepted (bonus included) / (steps x draft tokens)
	fAwake         // 1 when the engine is awake, 0 when it sleeps
	fQueueSum      // cumulative seconds requests waited in the engine's queue
	fQueueCount    // cumulative requests that left the engine's queue
	numFields
)

// combine says how the shards of one engine (data-parallel ranks) merge.
type combine uint8

const (
	combineSum combine = iota // queue lengths, counters and capacities add up
	combineMax                // a usage ratio: the fullest engine is the one that saturates
	combineMin                // a state flag: the engine is awake only if every shard is
)

// labelRole says what two samples of one metric that differ in a label are to each other.
type labelRole uint8

const (
	// roleCopy: the same value reported twice (tensor- or pipeline-parallel ranks of one
	// scheduler, a multiprocess pid). They merge by max. Every label a table does not
	// name has this role, so an extra label an engine adds (--extra-metric-labels, a new
	// release) can never multiply a value; at worst it hides a sum behind a max.
	roleCopy labelRole = iota
	// roleShard: parts of one engine whose values add up (vLLM engine, SGLang dp_rank).
	// They merge by the source's combine.
	roleShard
	// roleBreakdown: a split of a total in the same family (SGLang priority, SGLang
	// cache_source). The series whose value of the label is empty (or that lacks it) is
	// the total and is kept alone; when there is none, the parts are summed.
	roleBreakdown
)

// part selects which value of a sample a source reads.
type part uint8

const (
	partValue part = iota // a gauge's, counter's or untyped sample's value
	partSum               // a histogram's sum
	partCount             // a histogram's count
)

// match keeps only the samples whose label name has the value value.
type match struct{ name, value string }

// source maps metric names onto a field. Names are tried in order and the first that
// is present wins, so current names come before deprecated ones.
type source struct {
	field   field
	names   []string
	combine combine
	part    part
	where   *match               // nil: every sample
	labels  map[string]labelRole // overrides of the table's roles for this source
}

// table is how one engine exposes the Snapshot fields.
type table struct {
	kind    Kind
	prefix  string // every metric of the engine starts with it; used for detection
	sources []source
	// labels gives the role of each label the engine is known to put on its metrics;
	// labels not named are copies (roleCopy).
	labels map[string]labelRole
	// capacity derives the KV capacity in tokens from an info metric's labels; ok false
	// when the labels do not give it.
	capacityInfo string
	capacity     func(labels map[string]string) (float64, bool)
	// lora is the info metric listing the LoRA adapters in use, "" if none.
	lora string
}

// roles returns the label roles of src in t.
func (t *table) roles(src source) map[string]labelRole {
	if len(src.labels) == 0 {
		return t.labels
	}
	out := make(map[string]labelRole, len(t.labels)+len(src.labels))
	for k, v := range t.labels {
		out[k] = v
	}
	for k, v := range src.labels {
		out[k] = v
	}
	return out
}

// vllmTable follows vllm/v1/metrics/loggers.py (PrometheusStatLogger; every metric
// carries model_name and engine, the data-parallel engine index) and
// vllm/v1/spec_decode/metrics.py (SpecDecodingProm: registered only when a speculative
// config is set; accepted tokens exclude the bonus token).
var vllmTable = table{
	kind:   KindVLLM,
	prefix: "vllm:",
	sources: []source{
		{field: fWaiting, names: []string{"vllm:num_requests_waiting"}},
		{field: fWaitingCapacity, names: []string{"vllm:num_requests_waiting_by_reason"}, where: &match{"reason", "capacity"}},
		{field: fRunning, names: []string{"vllm:num_requests_running"}},
		{field: fKVUsage, names: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, combine: combineMax},
		{field: fPrefixHits, names: []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}},
		{field: fPrefixQueries, names: []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}},
		{field: fPreemptions, names: []string{"vllm:num_preemptions_total"}},
		{field: fSpecDrafts, names: []string{"vllm:spec_decode_num_drafts_total"}},
		{field: fSpecDrafted, names: []string{"vllm:spec_decode_num_draft_tokens_total"}},
		{field: fSpecAccepted, names: []string{"vllm:spec_decode_num_accepted_tokens_total"}},
		{field: fAwake, names: []string{"vllm:engine_sleep_state"}, combine: combineMin, where: &match{"sleep_state", "awake"}},
		{field: fQueueSum, names: []string{"vllm:request_queue_time_seconds"}, part: partSum},
		{field: fQueueCount, names: []string{"vllm:request_queue_time_seconds"}, part: partCount},
	},
	labels:       map[string]labelRole{"engine": roleShard},
	capacityInfo: "vllm:cache_config_info",
	capacity: func(l map[string]string) (float64, bool) {
		// kv_cache_size_tokens is exact where the block product is not (hybrid models).
		if v, ok := number(l["kv_cache_size_tokens"]); ok && v > 0 {
			return v, true
		}
		blocks, ok1 := number(l["num_gpu_blocks"])
		size, ok2 := number(l["block_size"])
		return blocks * size, ok1 && ok2 && blocks > 0 && size > 0
	},
	lora: "vllm:lora_requests_info",
}

// sglangTable follows python/sglang/srt/observability/metrics_collector.py
// (SchedulerMetricsCollector, TokenizerMetricsCollector) and
// scheduler_metrics_mixin.py (labels model_name, engine_type, tp_rank, pp_rank,
// moe_ep_rank, dp_rank under DP; priority under --enable-priority-scheduling).
var sglangTable = table{
	kind:   KindSGLang,
	prefix: "sglang:",
	sources: []source{
		{field: fWaiting, names: []string{"sglang:num_queue_reqs"}},
		{field: fRunning, names: []string{"sglang:num_running_reqs"}},
		{field: fKVUsage, names: []string{"sglang:token_usage"}, combine: combineMax},
		{field: fKVCapacity, names: []string{"sglang:max_total_num_tokens"}},
		{field: fPageSize, names: []string{"sglang:page_size"}, combine: combineMax},
		{field: fNumPages, names: []string{"sglang:num_pages"}},
		{field: fKVUsed, names: []string{"sglang:kv_used_tokens"}},
		{field: fKVAvailable, names: []string{"sglang:kv_available_tokens"}},
		// cache_hit_rate is not read: it is the last prefill batch's, and 0 after every
		// decode log (scheduler_metrics_mixin.py, log_decode_stats).
		{field: fPrefixHits, names: []string{"sglang:cached_tokens_total"}},
		{field: fPrefixQueries, names: []string{"sglang:prompt_tokens_total"}},
		// num_retracted_reqs is not read: it is reset after every stats log.
		{field: fPreemptions, names: []string{"sglang:num_retracted_requests_total"}},
		{field: fSpecLength, names: []string{"sglang:spec_accept_length"}, combine: combineMax},
		{field: fSpecRate, names: []string{"sglang:spec_accept_rate"}, combine: combineMax},
		{field: fQueueSum, names: []string{"sglang:queue_time_seconds"}, part: partSum},
		{field: fQueueCount, names: []string{"sglang:queue_time_seconds"}, part: partCount},
	},
	labels: map[string]labelRole{
		"dp_rank": roleShard, "priority": roleBreakdown, "cache_source": roleBreakdown,
	},
	capacityInfo: "sglang:cache_config_info",
	capacity: func(l map[string]string) (float64, bool) {
		pages, ok1 := number(l["num_pages"])
		size, ok2 := number(l["page_size"])
		return pages * size, ok1 && ok2 && pages > 0 && size > 0
	},
}

var tables = []*table{&vllmTable, &sglangTable}

// tableFor returns the table of kind k, or nil for KindAuto.
func tableFor(k Kind) *table {
	for _, t := range tables {
		if t.kind == k {
			return t
		}
	}
	return nil
}

// known reports whether the families carry a metric t reads: a source or its info
// metric (SGLang exposes only cache_config_info until its first batch or idle log).
func (t *table) known(fams map[string]*dto.MetricFamily) bool {
	if _, ok := fams[t.capacityInfo]; ok {
		return true
	}
	for _, src := range t.sources {
		for _, n := range src.names {
			if _, ok := fams[n]; ok {
				return true
			}
		}
	}
	return false
}

// detect returns the table of the engine whose metrics the families carry: the first
// table (in the order of tables) with a known metric present, else the first whose
// prefix some family name carries (so that the error can name the engine), else nil. It
// does not depend on map order, so one exposition always gives the same engine.
func detect(fams map[string]*dto.MetricFamily) *table {
	for _, t := range tables {
		if t.known(fams) {
			return t
		}
	}
	for _, t := range tables {
		for n := range fams {
			if strings.HasPrefix(n, t.prefix) {
				return t
			}
		}
	}
	return nil
}
