package exporter

import (
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
)

// This file holds every metric slogate exports but the tenants' (tenants.go): the
// per-request and per-decision metrics created in New, and the descriptors of the
// scrape-time collectors (collectors.go, engine.go, admission.go).
// docs/metrics.md documents each one.

// Label names.
const (
	labelModel   = "model"
	labelRoute   = "route"
	labelCode    = "code"
	labelOutcome = "outcome"
	labelSource  = "source"
	labelEngine  = "engine"

	labelTier     = "tier"
	labelClass    = "class"
	labelDecision = "decision"
	labelReason   = "reason"
	labelMode     = "mode"
	labelState    = "state"
	labelSLO      = "slo"
)

// OtherModel is the model label value of every request whose model is not one the
// engine serves (including a missing model when the engine serves several or none).
const OtherModel = "other"

// Metrics records the measurement of every request and every admission decision. It
// implements the proxy's Observer and admission's DecisionObserver. All its methods are
// safe for concurrent use.
type Metrics struct {
	requests  *prometheus.CounterVec   // model, route, code, outcome, tier
	ttft      *prometheus.HistogramVec // model, tier
	tpot      *prometheus.HistogramVec // model, tier
	gap       *prometheus.HistogramVec // model
	e2e       *prometheus.HistogramVec // model, tier
	queueWait *prometheus.HistogramVec // tier
	prompt    *prometheus.CounterVec   // model
	generated *prometheus.CounterVec   // model, source
	decisions *prometheus.CounterVec   // tier, class, decision, reason
	judged    *prometheus.CounterVec   // tier
	met       *prometheus.CounterVec   // tier

	tiers     tierIndex
	tenants   tenantIndex  // the slogate_tenant_* series (tenants.go)
	slos      tierSLOs     // what the tenants' requests are judged by
	precreate []*tierEntry // the tiers whose latency series every model gets up front
	models    modelIndex
	decided   decisionIndex
}

// New creates slogate's metrics and registers them on reg (never the global registry):
// the per-request and admission decision metrics (per tenant too, tenants.go),
// slogate_build_info, and the scrape-time collectors for opts.InFlight, opts.Engine,
// opts.Admission and opts.Reloads when they are set (see Options for what counts as
// set). Like promauto and the client_golang constructors, it panics on a wiring mistake:
// a nil reg, options that fail Validate (check them first where they come from user
// input), or a metric of the same name already registered on reg.
func New(reg prometheus.Registerer, opts Options) *Metrics {
	if reg == nil {
		panic("exporter: New with a nil registerer")
	}
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts.Clock = clock.Or(opts.Clock)
	f := promauto.With(reg)
	hist := func(name, help string, b []float64, labels ...string) *prometheus.HistogramVec {
		return f.NewHistogramVec(histogramOpts(opts.NativeHistograms, name, help, b), labels)
	}
	m := &Metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_requests_total",
			Help: "Inference requests finished, by served model, route, HTTP status the client got (499: the client went away), outcome and admission tier (none: not classified by admission).",
		}, []string{labelModel, labelRoute, labelCode, labelOutcome, labelTier}),
		ttft: hist("slogate_time_to_first_token_seconds",
			"Time to the first output chunk as the client felt it: the wait in slogate's admission queue plus the time from dispatch to the engine to the first output chunk, of streaming requests that ended ok (OTel gen_ai.server.time_to_first_token).",
			buckets(opts.TTFTBuckets, DefaultTTFTBuckets, opts.TTFT), labelModel, labelTier),
		tpot: hist("slogate_time_per_output_token_seconds",
			"Per-request (E2E - TTFT) / (output tokens - 1), measured from dispatch (no queue wait), of streaming requests that ended ok with at least two output tokens (OTel gen_ai.server.time_per_output_token).",
			buckets(opts.TPOTBuckets, DefaultTPOTBuckets, opts.TPOT), labelModel, labelTier),
		gap: hist("slogate_inter_token_gap_seconds",
			"Time between successive output chunks of a stream, every gap of every stream whatever its outcome.",
			buckets(opts.TPOTBuckets, DefaultTPOTBuckets, opts.TPOT), labelModel),
		e2e: hist("slogate_e2e_request_duration_seconds",
			"Request duration as the client felt it: the wait in slogate's admission queue plus the time from dispatch to the engine to the end of the response, of requests that ended ok, streaming or not (OTel gen_ai.server.request.duration).",
			buckets(opts.E2EBuckets, DefaultE2EBuckets), labelModel, labelTier),
		queueWait: hist("slogate_queue_wait_seconds",
			"Time requests waited in their tier's admission queue before dispatch (0 when admitted at once), of every request admission classified and dispatched, whatever its outcome.",
			slices.Clone(DefaultQueueWaitBuckets), labelTier),
		prompt: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_prompt_tokens_total",
			Help: "Prompt tokens of finished requests, as the engine's usage report counted them (OTel gen_ai.client.token.usage, type input).",
		}, []string{labelModel}),
		generated: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_generation_tokens_total",
			Help: "Output tokens of finished requests, by how they were counted: usage (the engine's report, exact) or chunks (output chunks of a stream without usage) (OTel gen_ai.client.token.usage, type output).",
		}, []string{labelModel, labelSource}),
		decisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_admission_decisions_total",
			Help: "Admission decisions, by tier, priority class, decision (admitted at once, queued then dispatched, rejected) and reason (none, or why the request waited or was rejected). Shadow-mode decisions count the same; slogate_admission_mode tells the mode.",
		}, []string{labelTier, labelClass, labelDecision, labelReason}),
		judged: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_slo_judged_requests_total",
			Help: "Requests an SLO judges, by tier: streams that ended ok with output (measure.ClientLatency), probes included as in slogate_requests_total. rate(slogate_slo_met_requests_total) / rate(this) is live SLO attainment.",
		}, []string{labelTier}),
		met: f.NewCounterVec(prometheus.CounterOpts{
			Name: "slogate_slo_met_requests_total",
			Help: "Judged requests whose TTFT (queue wait included) and TPOT both met their tier's SLO (measure.SLO.MetByClient), by tier: rate() of it is live goodput.",
		}, []string{labelTier}),
	}
	f.NewGauge(prometheus.GaugeOpts{
		Name: "slogate_build_info",
		Help: "Always 1; the labels say which slogate build is running.",
		ConstLabels: prometheus.Labels{
			"version": orUnknown(opts.Version), "revision": orUnknown(opts.Revision), "goversion": runtime.Version(),
		},
	}).Set(1)
	m.tenants.init(newTenantMetrics(f, hist))
	m.slos.init(measure.NewSLO(opts.TTFT, opts.TPOT))
	m.register(reg, opts)
	m.tiers.init(m.queueWait, m.judged, m.met)
	m.precreate = m.initialTiers(opts.Admission)
	m.models.init(m, opts.ServedModels, opts.UnknownModels)
	m.decided.init(m.decisions)
	m.initialTenants(opts.Admission)
	return m
}

