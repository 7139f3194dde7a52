package engine

import (
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// field is one engine-neutral quantity a metric can feed.
type field uint8

const (
	fWaiting field = iota
	fRunning
	fKVUsage
	fKVCapacity    // tokens, as a gauge value
	fPrefixHits    // cumulative cached tokens
	fPrefixQueries // cumulative queried tokens
	fPrefixRatio   // a hit-ratio gauge
	fPreemptions
	fSpecDrafted  // cumulative draft tokens
	fSpecAccepted // cumulative accepted draft tokens
	fSpecRate     // an acceptance-rate gauge
	numFields
)

// combine says how the samples of one metric (one per engine, model or rank) merge.
type combine uint8

const (
	combineSum combine = iota // queue lengths, counters and capacities add up
	combineMax                // a usage ratio: the fullest engine is the one that saturates
)

// source maps metric names onto a field. Names are tried in order and the first that
// is present wins, so current names come before deprecated ones.
type source struct {
	field   field
	names   []string
	combine combine
}

// table is how one engine exposes the Snapshot fields.
type table struct {
	kind    Kind
	prefix  string // every metric of the engine starts with it; used for detection
	sources []source
	// shards are the labels that tell apart workers reporting the same replica's values
	// (SGLang with --enable-metrics-for-all-schedulers: one series per tensor- or
	// pipeline-parallel rank, each with the whole batch); samples differing only in them
	// merge by max before replicas combine.
	shards []string
	// capacity derives the KV capacity in tokens from an info metric's labels; ok false
	// when the labels do not give it.
	capacityInfo string
	capacity     func(labels map[string]string) (float64, bool)
}

var vllmTable = table{
	kind:   KindVLLM,
	prefix: "vllm:",
	sources: []source{
		{fWaiting, []string{"vllm:num_requests_waiting"}, combineSum},
		{fRunning, []string{"vllm:num_requests_running"}, combineSum},
		{fKVUsage, []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, combineMax},
		{fPrefixHits, []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}, combineSum},
		{fPrefixQueries, []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}, combineSum},
		{fPreemptions, []string{"vllm:num_preemptions_total"}, combineSum},
		{fSpecDrafted, []string{"vllm:spec_decode_num_draft_tokens_total"}, combineSum},
		{fSpecAccepted, []string{"vllm:spec_decode_num_accepted_tokens_total"}, combineSum},
	},
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
}

var sglangTable = table{
	kind:   KindSGLang,
	prefix: "sglang:",
	sources: []source{
		{fWaiting, []string{"sglang:num_queue_reqs"}, combineSum},
		{fRunning, []string{"sglang:num_running_reqs"}, combineSum},
		{fKVUsage, []string{"sglang:token_usage"}, combineMax},
		{fKVCapacity, []string{"sglang:max_total_num_tokens"}, combineSum},
		{fPrefixRatio, []string{"sglang:cache_hit_rate"}, combineMax},
		{fPreemptions, []string{"sglang:num_retracted_reqs"}, combineSum},
		{fSpecRate, []string{"sglang:spec_accept_rate"}, combineMax},
	},
	// dp_rank is a replica and adds up; a pid label comes from prometheus_client's
	// multiprocess mode on gauges without a multiprocess_mode (num_retracted_reqs).
	shards:       []string{"tp_rank", "pp_rank", "moe_ep_rank", "pid"},
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

// detect returns the table of the engine whose metrics the families carry: the first
// table (in the order of tables) with a source metric present, else the first whose
// prefix some family name carries (so that the error can name the engine), else nil. It
// does not depend on map order, so one exposition always gives the same engine.
func detect(fams map[string]*dto.MetricFamily) *table {
	for _, t := range tables {
		for _, src := range t.sources {
			for _, n := range src.names {
				if _, ok := fams[n]; ok {
					return t
				}
			}
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
