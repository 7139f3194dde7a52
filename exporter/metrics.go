package exporter

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// This file holds every metric slogate exports: the per-request metrics created in New,
// and the descriptors of the scrape-time collectors (collectors.go, engine.go).
// docs/metrics.md documents each one.

// Label names.
const (
	labelModel   = "model"
	labelRoute   = "route"
	labelCode    = "code"
	labelOutcome = "outcome"
	labelSource  = "source"
	labelEngine  = "engine"
)

// OtherModel is the model label value of every request whose model is not one the
// engine serves (including a missing model when the engine serves several or none).
const OtherModel = "other"

// Metrics records the measurement of every request. It implements the proxy's Observer.
// All its methods are safe for concurrent use.
type Metrics struct {
	requests  *prometheus.CounterVec   // model, route, code, outcome
	ttft      *prometheus.HistogramVec // model
	tpot      *prometheus.HistogramVec // model
	gap       *prometheus.HistogramVec // model
	e2e       *prometheus.HistogramVec // model
	prompt    *prometheus.CounterVec   // model
	generated *prometheus.CounterVec   // model, source

	models modelIndex
}

// New creates slogate's metrics and registers them on reg (never the global registry):
// the per-request metrics, slogate_build_info, and the scrape-time collectors for
// opts.InFlight and opts.Engine when they are set. Like promauto and the
// client_golang constructors, it panics on a wiring mistake: a nil reg, options that
// fail Validate (check them first where they come from user input), or a metric of the
// same name already registered on reg.
func New(reg prometheus.Registerer, opts Options) *Metrics {
	if reg == nil {
		panic("exporter: New with a nil registerer")
	}
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if opts.Clock == nil {
		opts.Clock = wallClock{}
	}
	f := promauto.With(reg)
	hist := func(name, help string, b []float64) *prometheus.HistogramVec {
		return f.NewHistogramVec(histogramOpts(opts.NativeHistograms, name, help, b), []string{labelModel})
	}
	m := &Metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_requests_total",
			Help: "Inference requests finished, by served model, route, HTTP status the client got (499: the client went away) and outcome.",
		}, []string{labelModel, labelRoute, labelCode, labelOutcome}),
		ttft: hist("slogate_time_to_first_token_seconds",
			"Time from dispatch to the engine to the first output chunk, of streaming requests that ended ok (OTel gen_ai.server.time_to_first_token).",
			buckets(opts.TTFTBuckets, DefaultTTFTBuckets, opts.TTFT)),
		tpot: hist("slogate_time_per_output_token_seconds",
			"Per-request (E2E - TTFT) / (output tokens - 1), of streaming requests that ended ok with at least two output tokens (OTel gen_ai.server.time_per_output_token).",
			buckets(opts.TPOTBuckets, DefaultTPOTBuckets, opts.TPOT)),
		gap: hist("slogate_inter_token_gap_seconds",
			"Time between successive output chunks of a stream, every gap of every stream whatever its outcome.",
			buckets(opts.TPOTBuckets, DefaultTPOTBuckets, opts.TPOT)),
		e2e: hist("slogate_e2e_request_duration_seconds",
			"Time from dispatch to the engine to the end of the response, of requests that ended ok, streaming or not (OTel gen_ai.server.request.duration).",
			buckets(opts.E2EBuckets, DefaultE2EBuckets)),
		prompt: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_prompt_tokens_total",
			Help: "Prompt tokens of finished requests, as the engine's usage report counted them (OTel gen_ai.client.token.usage, type input).",
		}, []string{labelModel}),
		generated: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_generation_tokens_total",
			Help: "Output tokens of finished requests, by how they were counted: usage (the engine's report, exact) or chunks (output chunks of a stream without usage) (OTel gen_ai.client.token.usage, type output).",
		}, []string{labelModel, labelSource}),
	}
	f.NewGauge(prometheus.GaugeOpts{
		Name: "slogate_build_info",
		Help: "Always 1; the labels say which slogate build is running.",
		ConstLabels: prometheus.Labels{
			"version": orUnknown(opts.Version), "revision": orUnknown(opts.Revision), "goversion": runtime.Version(),
		},
	}).Set(1)
	if opts.InFlight != nil {
		reg.MustRegister(inFlightCollector{src: opts.InFlight})
	}
	if opts.Engine != nil {
		reg.MustRegister(engineCollector{src: opts.Engine, clock: opts.Clock})
	}
	m.models.init(m, opts.ServedModels)
	return m
}