// register registers the scrape-time collectors of the sources opts sets.
func (m *Metrics) register(reg prometheus.Registerer, opts Options) {
	if !absent(opts.InFlight) {
		reg.MustRegister(inFlightCollector{src: opts.InFlight})
	}
	if !absent(opts.Engine) {
		reg.MustRegister(engineCollector{src: opts.Engine, clock: opts.Clock})
	}
	if !absent(opts.Admission) {
		reg.MustRegister(tenantCollector{src: opts.Admission, slos: &m.slos, sustainable: opts.Sustainable, tiers: &m.tiers}) // and the admission gauges
	}
	if !absent(opts.Probe) {
		reg.MustRegister(probeCollector{src: opts.Probe})
	}
	if !absent(opts.Calibration) {
		reg.MustRegister(calibrationCollector{src: opts.Calibration})
	}
	if !absent(opts.Reloads) {
		reg.MustRegister(newReloadCollector(opts.Reloads))
	}
}

// initialTiers returns the tiers whose latency series every model gets at zero: the
// admission tiers when admission classifies requests, else NoTier.
func (m *Metrics) initialTiers(src AdmissionSource) []*tierEntry {
	if absent(src) {
		return []*tierEntry{m.tiers.lookup("")} // NoTier
	}
	st := src.Stats()
	if st.Mode == admission.Off {
		return []*tierEntry{m.tiers.lookup("")} // NoTier
	}
	out := make([]*tierEntry, 0, len(st.Tiers))
	for _, t := range st.Tiers {
		out = append(out, m.tiers.lookup(t.Name))
	}
	return out
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
		"Inference requests in flight through slogate: admitted and not yet finished (at the engine or streaming; not those waiting in admission's queue).", nil, nil)
	inFlightKVTokensDesc = prometheus.NewDesc("slogate_inflight_kv_tokens",
		"KV-cache tokens the requests in flight hold, estimated by slogate's admission: prompt (exact for token-id prompts, else text bytes at the bytes per token learned for the model, 4 until learned) plus output chunks so far.", nil, nil)
)

