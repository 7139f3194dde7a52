package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/admission"
)

// inFlightCollector reads the requests in flight once per scrape and exports both
// gauges from that one reading, so they are consistent with each other.
type inFlightCollector struct{ src InFlightSource }

var _ prometheus.Collector = inFlightCollector{}

// The source `slogate serve` passes: admission's ledger of requests in flight.
var _ InFlightSource = (*admission.Controller)(nil)

// Describe sends the descriptors of both in-flight gauges.
func (c inFlightCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightRequestsDesc
	ch <- inFlightKVTokensDesc
}

// Collect reads the source once and sends both gauges.
func (c inFlightCollector) Collect(ch chan<- prometheus.Metric) {
	n, kv := c.src.InFlight()
	ch <- prometheus.MustNewConstMetric(inFlightRequestsDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(inFlightKVTokensDesc, prometheus.GaugeValue, float64(kv))
}