// histogramOpts returns the options of one latency histogram, with native buckets too
// when native is set.
func histogramOpts(native bool, name, help string, b []float64) prometheus.HistogramOpts {
	o := prometheus.HistogramOpts{Name: name, Help: help, Buckets: b}
	if native {
		o.NativeHistogramBucketFactor = 1.1
		o.NativeHistogramMaxBucketNumber = 100
		o.NativeHistogramMinResetDuration = time.Hour
	}
	return o
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// The in-flight gauges, read from an InFlightSource at scrape time (collectors.go).
var (
	inFlightRequestsDesc = prometheus.NewDesc("slogate_inflight_requests",
		"Inference requests in flight through slogate: inspected and not yet finished.", nil, nil)
	inFlightKVTokensDesc = prometheus.NewDesc("slogate_inflight_kv_tokens",
		"KV-cache tokens the requests in flight hold, estimated by slogate: prompt (exact for token-id prompts, else text bytes / 4) plus output chunks so far.", nil, nil)
)

// The engine gauges, read from an EngineSource at scrape time (engine.go).
var (
	engineUpDesc = prometheus.NewDesc("slogate_engine_up",
		"1 if slogate's last scrape of the engine's /metrics succeeded and was recognised, else 0.", nil, nil)
	engineInfoDesc = prometheus.NewDesc("slogate_engine_info",
		"Always 1; the engine label says which engine slogate reads (auto until detected).", []string{labelEngine}, nil)
	engineScrapeAgeDesc = prometheus.NewDesc("slogate_engine_scrape_age_seconds",
		"Time since slogate last scraped the engine successfully; absent before the first success.", nil, nil)
	engineServedModelsDesc = prometheus.NewDesc("slogate_engine_served_models",
		"Number of models the engine lists on /v1/models, as last read.", nil, nil)
	engineWaitingDesc = prometheus.NewDesc("slogate_engine_waiting_requests",
		"Requests waiting in the engine's queue.", nil, nil)
	engineRunningDesc = prometheus.NewDesc("slogate_engine_running_requests",
		"Requests in the engine's running batch.", nil, nil)
	engineKVUsageDesc = prometheus.NewDesc("slogate_engine_kv_cache_usage_ratio",
		"Fraction of the engine's KV cache in use, 0-1 (the fullest engine if several).", nil, nil)
	engineKVCapacityDesc = prometheus.NewDesc("slogate_engine_kv_cache_capacity_tokens",
		"Size of the engine's KV cache in tokens.", nil, nil)
	enginePrefixHitDesc = prometheus.NewDesc("slogate_engine_prefix_cache_hit_ratio",
		"Fraction of queried prompt tokens served from the engine's prefix cache, 0-1 (vLLM: since the previous scrape; SGLang: its own gauge).", nil, nil)
	enginePreemptionsDesc = prometheus.NewDesc("slogate_engine_preemptions_total",
		"Requests the engine preempted since it started (vLLM only).", nil, nil)
	engineRetractedDesc = prometheus.NewDesc("slogate_engine_retracted_requests",
		"Requests the engine has retracted from its running batch right now (SGLang only).", nil, nil)
	engineSpecAcceptDesc = prometheus.NewDesc("slogate_engine_spec_decode_acceptance_ratio",
		"Fraction of drafted speculative tokens the engine accepted, 0-1 (vLLM: since the previous scrape; SGLang: its own gauge).", nil, nil)
)
