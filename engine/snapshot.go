// Package engine is everything slogate knows about the inference engine except
// inference: it scrapes the engine's Prometheus endpoint and maps vLLM or SGLang metric
// names onto one engine-neutral Snapshot, and reads the served models.
//
// The mapping from engine names to Snapshot fields is data (one table per engine, see
// tables.go), so supporting a renamed metric is a one-line change.
package engine

import (
	"fmt"
	"math"
	"time"
)

// Kind is the engine behind slogate.
type Kind uint8

// The engines slogate understands. KindAuto asks the scraper to detect the engine from
// its metric names.
const (
	KindAuto Kind = iota
	KindVLLM
	KindSGLang
)

// String returns "auto", "vllm" or "sglang"; it is a bounded metric label value.
func (k Kind) String() string {
	switch k {
	case KindVLLM:
		return "vllm"
	case KindSGLang:
		return "sglang"
	}
	return "auto"
}

// ParseKind parses "auto", "vllm" or "sglang".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "auto", "":
		return KindAuto, nil
	case "vllm":
		return KindVLLM, nil
	case "sglang":
		return KindSGLang, nil
	}
	return KindAuto, fmt.Errorf("engine: unknown engine %q (want auto, vllm or sglang)", s)
}

// Snapshot is the engine's state as of one scrape, in engine-neutral terms. Fields the
// engine does not expose are NaN; Known reports which are set. A Snapshot is a value: it
// is safe to copy and to share once built.
//
// PrefixHitRatio, SpecAcceptRate, SpecAcceptLength and QueueTimeMean cover about the
// last minute (ratioWindow) on the scraper's clock: the growth of the engine's counters
// from the newest reading at least a minute old (else the oldest kept) to this one. They
// are unknown on the first scrape, after the engine restarted (a counter went back) and
// when nothing happened in the window. SGLang's speculative-decoding figures are its own
// gauges over its last decode-log interval, converted to the same definition.
type Snapshot struct {
	Kind Kind      // the engine detected or configured; KindAuto while unknown
	Up   bool      // the last scrape succeeded and was recognised
	At   time.Time // when the last successful scrape completed; zero if none yet
	Err  error     // why the last scrape failed; nil when Up

	// Sleeping is true when the engine says it sleeps (vLLM sleep mode:
	// vllm:engine_sleep_state{sleep_state="awake"} 0 on any engine). A sleeping engine
	// answers /metrics but serves nothing.
	Sleeping bool

	// Measurements are finite or NaN. Where the engine runs several data-parallel
	// engines (vLLM engine="0","1"; SGLang dp_rank), counts and capacities add up over
	// them and usage ratios take the fullest; tensor- or pipeline-parallel ranks
	// reporting the same batch count once; a breakdown (SGLang priority="<n>") is not
	// added to its total (priority="").
	Waiting           float64 // requests waiting in the engine's queue
	WaitingCapacity   float64 // of which wait for room in the KV cache or batch (vLLM reason="capacity")
	Running           float64 // requests in the running batch
	KVUsage           float64 // fraction of the KV cache in use, 0-1 (the fullest engine if several)
	KVCapacityTokens  float64 // KV cache size in tokens (summed over engines)
	KVUsedTokens      float64 // KV tokens in use (SGLang kv_used_tokens)
	KVAvailableTokens float64 // KV tokens free (SGLang kv_available_tokens)
	PrefixHitRatio    float64 // prefix-cache hit tokens / queried prompt tokens over the window
	Preemptions       float64 // cumulative preemptions (vLLM) or retractions (SGLang), a counter
	SpecAcceptRate    float64 // accepted / proposed draft tokens, the bonus token excluded
	SpecAcceptLength  float64 // mean tokens per verify step, the bonus token included
	QueueTimeMean     float64 // mean seconds requests waited in the engine's queue over the window
	LoRARunning       float64 // LoRA adapters with running requests (vLLM)
	LoRAWaiting       float64 // LoRA adapters with waiting requests (vLLM)
	LoRAMax           float64 // LoRA adapters that fit in one batch (vLLM max_lora)

	Models []string // served model names, from /v1/models
}

// NewSnapshot returns a Snapshot with every measurement unknown.
func NewSnapshot() Snapshot {
	nan := math.NaN()
	return Snapshot{
		Waiting: nan, WaitingCapacity: nan, Running: nan, KVUsage: nan, KVCapacityTokens: nan,
		KVUsedTokens: nan, KVAvailableTokens: nan, PrefixHitRatio: nan, Preemptions: nan,
		SpecAcceptRate: nan, SpecAcceptLength: nan, QueueTimeMean: nan,
		LoRARunning: nan, LoRAWaiting: nan, LoRAMax: nan,
	}
}

// Age returns how old the snapshot's data is at now; +Inf-like (math.MaxInt64) when
// there has been no successful scrape.
func (s Snapshot) Age(now time.Time) time.Duration {
	if s.At.IsZero() {
		return time.Duration(math.MaxInt64)
	}
	return now.Sub(s.At)
}

// Known reports whether v holds a measurement (is not NaN).
func Known(v float64) bool { return !math.IsNaN(v) }
