package dashboards

import (
	"fmt"
	"strings"
)

// This file builds the PromQL the panels run. Every selector filters by the namespace
// and pod variables; those of metrics with a model label filter by the model variable
// too; every rate and increase takes $__rate_interval, so a panel stays correct
// whatever the scrape interval and the time range.

// rateInterval is the range of every rate() and increase().
const rateInterval = "[$__rate_interval]"

// sel returns a selector of metric filtered by namespace and pod, plus matchers
// (such as `outcome!="ok"`).
func sel(metric string, matchers ...string) string {
	m := append([]string{`namespace=~"$namespace"`, `pod=~"$pod"`}, matchers...)
	return metric + "{" + strings.Join(m, ", ") + "}"
}

// selModel is sel for a metric with a model label: it also filters by model.
func selModel(metric string, matchers ...string) string {
	return sel(metric, append([]string{`model=~"$model"`}, matchers...)...)
}

// selTenant is sel for a metric with a tenant label: it also filters by tenant (one
// tenant in a repeated tenant row).
func selTenant(metric string, matchers ...string) string {
	return sel(metric, append([]string{`tenant=~"$tenant"`}, matchers...)...)
}

// rate returns rate(selector[$__rate_interval]).
func rate(selector string) string {
	return "rate(" + selector + rateInterval + ")"
}

// increase returns increase(selector[$__rate_interval]).
func increase(selector string) string {
	return "increase(" + selector + rateInterval + ")"
}

// sumBy returns sum by (labels) (expr), or sum (expr) without labels.
func sumBy(labels, expr string) string {
	if labels == "" {
		return "sum (" + expr + ")"
	}
	return "sum by (" + labels + ") (" + expr + ")"
}

// quantile returns the q-quantile of histogram, per the by labels, from the rate of its
// classic buckets. bucketSel builds the bucket selector (sel or selModel).
func quantile(q float64, histogram, by string, bucketSel func(string, ...string) string) string {
	return fmt.Sprintf("histogram_quantile(%g, %s)", q, sumBy("le, "+by, rate(bucketSel(histogram+"_bucket"))))
}

// sloBuckets returns, per namespace, pod and tier, one series for each text form of
// the le label that equals the tier's SLO threshold of kind slo (ttft or tpot), from
// slogate_admission_slo_seconds: count_values turns the threshold into an le label
// (`2`, `0.5`), and label_replace adds the form with `.0` that Prometheus 3 and the
// OpenMetrics format give whole numbers (`2.0`). Matched with `and on (namespace, pod,
// tier, le)`, it keeps the bucket that counts the requests inside the SLO; slogate
// guarantees the sidecar's SLO thresholds are bucket boundaries.
func sloBuckets(slo string) string {
	cv := `count_values by (namespace, pod, tier) ("le", ` + sel("slogate_admission_slo_seconds", `slo="`+slo+`"`) + `)`
	return "(" + cv + ` or label_replace(` + cv + `, "le", "$1.0", "le", "([0-9]+)"))`
}

// goodRate returns, per tier, the rate of requests of histogram (TTFT or TPOT) that met
// their tier's SLO of kind slo.
func goodRate(histogram, slo string) string {
	good := rate(selModel(histogram+"_bucket")) + " and on (namespace, pod, tier, le) " + sloBuckets(slo)
	return sumBy("tier", good)
}

// observedRate returns, per tier, the rate of all requests of histogram, of the tiers
// that have an SLO of kind slo.
func observedRate(histogram, slo string) string {
	all := rate(selModel(histogram+"_count")) + " and on (namespace, pod, tier) " +
		sel("slogate_admission_slo_seconds", `slo="`+slo+`"`)
	return sumBy("tier", all)
}

// attainment returns, per tier, the share of the requests of histogram that met their
// tier's SLO of kind slo.
func attainment(histogram, slo string) string {
	return goodRate(histogram, slo) + "\n/\n" + observedRate(histogram, slo)
}