// The engine gauges, read from an EngineSource at scrape time (engine.go).
var (
	engineUpDesc = prometheus.NewDesc("slogate_engine_up",
		"1 if slogate's last scrape of the engine's /metrics succeeded and was recognised and its /health answered 2xx, else 0.", nil, nil)
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
		"Fraction of queried prompt tokens served from the engine's prefix cache, 0-1, over about the last minute.", nil, nil)
	enginePreemptionsDesc = prometheus.NewDesc("slogate_engine_preemptions_total",
		"Requests the engine preempted (vLLM) or retracted (SGLang) from its running batch since it started, to recompute later.", nil, nil)
	engineWaitingCapacityDesc = prometheus.NewDesc("slogate_engine_waiting_capacity_requests",
		"Requests waiting in the engine's queue for room in its KV cache or batch (vLLM reason=capacity; absent where the engine does not say why).", nil, nil)
	engineSleepingDesc = prometheus.NewDesc("slogate_engine_sleeping",
		"1 if the engine says it sleeps (vLLM sleep mode) and serves nothing, else 0.", nil, nil)
	engineKVUsedDesc = prometheus.NewDesc("slogate_engine_kv_cache_used_tokens",
		"KV-cache tokens held by the engine's running requests (SGLang).", nil, nil)
	engineKVAvailableDesc = prometheus.NewDesc("slogate_engine_kv_cache_available_tokens",
		"KV-cache tokens free for new requests (SGLang).", nil, nil)
	engineSpecLengthDesc = prometheus.NewDesc("slogate_engine_spec_decode_acceptance_length",
		"Mean tokens the engine emits per speculative verify step, the bonus token included (1 + accepted / drafts), over about the last minute (SGLang: its last log interval).", nil, nil)
	engineQueueTimeDesc = prometheus.NewDesc("slogate_engine_queue_time_mean_seconds",
		"Mean time requests waited in the engine's own queue, from its queue-time histogram over about the last minute (beside slogate's own queue wait).", nil, nil)
	engineLoRADesc = prometheus.NewDesc("slogate_engine_lora_adapters",
		"LoRA adapters with requests in the engine, by state: running or waiting (vLLM).", []string{"state"}, nil)
	engineLoRAMaxDesc = prometheus.NewDesc("slogate_engine_lora_max_adapters",
		"LoRA adapters that fit in one batch of the engine (vLLM max_lora).", nil, nil)
	engineSpecAcceptDesc = prometheus.NewDesc("slogate_engine_spec_decode_acceptance_ratio",
		"Accepted draft tokens / draft tokens of the engine's speculative decoding, the bonus token excluded, over about the last minute (SGLang: its last log interval); absent when the engine does not speculate.", nil, nil)
)

