package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Capacity is the capacity dashboard (uid slogate-capacity): the engine's queue, batch
// and KV cache as slogate reads them, each admission tier's limits against what it
// actually admits, and the GPUs.
func Capacity() (dashboard.Dashboard, error) {
	b := newDashboard("slogate-capacity", "slogate / Capacity",
		"How full the engine, its KV cache, the admission tiers and the GPUs are, and how close each tier runs to its limits.")
	withRow(b, "Engine", enginePanels()...)
	withRow(b, "Admission tiers", tierPanels()...)
	withRow(b, "GPUs", gpuPanels()...)
	return build(b)
}

// enginePanels are the engine gauges slogate normalises across vLLM and SGLang.
func enginePanels() []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		singleStat("Engine up", "Whether slogate's last scrape of every selected engine succeeded (the lowest of slogate_engine_up). While an engine is down its other gauges are left out.", unitBool,
			query("min ("+sel("slogate_engine_up")+")", "up")).
			Thresholds(thresholds("red", step(1, "green"))),
		singleStat("Engine scrape age", "Time since slogate last scraped an engine successfully, the oldest of the selected pods. Admission treats data older than its staleness limit as unknown.", unitSeconds,
			query("max ("+sel("slogate_engine_scrape_age_seconds")+")", "age")).
			Thresholds(thresholds("green", step(10, "orange"), step(30, "red"))),
		singleStat("Requests in flight", "Inference requests inside slogate right now (waiting for the engine or streaming), all selected pods together.", unitCount,
			query(sumBy("", sel("slogate_inflight_requests")), "in flight")).
			ColorMode(common.BigValueColorModeNone),
		singleStat("Served models", "Models the engines list on /v1/models (the values of the model label), the most of any selected pod.", unitCount,
			query("max ("+sel("slogate_engine_served_models")+")", "models")).
			ColorMode(common.BigValueColorModeNone),
		singleStat("Engine sleeping", "Whether any selected engine says it sleeps (vLLM sleep mode, the highest of slogate_engine_sleeping): it answers /metrics but serves nothing, /readyz is false and admission answers 503.", unitBool,
			query("max ("+sel("slogate_engine_sleeping")+")", "sleeping")).
			Thresholds(thresholds("green", step(1, "red"))),
		graph("Engine queue and running batch", "Requests waiting in the engine's queue and in its running batch, per pod; of the waiting, those that wait for room in the KV cache or batch (vLLM reason=capacity, the ones admission's saturation counts; the rest are deferred, e.g. by LoRA or KV-transfer limits).", unitCount,
			query(sel("slogate_engine_waiting_requests"), "waiting {{pod}}"),
			query(sel("slogate_engine_waiting_capacity_requests"), "waiting for capacity {{pod}}"),
			query(sel("slogate_engine_running_requests"), "running {{pod}}")).
			Min(0),
		graph("Queue time: slogate and the engine", "Mean time requests waited in slogate's admission queue before dispatch, next to the mean time they then waited in the engine's own queue (from its queue-time histogram, over about the last minute), per pod: together the part of TTFT spent waiting rather than computing.", unitSeconds,
			query(sumBy("pod", rate(sel("slogate_queue_wait_seconds_sum")))+" / "+sumBy("pod", rate(sel("slogate_queue_wait_seconds_count"))), "slogate {{pod}}"),
			query(sel("slogate_engine_queue_time_mean_seconds"), "engine {{pod}}")).
			Min(0),
		ratioGraph("KV-cache usage", "Fraction of the engine's KV cache in use, per pod (the fullest instance if the engine reports several).",
			query(sel("slogate_engine_kv_cache_usage_ratio"), "{{pod}}")),
		graph("In-flight KV tokens against capacity", "slogate's estimate of the KV-cache tokens its requests in flight hold (prompts plus output so far) next to the engine's KV-cache size, per pod.", unitTokens,
			query(sel("slogate_inflight_kv_tokens"), "in flight {{pod}}"),
			query(sel("slogate_engine_kv_cache_capacity_tokens"), "capacity {{pod}}")).
			Min(0),
		graph("Preemptions", "Requests the engine preempted (vLLM) or retracted (SGLang) per second, per pod.", unitReqPerSec,
			query(rate(sel("slogate_engine_preemptions_total")), "{{pod}}")).
			Min(0),
		ratioGraph("Prefix-cache hit ratio", "Fraction of prompt tokens served from the engine's prefix cache over about the last minute, per pod (from the engine's counters). No series before slogate has two readings of the counters, or when no prompt was processed in the window.",
			query(sel("slogate_engine_prefix_cache_hit_ratio"), "{{pod}}")),
		graph("Speculative-decoding acceptance length", "Mean tokens the engine emits per speculative verify step, the bonus token included (1 + accepted / drafts), per pod (vLLM: over about the last minute; SGLang: its last decode log). No series without speculative decoding.", unitCount,
			query(sel("slogate_engine_spec_decode_acceptance_length"), "{{pod}}")).
			Min(1),
		ratioGraph("Speculative-decoding acceptance", "Fraction of drafted speculative tokens the engine accepted, the bonus token excluded, per pod (vLLM: over about the last minute, from its counters; SGLang: its gauges over its last decode log, converted). No series without speculative decoding.",
			query(sel("slogate_engine_spec_decode_acceptance_ratio"), "{{pod}}")),
	}
}

