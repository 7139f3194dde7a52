package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Histograms of the request metrics (docs/metrics.md, "Request metrics").
const (
	ttftHistogram = "slogate_time_to_first_token_seconds"
	tpotHistogram = "slogate_time_per_output_token_seconds"
	e2eHistogram  = "slogate_e2e_request_duration_seconds"
	gapHistogram  = "slogate_inter_token_gap_seconds"
	waitHistogram = "slogate_queue_wait_seconds"

	tenantWaitHistogram = "slogate_tenant_queue_wait_seconds"

	sloJudgedCounter = "slogate_slo_judged_requests_total"
	sloMetCounter    = "slogate_slo_met_requests_total"
)

// Overview is the SLO overview (uid slogate-overview): SLO attainment and error-budget
// burn per tier, latency percentiles per tier and model, goodput, rejections by reason
// and requests by outcome; and, with tenants, a collapsed row per tenant.
func Overview() (dashboard.Dashboard, error) {
	b := newDashboard("slogate-overview", "slogate / SLO overview",
		"Whether requests through slogate meet their tier's TTFT and TPOT SLOs, how fast the error budget burns, and where the latency goes.").
		WithVariable(modelVariable()).
		WithVariable(objectiveVariable()).
		WithVariable(tenantVariable())
	withRow(b, "SLO attainment", sloPanels()...)
	withRow(b, "Latency", latencyPanels()...)
	withRow(b, "Traffic and rejections", trafficPanels()...)
	withRepeatedRow(b, "Tenant $"+varTenant, varTenant, tenantPanels()...)
	return build(b)
}

// errorRatio returns, per tier, the share of finished requests that did not end ok.
func errorRatio() string {
	return sumBy("tier", rate(selModel("slogate_requests_total", `outcome!="ok"`))) +
		"\n/\n" + sumBy("tier", rate(selModel("slogate_requests_total")))
}

// burnRate returns the error-budget burn rate of a per-tier good share: its bad share
// over the budget (1 - objective). 1 spends the budget exactly over the SLO window.
func burnRate(goodShare string) string {
	return "(1 - (" + goodShare + "))\n/ (1 - $objective)"
}

// sloPanels are the attainment and error-budget panels.
func sloPanels() []cog.Builder[dashboard.Panel] {
	const sloNote = " Thresholds are the tiers' own (slogate_admission_slo_seconds); a tier whose threshold is not a bucket boundary of the histogram (a tiers-file SLO other than the sidecar's), and tier none (admission off), have no series."
	return []cog.Builder[dashboard.Panel]{
		singleStat("TTFT SLO attainment", "Share of streamed requests that ended ok whose TTFT, queue wait included, was within their tier's TTFT SLO, per tier, over the last rate interval."+sloNote, unitRatio,
			query(attainment(ttftHistogram, "ttft"), "{{tier}}")).Decimals(2).Min(0).Max(1).
			Thresholds(thresholds("red", step(0.95, "orange"), step(0.99, "green"))),
		singleStat("TPOT SLO attainment", "Share of streamed requests that ended ok with two or more output tokens whose TPOT was within their tier's TPOT SLO, per tier."+sloNote, unitRatio,
			query(attainment(tpotHistogram, "tpot"), "{{tier}}")).Decimals(2).Min(0).Max(1).
			Thresholds(thresholds("red", step(0.95, "orange"), step(0.99, "green"))),
		singleStat("Error ratio", "Share of finished requests that did not end ok (outcome != ok: rejected, upstream errors and timeouts, aborted streams, bad requests, client cancels), per tier.", unitRatio,
			query(errorRatio(), "{{tier}}")).Decimals(2).
			Thresholds(thresholds("green", step(0.01, "orange"), step(0.05, "red"))),
		singleStat("Request rate", "Inference requests finished per second, whatever their outcome.", unitReqPerSec,
			query(sumBy("", rate(selModel("slogate_requests_total"))), "all")).
			ColorMode(common.BigValueColorModeNone),
		ratioGraph("TTFT SLO attainment by tier", "Share of streamed requests that ended ok whose TTFT (queue wait included) was within their tier's TTFT SLO: the rate of the bucket whose le is the tier's threshold over the rate of all."+sloNote,
			query(attainment(ttftHistogram, "ttft"), "{{tier}}")),
		ratioGraph("TPOT SLO attainment by tier", "Share of streamed requests that ended ok with two or more output tokens whose TPOT was within their tier's TPOT SLO."+sloNote,
			query(attainment(tpotHistogram, "tpot"), "{{tier}}")),
		graph("Error-budget burn rate by tier", "How fast each tier spends its error budget (1 - $objective): the share of bad requests over the budget. 1 spends it exactly over the SLO window; 14.4 spends a 30-day budget in two days. TTFT and TPOT count slow successful requests, errors count requests that did not end ok.", unitMultiple,
			query(burnRate(attainment(ttftHistogram, "ttft")), "TTFT {{tier}}"),
			query(burnRate(attainment(tpotHistogram, "tpot")), "TPOT {{tier}}"),
			query("("+errorRatio()+")\n/ (1 - $objective)", "errors {{tier}}")).
			Min(0).
			Thresholds(thresholds("green", step(1, "orange"), step(14.4, "red"))).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
		graph("Goodput by tier", "Live goodput: requests per second that met both SLOs, TTFT with the queue wait and TPOT (slogate_slo_met_requests_total), next to the load offered to the tier over the last minute, rejected requests included (slogate_admission_offered_rate), and its calibrated sustainable rate λ* (slogate_admission_sustainable_rate, where a calibration measured one). Goodput near λ* while the offer exceeds it: the engine is full and admission sheds the rest; goodput far under λ* with the offer above it: capacity is being lost.", unitReqPerSec,
			query(sumBy("tier", rate(sel(sloMetCounter))), "good {{tier}}"),
			query(sumBy("tier", sel("slogate_admission_offered_rate")), "offered {{tier}}"),
			query("max by (tier) ("+sel("slogate_admission_sustainable_rate")+")", "λ* {{tier}}")).
			Min(0),
		ratioGraph("SLO attainment, both SLOs, by tier", "Share of the judged requests (streams that ended ok with output) that met both their tier's TTFT SLO, queue wait included, and its TPOT SLO: slogate_slo_met_requests_total over slogate_slo_judged_requests_total. Rejected and failed requests are not judged: they show in the error ratio.",
			query(sumBy("tier", rate(sel(sloMetCounter)))+"\n/\n"+sumBy("tier", rate(sel(sloJudgedCounter))), "{{tier}}")),
		graph("Demand ÷ λ* by tier", "Load offered to each tier over the last minute, rejected requests included, over its calibrated sustainable rate (slogate_admission_demand_ratio), the highest pod's. Above 1 the pod is asked for more than it serves inside the SLOs: the signal the autoscaling examples in deploy/ scale replicas on. No series for a tier without a calibration.", unitMultiple,
			query("max by (tier) ("+sel("slogate_admission_demand_ratio")+")", "{{tier}}")).
			Min(0).
			Thresholds(thresholds("green", step(0.8, "orange"), step(1, "red"))).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
	}
}

