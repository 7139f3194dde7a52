package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
)

// calibrationCollector exports the sidecar's calibrations, read once per scrape.
type calibrationCollector struct{ src CalibrationSource }

var _ prometheus.Collector = calibrationCollector{}

// Describe sends every calibration descriptor.
func (calibrationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		calibrationRunningDesc, calibrationRunsDesc, calibrationHeldDesc, calibrationLastStartDesc,
		calibrationLastSuccessDesc, calibrationTimestampDesc, calibrationAppliedDesc,
		calibrationKneeDesc, calibrationKneeChangeDesc, calibrationLimitDesc,
	} {
		ch <- d
	}
}

// Collect sends the schedule's gauges and, when there is a complete calibration, its
// time, whether it is in force, and each tier's knee and limits.
func (c calibrationCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Calibration()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(calibrationRunningDesc, boolValue(s.Running))
	ch <- prometheus.MustNewConstMetric(calibrationRunsDesc, prometheus.CounterValue, float64(s.Runs))
	ch <- prometheus.MustNewConstMetric(calibrationHeldDesc, prometheus.CounterValue, float64(s.Held))
	if !s.LastStart.IsZero() {
		gauge(calibrationLastStartDesc, float64(s.LastStart.UnixNano())/1e9)
		gauge(calibrationLastSuccessDesc, boolValue(s.LastOK))
	}
	if s.Finished.IsZero() {
		return
	}
	gauge(calibrationTimestampDesc, float64(s.Finished.UnixNano())/1e9)
	gauge(calibrationAppliedDesc, boolValue(s.Applied))
	for _, t := range s.Tiers {
		gauge(calibrationKneeDesc, t.Knee, t.Name)
		if t.KneeChange > 0 {
			gauge(calibrationKneeChangeDesc, t.KneeChange, t.Name)
		}
		gauge(calibrationLimitDesc, t.Rate, t.Name, "rate")
		gauge(calibrationLimitDesc, float64(t.Burst), t.Name, "burst")
		gauge(calibrationLimitDesc, float64(t.MaxInFlight), t.Name, "max_in_flight")
		gauge(calibrationLimitDesc, float64(t.MaxQueue), t.Name, "max_queue")
		gauge(calibrationLimitDesc, t.MaxQueueWait.Seconds(), t.Name, "max_queue_wait_seconds")
	}
}