// The admission gauges, read from an AdmissionSource at scrape time (admission.go).
// Only the mode is exported while admission is off.
var (
	admissionModeDesc = prometheus.NewDesc("slogate_admission_mode",
		"1 for the admission mode in force (off, shadow: decide and record only, enforce: delay and reject), 0 for the others.", []string{labelMode}, nil)
	admissionEngineStateDesc = prometheus.NewDesc("slogate_admission_engine_state",
		"1 for the engine state a new request would meet, 0 for the others: ok, saturated (its queue or KV cache is past the saturation thresholds: new requests wait or are rejected) or engine-down (down, asleep (vLLM sleep mode), or stale with the closed policy: new requests get 503).", []string{labelState}, nil)
	admissionInFlightDesc = prometheus.NewDesc("slogate_admission_inflight_requests",
		"Requests of the tier admission has dispatched to the engine and that have not finished.", []string{labelTier}, nil)
	admissionLimitDesc = prometheus.NewDesc("slogate_admission_inflight_limit",
		"The tier's working cap on requests in flight, as the SLO feedback sets it between the min and max limits (lower classes get four fifths of it).", []string{labelTier}, nil)
	admissionLimitMinDesc = prometheus.NewDesc("slogate_admission_inflight_limit_min",
		"The lowest the tier's working in-flight cap may go (min_in_flight).", []string{labelTier}, nil)
	admissionLimitMaxDesc = prometheus.NewDesc("slogate_admission_inflight_limit_max",
		"The highest the tier's working in-flight cap may go (max_in_flight).", []string{labelTier}, nil)
	admissionQueueLengthDesc = prometheus.NewDesc("slogate_admission_queue_length",
		"Requests waiting in the tier's admission queue, by priority class.", []string{labelTier, labelClass}, nil)
	admissionQueueLimitDesc = prometheus.NewDesc("slogate_admission_queue_limit",
		"How many requests may wait in the tier's queue (max_queue; 0: none, requests beyond the cap are rejected).", []string{labelTier}, nil)
	admissionQueueWaitLimitDesc = prometheus.NewDesc("slogate_admission_queue_wait_limit_seconds",
		"The longest a request may wait in the tier's queue (max_queue_wait).", []string{labelTier}, nil)
	admissionRateLimitDesc = prometheus.NewDesc("slogate_admission_rate_limit",
		"The tier's token-bucket rate in requests per second; absent for tiers without a rate limit.", []string{labelTier}, nil)
	admissionSLODesc = prometheus.NewDesc("slogate_admission_slo_seconds",
		"The tier's SLO thresholds (ttft counts from dispatch to the engine, tpot per request) that its in-flight cap is steered by; absent when zero.", []string{labelTier, labelSLO}, nil)
	admissionObservedP95Desc = prometheus.NewDesc("slogate_admission_observed_p95_seconds",
		"The tier's 95th percentile TTFT (from dispatch) and TPOT over the feedback window, as of the last feedback round; absent until known.", []string{labelTier, labelSLO}, nil)
	admissionServiceRateDesc = prometheus.NewDesc("slogate_admission_service_rate",
		"The tier's completions per second over the last 30 s, from which admission predicts queue waits; absent until known.", []string{labelTier}, nil)
	admissionPrefillDesc = prometheus.NewDesc("slogate_admission_prefill_tokens",
		"Estimated prompt tokens of the tier's requests in flight that have had no output token yet (one that does not stream counts, where the tier has a max_prefill_tokens, until an estimate of its prefill's end): the prefill work the tier has queued in the engine.", []string{labelTier}, nil)
	admissionPrefillLimitDesc = prometheus.NewDesc("slogate_admission_prefill_limit_tokens",
		"The tier's bound on slogate_admission_prefill_tokens (max_prefill_tokens): a request that would take them past it is rejected with reason prefill-backlog; absent for tiers without one.", []string{labelTier}, nil)
	admissionOfferedDesc = prometheus.NewDesc("slogate_admission_offered_rate",
		"Requests per second offered to the tier over the last minute: every request admission classified into it, admitted, queued or rejected (shadow mode the same), slogate's probes excluded.", []string{labelTier}, nil)
	admissionSustainableDesc = prometheus.NewDesc("slogate_admission_sustainable_rate",
		"The tier's calibrated sustainable rate λ* in requests per second (the knee slogate calibrate measured, from the latest calibration or the tiers file's); absent for tiers without one.", []string{labelTier}, nil)
	admissionDemandDesc = prometheus.NewDesc("slogate_admission_demand_ratio",
		"Offered load relative to the calibrated sustainable rate: slogate_admission_offered_rate / slogate_admission_sustainable_rate. Above 1 the tier is offered more than the engine serves inside its SLOs, rejected requests included: the signal to scale replicas on. Absent for tiers without λ*.", []string{labelTier}, nil)
	admissionMaxInputDesc = prometheus.NewDesc("slogate_admission_tier_max_input_tokens",
		"The largest estimated input, in tokens, the tier takes; absent for the last tier, which has no upper bound.", []string{labelTier}, nil)
)

// The tiers file reload gauges, read from a ReloadSource at scrape time (admission.go).
var (
	reloadSuccessfulDesc = prometheus.NewDesc("slogate_admission_config_last_reload_successful",
		"1 if the last reload of the admission tiers file succeeded (or none was tried since start), 0 if it failed and the previous tiers are still in force.", nil, nil)
	reloadSuccessTimeDesc = prometheus.NewDesc("slogate_admission_config_last_reload_success_timestamp_seconds",
		"Unix time of the last successful load of the admission tiers file (at start, or by a reload).", nil, nil)
)