// percentiles returns the p50, p95 and p99 queries of histogram, per the by labels.
func percentiles(histogram, by, legend string, bucketSel func(string, ...string) string) []*prometheus.DataqueryBuilder {
	var out []*prometheus.DataqueryBuilder
	for _, q := range []struct {
		q    float64
		name string
	}{{0.5, "p50"}, {0.95, "p95"}, {0.99, "p99"}} {
		out = append(out, query(quantile(q.q, histogram, by, bucketSel), q.name+" "+legend))
	}
	return out
}

// withExemplars asks Grafana for the exemplars of the p99 query's buckets: the trace ids
// slogate puts on its latency histograms for requests whose traces it exports, drawn as
// points that link to the trace (docs/operations.md, Tracing). One query per panel
// asks, or every point would show three times.
func withExemplars(qs []*prometheus.DataqueryBuilder) []*prometheus.DataqueryBuilder {
	qs[len(qs)-1].Exemplar(true)
	return qs
}

// exemplarNote ends the description of a panel that shows exemplars.
const exemplarNote = " Points are exemplars: requests whose traces slogate exported (sampled, failed or over their SLO); each links to its trace."

// latencyPanels are the latency percentiles.
func latencyPanels() []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		graph("TTFT p50 / p95 / p99 by tier and model", "Time to first token as the client felt it at slogate (admission queue wait included), of streamed requests that ended ok, from the histogram's classic buckets."+exemplarNote, unitSeconds,
			withExemplars(percentiles(ttftHistogram, "tier, model", "{{tier}} {{model}}", selModel))...).Min(0),
		graph("TPOT p50 / p95 / p99 by tier and model", "Per-request time per output token, (E2E - TTFT) / (output tokens - 1) from dispatch, of streamed requests that ended ok with two or more output tokens."+exemplarNote, unitSeconds,
			withExemplars(percentiles(tpotHistogram, "tier, model", "{{tier}} {{model}}", selModel))...).Min(0),
		graph("E2E p50 / p95 / p99 by tier and model", "Request duration as the client felt it at slogate (admission queue wait included), of requests that ended ok, streamed or not."+exemplarNote, unitSeconds,
			withExemplars(percentiles(e2eHistogram, "tier, model", "{{tier}} {{model}}", selModel))...).Min(0),
		graph("Queue wait p50 / p95 / p99 by tier", "Time requests waited in their tier's admission queue before dispatch (0 when admitted at once), of every request admission dispatched.", unitSeconds,
			percentiles(waitHistogram, "tier", "{{tier}}", sel)...).Min(0),
		heatmapPanel("TTFT distribution", "Streamed requests that ended ok per second, by TTFT bucket (queue wait included), all tiers and models together.", unitSeconds,
			sumBy("le", rate(selModel(ttftHistogram+"_bucket")))),
		graph("Inter-token gap p50 / p95 / p99 by model", "Time between successive output chunks of every stream, whatever its outcome: stalls before an abort show here. No tier label.", unitSeconds,
			percentiles(gapHistogram, "model", "{{model}}", selModel)...).Min(0),
	}
}

