package enginesim

import (
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// How the simulated engine says it runs, in the shapes of the engines' own answers, so
// that slogate's reports of a simulated run carry an engine version and flags as they do
// against a real engine (engine.Scraper.Info). The conformance corpus under
// engine/testdata/info pins the shapes; engine's TestSimulatorInfoShape checks these
// answers against it.

// simVersion is the version the simulator reports in both flavours: it says what the
// engine is, instead of borrowing a release number of vLLM or SGLang.
const simVersion = "enginesim"

// serveVersion serves vLLM's GET /version (vllm/entrypoints/serve/instrumentator/basic.py,
// show_version).
func (s *Server) serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": simVersion})
}

// serveServerInfo serves SGLang's GET /server_info and the deprecated /get_server_info
// (python/sglang/srt/entrypoints/http_server.py, get_server_info): the server arguments
// (dataclasses.asdict(server_args)), the scheduler's info, one internal state per DP
// rank, and the version. It answers the arguments the simulator models, with the profile's
// values, and those that tell how it is deployed (one GPU, no quantization, no
// disaggregation), by SGLang's names and JSON types; the arguments it has no counterpart
// for are left out rather than invented. Optional arguments the simulator does not set
// are null, as SGLang writes an unset one, including the credentials (api_key,
// admin_api_key: the simulator takes none).
func (s *Server) serveServerInfo(w http.ResponseWriter, _ *http.Request) {
	p := s.cfg.Profile
	args := map[string]any{
		"model_path": p.Model, "tokenizer_path": p.Model, "served_model_name": p.Model,
		"tokenizer_mode": "auto", "load_format": "auto", "trust_remote_code": false, "is_embedding": false,
		"context_length": p.MaxModelLen, "dtype": "auto", "kv_cache_dtype": "auto", "quantization": nil,
		"max_running_requests": p.MaxNumSeqs, "max_queued_requests": nil, "max_total_tokens": nil,
		"chunked_prefill_size": p.MaxBatchedTokens, "max_prefill_tokens": p.MaxBatchedTokens,
		"schedule_policy": "fcfs", "enable_priority_scheduling": p.PriorityScheduling,
		"page_size": p.BlockSize, "disable_radix_cache": !p.PrefixCaching,
		"device": "cuda", "tp_size": 1, "pp_size": 1, "dp_size": 1, "ep_size": 1, "nnodes": 1, "node_rank": 0,
		"enable_dp_attention": false, "disaggregation_mode": "null", "enable_metrics": true,
		"api_key": nil, "admin_api_key": nil,
		"speculative_algorithm": nil, "speculative_num_steps": nil, "speculative_eagle_topk": nil,
		"speculative_num_draft_tokens": nil,
	}
	if d := p.Speculation.DraftTokens; d > 0 {
		// An EAGLE chain (top-k 1) verifying d drafted tokens: SGLang then sets
		// num_draft_tokens to num_steps + 1.
		args["speculative_algorithm"], args["speculative_num_steps"] = "EAGLE", d
		args["speculative_eagle_topk"], args["speculative_num_draft_tokens"] = 1, d+1
	}
	state := map[string]any{
		"model_path": p.Model, "tp_size": 1, "max_running_requests": p.MaxNumSeqs,
		"memory_usage":                          map[string]any{"token_capacity": p.KVCapacity()},
		"effective_max_running_requests_per_dp": p.MaxNumSeqs,
	}
	info := make(map[string]any, len(args)+5)
	for k, v := range args {
		info[k] = v
	}
	// The scheduler's info: the prompt that fits leaves room for one output token, as the
	// simulator's context check (fitContext) has it.
	info["status"], info["max_total_num_tokens"], info["max_req_input_len"] = "ready", p.KVCapacity(), p.MaxModelLen-1
	info["internal_states"] = []any{state}
	info["version"] = simVersion
	writeJSON(w, http.StatusOK, info)
}

// vllmCacheConfig is vllm:cache_config_info's labels: every field of vLLM's CacheConfig
// as str() writes it (vllm/config/cache.py, metrics_info, which loggers.py's
// log_metrics_info exports with the engine index), those the simulator models from the
// profile and the rest at vLLM's defaults.
func vllmCacheConfig(p Profile) prometheus.Labels {
	return prometheus.Labels{
		"block_size":                             itoa(p.BlockSize),
		"num_gpu_blocks":                         itoa(p.NumBlocks),
		"kv_cache_size_tokens":                   itoa(p.KVCapacity()),
		"kv_cache_max_concurrency":               pyFloat(float64(p.KVCapacity()) / float64(p.MaxModelLen)),
		"enable_prefix_caching":                  pyBool(p.PrefixCaching),
		"cache_dtype":                            "auto",
		"gpu_memory_utilization":                 "0.9",
		"num_cpu_blocks":                         "None",
		"num_gpu_blocks_override":                "None",
		"user_specified_block_size":              "False",
		"user_specified_mamba_block_size":        "False",
		"_block_size_resolved":                   "True",
		"kv_cache_layout":                        "None",
		"prefix_match_unit":                      "None",
		"is_attention_free":                      "False",
		"sliding_window":                         "None",
		"prefix_caching_hash_algo":               "sha256",
		"attn_group_size":                        "None",
		"prefix_cache_retention_interval":        "0",
		"kv_cache_dtype_skip_layers":             "[]",
		"mamba_page_size_padded":                 "None",
		"skip_page_size_padded":                  "None",
		"mamba_block_size":                       "None",
		"mamba_cache_dtype":                      "auto",
		"mamba_ssm_cache_dtype":                  "auto",
		"mamba_cache_mode":                       "none",
		"enable_mamba_fine_grained_prefix_cache": "False",
		"replayssm_buffer_len":                   "16",
		"use_replayssm":                          "False",
		"use_kda_recoverssm":                     "False",
		"effective_attention_block_size":         "None",
		"kv_sharing_fast_prefill":                "False",
		"kv_cache_memory_bytes":                  "None",
		"kv_offloading_size":                     "None",
		"kv_offloading_backend":                  "native",
		"engine":                                 "0",
	}
}

// pyFloat renders a finite float as Python's str() does for the values here: the
// shortest repr, with ".0" on whole numbers.
func pyFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if v == math.Trunc(v) && math.Abs(v) < 1e16 {
		s = strconv.FormatFloat(v, 'f', 1, 64)
	}
	return s
}