// The prober's gauges, read from a ProbeSource at scrape time (probe.go). Cells are
// labelled by workload, row (a context such as "8K" or a shape such as "API-S") and load
// (a concurrency such as "4", or a multiple of a scan's reference rate such as "1.1x").
var (
	probeCellLabels = []string{"workload", "row", "load"}

	probeThroughputDesc = prometheus.NewDesc("slogate_probe_output_tokens_per_second",
		"Output tokens per second of a valid cell of the latest probe (median over its valid rounds).", probeCellLabels, nil)
	probeTTFT50Desc = prometheus.NewDesc("slogate_probe_ttft_p50_seconds",
		"Median time to first token of a valid cell of the latest probe.", probeCellLabels, nil)
	probeTTFT95Desc = prometheus.NewDesc("slogate_probe_ttft_p95_seconds",
		"95th percentile of time to first token of a valid cell of the latest probe.", probeCellLabels, nil)
	probeTPOTDesc = prometheus.NewDesc("slogate_probe_tpot_p95_seconds",
		"95th percentile of per-request time per output token of a valid cell of the latest probe.", probeCellLabels, nil)
	probeSuccessDesc = prometheus.NewDesc("slogate_probe_success_ratio",
		"Share of a cell's judged requests that met every success rule, in the latest probe.", probeCellLabels, nil)
	probeStateDesc = prometheus.NewDesc("slogate_probe_cell_state",
		"1 for the state of each cell of the latest probe (valid, looped, over_capacity, rej, n/c, failed, skipped), 0 for the others.", append(probeCellLabels, "state"), nil)
	probeGateDesc = prometheus.NewDesc("slogate_probe_gate_check",
		"1 for the verdict (pass, fail, skipped) of each functional-gate check of the latest probe.", []string{"workload", "check", "verdict"}, nil)
	probeRunningDesc = prometheus.NewDesc("slogate_probe_running",
		"1 while a scheduled probe runs.", []string{"workload"}, nil)
	probeRunsDesc = prometheus.NewDesc("slogate_probe_runs_total",
		"Scheduled or triggered probes that ran to the end.", []string{"workload"}, nil)
	probeHeldDesc = prometheus.NewDesc("slogate_probe_held_total",
		"Probes not started, or stopped, because live traffic needed the engine.", []string{"workload"}, nil)
	probeLastStartDesc = prometheus.NewDesc("slogate_probe_last_start_timestamp_seconds",
		"When the last probe started (Unix time); absent before the first.", []string{"workload"}, nil)
	probeLastSuccessDesc = prometheus.NewDesc("slogate_probe_last_success",
		"1 if the last probe completed, 0 if it failed or was stopped.", []string{"workload"}, nil)
	probeRegressionDesc = prometheus.NewDesc("slogate_probe_regression",
		"1 if a headline figure (output_tok_per_s, ttft_p95_s, tpot_p95_s) of a cell of the latest probe is worse than in the run before beyond the noise band, or the cell is no longer valid; 0 if not.", append(probeCellLabels, "figure"), nil)
)

// The calibration's gauges, read from a CalibrationSource at scrape time
// (calibration.go): the schedule, and per tier of the latest complete calibration its
// knee, the knee's change from the calibration before, and the limits derived from it.
var (
	calibrationRunningDesc = prometheus.NewDesc("slogate_calibration_running",
		"1 while a calibration runs.", nil, nil)
	calibrationRunsDesc = prometheus.NewDesc("slogate_calibration_runs_total",
		"Scheduled or triggered calibrations that ran to the end.", nil, nil)
	calibrationHeldDesc = prometheus.NewDesc("slogate_calibration_held_total",
		"Calibrations not started, or stopped, because live traffic needed the engine.", nil, nil)
	calibrationLastStartDesc = prometheus.NewDesc("slogate_calibration_last_start_timestamp_seconds",
		"When the last calibration started (Unix time); absent before the first.", nil, nil)
	calibrationLastSuccessDesc = prometheus.NewDesc("slogate_calibration_last_success",
		"1 if the last calibration completed, 0 if it failed or was stopped.", nil, nil)
	calibrationTimestampDesc = prometheus.NewDesc("slogate_calibration_timestamp_seconds",
		"When the latest complete calibration finished (Unix time), including one recorded in the tiers file; absent when there is none.", nil, nil)
	calibrationAppliedDesc = prometheus.NewDesc("slogate_calibration_applied",
		"1 if the latest calibration's limits are in force, 0 if they are only reported.", nil, nil)
	calibrationKneeDesc = prometheus.NewDesc("slogate_calibration_knee_requests_per_second",
		"The tier's knee in the latest calibration: the highest arrival rate the engine sustained inside the tier's SLO.", []string{"tier"}, nil)
	calibrationKneeChangeDesc = prometheus.NewDesc("slogate_calibration_knee_change_ratio",
		"The tier's knee over its knee in the calibration before (1: unchanged); absent when there was none.", []string{"tier"}, nil)
	calibrationLimitDesc = prometheus.NewDesc("slogate_calibration_limit",
		"A limit the latest calibration derived for the tier: rate (requests/s), burst, max_in_flight, max_queue or max_queue_wait_seconds.", []string{"tier", "limit"}, nil)
)