// trafficPanels are request rates by outcome, rejections and tokens.
func trafficPanels() []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		stackedGraph("Requests by outcome", "Inference requests finished per second, stacked by how they ended: ok, client_cancelled, upstream_error, upstream_timeout, aborted_midstream, engine_error (an error event inside an answered stream), bad_request, rejected, shutdown (cut short at the end of a drain).", unitReqPerSec,
			query(sumBy("outcome", rate(selModel("slogate_requests_total"))), "{{outcome}}")),
		stackedGraph("Rejections and sheds by reason", "Requests admission turned away per second, by reason: tier-rate, engine-budget, prefill-backlog, queue-full, queue-timeout, predicted-late, saturated, engine-down, in-flight-cap, client-gone, shed. Shadow mode counts what enforce would have rejected.", unitReqPerSec,
			query(sumBy("reason", rate(sel("slogate_admission_decisions_total", `decision="rejected"`))), "{{reason}}")),
		ratioGraph("Rejected share by tier", "Share of each tier's admission decisions that rejected the request.",
			query(sumBy("tier", rate(sel("slogate_admission_decisions_total", `decision="rejected"`)))+
				"\n/\n"+sumBy("tier", rate(sel("slogate_admission_decisions_total"))), "{{tier}}")),
		graph("Tokens by model", "Prompt and output tokens per second of finished requests, as the engine's usage reports (or, for output without one, the stream's chunks) counted them.", unitTokensRate,
			query(sumBy("model", rate(selModel("slogate_prompt_tokens_total"))), "prompt {{model}}"),
			query(sumBy("model", rate(selModel("slogate_generation_tokens_total"))), "output {{model}}")).
			Min(0),
	}
}

// tenantTokens returns the rate of the tenant's input and output tokens together, or of
// every tenant's with sel.
func tenantTokens(sel func(string, ...string) string) string {
	return sumBy("", rate(sel("slogate_tenant_input_tokens_total"))) + " + " +
		sumBy("", rate(sel("slogate_tenant_output_tokens_total")))
}

// tenantPanels are the panels of one tenant's row: its traffic, its budgets, its wait and
// its SLO attainment, and why it is turned away.
func tenantPanels() []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		stackedGraph("Requests by outcome", "The tenant's inference requests finished per second, stacked by how they ended (rejected: turned away by admission, its budgets included).", unitReqPerSec,
			query(sumBy("outcome", rate(selTenant("slogate_tenant_requests_total"))), "{{outcome}}")),
		graph("Tokens in and out", "The tenant's prompt (in) and output (out) tokens per second, from the engine's usage reports (or the stream's chunks): what its input_tokens and output_tokens budgets are settled against.", unitTokensRate,
			query(sumBy("", rate(selTenant("slogate_tenant_input_tokens_total"))), "in"),
			query(sumBy("", rate(selTenant("slogate_tenant_output_tokens_total"))), "out")).
			Min(0),
		ratioGraph("Share of served tokens", "The tenant's prompt and output tokens over those of every tenant: the share of the engine's work it got. Fair share weighs tenants by their weight (slogate_tenant_weight) when they compete.",
			query("("+tenantTokens(selTenant)+")\n/\n("+tenantTokens(sel)+")", "share")).
			Span(thirdWidth),
		ratioGraph("Budget remaining", "The share of each of the tenant's budgets left, per budget (requests, input_tokens, output_tokens per minute; concurrency), on the pod with the least left: each slogate instance holds the tenant to its budgets alone. At 0, its requests are turned away. No series: the tenant has no budget.",
			query(`min by (budget) (`+selTenant("slogate_tenant_budget_remaining")+" / "+selTenant("slogate_tenant_budget_limit")+")", "{{budget}}")).
			Span(thirdWidth),
		graph("Queue wait p95", "95th percentile of the time the tenant's requests waited in their tier's admission queue before dispatch, of every request admission dispatched. A tenant over its fair share waits behind the others.", unitSeconds,
			query(quantile(0.95, tenantWaitHistogram, varTenant, selTenant), "p95")).
			Min(0).Span(thirdWidth),
		ratioGraph("SLO attainment", "Share of the tenant's streamed requests that ended ok whose TTFT (queue wait included) and TPOT both met their tier's SLO.",
			query(sumBy("", rate(selTenant("slogate_tenant_slo_met_requests_total")))+"\n/\n"+
				sumBy("", rate(selTenant("slogate_tenant_slo_judged_requests_total"))), "attainment")),
		stackedGraph("Rejections by reason", "The tenant's requests admission turned away per second, by reason: its budgets (tenant-requests, tenant-input-tokens, tenant-output-tokens, tenant-concurrency), shed (for a tenant below its share, or a higher class), and the tier's reasons. Shadow mode counts what enforce would have rejected.", unitReqPerSec,
			query(sumBy("reason", rate(selTenant("slogate_tenant_admission_decisions_total", `decision="rejected"`))), "{{reason}}")),
	}
}
