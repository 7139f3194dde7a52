package exporter

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/clock"
)

// engineCollector exports the engine's latest Snapshot as engine-neutral gauges, read
// once per scrape. Unknown measurements (NaN in the snapshot) are left out rather than
// exported as NaN, and so is every measurement while the engine is down, so that a
// dashboard never shows stale engine state as current: slogate_engine_up and
// slogate_engine_scrape_age_seconds say what is going on instead.
type engineCollector struct {
	src   EngineSource
	clock clock.Clock
}

var _ prometheus.Collector = engineCollector{}

// Describe sends every descriptor the collector may emit.
func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		engineUpDesc, engineInfoDesc, engineScrapeAgeDesc, engineServedModelsDesc,
		engineWaitingDesc, engineRunningDesc, engineKVUsageDesc, engineKVCapacityDesc,
		enginePrefixHitDesc, enginePreemptionsDesc, engineSpecAcceptDesc, engineSpecLengthDesc,
		engineWaitingCapacityDesc, engineSleepingDesc, engineKVUsedDesc, engineKVAvailableDesc,
		engineQueueTimeDesc, engineLoRADesc, engineLoRAMaxDesc,
	} {
		ch <- d
	}
}

// Collect reads the snapshot once and sends the gauges it supports.
func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Latest()
	up := 0.0
	if s.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(engineUpDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(engineInfoDesc, prometheus.GaugeValue, 1, s.Kind.String())
	ch <- prometheus.MustNewConstMetric(engineServedModelsDesc, prometheus.GaugeValue, float64(len(s.Models)))
	if !s.At.IsZero() {
		age := max(seconds(c.clock.Now().Sub(s.At)), 0)
		ch <- prometheus.MustNewConstMetric(engineScrapeAgeDesc, prometheus.GaugeValue, age)
	}
	if !s.Up {
		return
	}
	known(ch, engineWaitingDesc, prometheus.GaugeValue, s.Waiting)
	known(ch, engineRunningDesc, prometheus.GaugeValue, s.Running)
	known(ch, engineKVUsageDesc, prometheus.GaugeValue, s.KVUsage)
	known(ch, engineKVCapacityDesc, prometheus.GaugeValue, s.KVCapacityTokens)
	known(ch, enginePrefixHitDesc, prometheus.GaugeValue, s.PrefixHitRatio)
	known(ch, engineSpecAcceptDesc, prometheus.GaugeValue, s.SpecAcceptRate)
	known(ch, engineSpecLengthDesc, prometheus.GaugeValue, s.SpecAcceptLength)
	known(ch, engineWaitingCapacityDesc, prometheus.GaugeValue, s.WaitingCapacity)
	known(ch, engineKVUsedDesc, prometheus.GaugeValue, s.KVUsedTokens)
	known(ch, engineKVAvailableDesc, prometheus.GaugeValue, s.KVAvailableTokens)
	known(ch, engineQueueTimeDesc, prometheus.GaugeValue, s.QueueTimeMean)
	known(ch, engineLoRAMaxDesc, prometheus.GaugeValue, s.LoRAMax)
	knownLabelled(ch, engineLoRADesc, s.LoRARunning, "running")
	knownLabelled(ch, engineLoRADesc, s.LoRAWaiting, "waiting")
	ch <- prometheus.MustNewConstMetric(engineSleepingDesc, prometheus.GaugeValue, boolValue(s.Sleeping))
	// Both engines' preemption is a counter: vLLM num_preemptions_total, SGLang
	// num_retracted_requests_total (its gauge num_retracted_reqs resets per log and is
	// not read).
	known(ch, enginePreemptionsDesc, prometheus.CounterValue, s.Preemptions)
}

// knownLabelled sends v with one label value unless it is unknown or infinite.
func knownLabelled(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, label string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label)
}

// known sends v unless it is unknown (NaN) or infinite.
func known(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	ch <- prometheus.MustNewConstMetric(d, t, v)
}
