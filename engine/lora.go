package engine

import (
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// loraState is what vLLM's vllm:lora_requests_info says of the LoRA adapters in use:
// how many adapters have running requests, how many have waiting ones, and how many
// adapters fit in a batch (max_lora). NaN when unknown.
type loraState struct{ running, waiting, max float64 }

func noLoRA() loraState { nan := math.NaN(); return loraState{nan, nan, nan} }

// readLoRA reads vllm:lora_requests_info (vllm/v1/metrics/loggers.py,
// PrometheusStatLogger.record: one series per distinct label set, the adapter names
// comma-separated in running_lora_adapters and waiting_lora_adapters, the value the
// time it was last set). prometheus_client keeps every label set ever set, so only the
// newest series (the largest value) of each engine is current; engines add up. The
// adapter names are counted here and never exported.
func readLoRA(f *dto.MetricFamily) loraState {
	type latest struct {
		at     float64
		labels map[string]string
	}
	byEngine := map[string]latest{}
	var order []string
	for _, m := range f.GetMetric() {
		v := sampleValue(m, partValue)
		if !finite(v) {
			continue
		}
		labels := labelMap(m)
		e := labels["engine"]
		old, seen := byEngine[e]
		if !seen {
			order = append(order, e)
		}
		if !seen || v > old.at {
			byEngine[e] = latest{v, labels}
		}
	}
	if len(order) == 0 {
		return noLoRA()
	}
	out := loraState{}
	maxKnown := false
	for _, e := range order {
		l := byEngine[e].labels
		out.running += float64(countList(l["running_lora_adapters"]))
		out.waiting += float64(countList(l["waiting_lora_adapters"]))
		if n, ok := number(l["max_lora"]); ok {
			out.max += n
			maxKnown = true
		}
	}
	if !maxKnown {
		out.max = math.NaN()
	}
	out.max = finiteOrNaN(out.max)
	return out
}

// countList counts the distinct non-empty names of a comma-separated list.
func countList(s string) int {
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			seen[n] = true
		}
	}
	return len(seen)
}