// tierPanels are admission's per-tier limits against what the tiers actually do. The
// selected pods' values are summed per tier: each pod admits against its own limits.
func tierPanels() []cog.Builder[dashboard.Panel] {
	admitted := sel("slogate_admission_decisions_total", `decision=~"admitted|queued"`)
	return []cog.Builder[dashboard.Panel]{
		graph("Admitted rate against tier limits", "Requests per second admission dispatched per tier (at once or after queueing), against the tier's token-bucket rate, the completions per second admission measures, and the knee of the latest calibration (the highest arrival rate the engine sustained inside the tier's SLO).", unitReqPerSec,
			query(sumBy("tier", rate(admitted)), "admitted {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_rate_limit")), "rate limit {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_service_rate")), "service rate {{tier}}"),
			query(sumBy("tier", sel("slogate_calibration_knee_requests_per_second")), "knee {{tier}}")).
			Min(0),
		graph("In flight against tier caps", "Requests each tier has in flight to the engine, against the working cap SLO feedback sets and the bounds it moves between (min_in_flight, max_in_flight).", unitCount,
			query(sumBy("tier", sel("slogate_admission_inflight_requests")), "in flight {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_inflight_limit")), "cap {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_inflight_limit_min")), "min {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_inflight_limit_max")), "max {{tier}}")).
			Min(0),
		graph("Queue length against tier limits", "Requests waiting in each tier's admission queue (all priority classes), against how many may wait (max_queue).", unitCount,
			query(sumBy("tier", sel("slogate_admission_queue_length")), "queued {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_queue_limit")), "limit {{tier}}")).
			Min(0),
		graph("Observed p95 against SLO", "The p95 TTFT (from dispatch) and TPOT that admission's SLO feedback last observed per tier, against the tier's thresholds; the worst of the selected pods.", unitSeconds,
			query("max by (tier, slo) ("+sel("slogate_admission_observed_p95_seconds")+")", "p95 {{slo}} {{tier}}"),
			query("max by (tier, slo) ("+sel("slogate_admission_slo_seconds")+")", "SLO {{slo}} {{tier}}")).
			Min(0),
		graph("Engine state as admission sees it", "Selected pods whose admission meets the engine ok, saturated (queue or KV cache past the thresholds: new requests wait or are rejected) or engine-down (new requests get 503).", unitCount,
			query(sumBy("state", sel("slogate_admission_engine_state")), "{{state}}")).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(40).Min(0),
		graph("Queue wait share", "Share of dispatched requests per tier that waited in the queue at all (1 ms or more).", unitRatio,
			query("1 - "+sumBy("tier", rate(sel(waitHistogram+"_bucket", `le="0.001"`)))+
				"\n/\n"+sumBy("tier", rate(sel(waitHistogram+"_count"))), "{{tier}}")).
			Min(0).Max(1),
	}
}

// gpuPanels are the GPU gauges (DCGM), per pod and GPU.
func gpuPanels() []cog.Builder[dashboard.Panel] {
	const legend = "{{pod}} GPU {{gpu}}"
	return []cog.Builder[dashboard.Panel]{
		singleStat("GPU collector up", "Whether slogate's GPU collector read every selected pod's GPUs at its last scrape (the lowest of slogate_gpu_collector_up).", unitBool,
			query("min ("+sel("slogate_gpu_collector_up")+")", "up")).
			Thresholds(thresholds("red", step(1, "green"))),
		ratioGraph("GPU utilisation", "Fraction of time each GPU was busy running kernels.",
			query(sel("slogate_gpu_utilization_ratio"), legend)).Span(18),
		graph("GPU memory", "Memory used on each GPU against its total.", unitBytes,
			query(sel("slogate_gpu_memory_used_bytes"), "used "+legend),
			query(sel("slogate_gpu_memory_total_bytes"), "total "+legend)).
			Min(0),
		graph("GPU power", "Power each GPU draws.", unitWatts,
			query(sel("slogate_gpu_power_watts"), legend)).
			Min(0),
		graph("GPU temperature", "Temperature of each GPU.", unitCelsius,
			query(sel("slogate_gpu_temperature_celsius"), legend)),
		graph("GPU SM clock", "Streaming-multiprocessor clock of each GPU; a drop under load means throttling (power or heat).", unitHertz,
			query(sel("slogate_gpu_sm_clock_hertz"), legend)).
			Min(0),
	}
}
