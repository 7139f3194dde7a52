package exporter

import (
	"github.com/prometheus/client_golang/prometheus"
)

// probeCollector exports the prober's latest results, read once per scrape.
type probeCollector struct{ src ProbeSource }

// NewProbeCollector returns the collector of the slogate_probe_* metrics of src, for a
// registry of its own (slogate probe pushes one); New registers it when Options.Probe
// is set.
func NewProbeCollector(src ProbeSource) prometheus.Collector { return probeCollector{src: src} }

var _ prometheus.Collector = probeCollector{}

// probeStates are the cell states the state set covers.
var probeStates = []string{"valid", "looped", "over_capacity", "rej", "n/c", "failed", "skipped"}

// probeVerdicts are the gate verdicts the state set covers.
var probeVerdicts = []string{"pass", "fail", "skipped"}

// Describe sends every prober descriptor.
func (probeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		probeThroughputDesc, probeTTFT50Desc, probeTTFT95Desc, probeTPOTDesc, probeSuccessDesc, probeStateDesc, probeGateDesc,
		probeRunningDesc, probeRunsDesc, probeHeldDesc, probeLastStartDesc, probeLastSuccessDesc, probeRegressionDesc,
	} {
		ch <- d
	}
}

// Collect sends the schedule's gauges, per cell of the latest report its state and (for
// valid cells) its figures, and per figure compared with the run before whether it
// regressed.
func (c probeCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.src.Probe()
	w := p.Workload
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(probeRunningDesc, boolValue(p.Running), w)
	ch <- prometheus.MustNewConstMetric(probeRunsDesc, prometheus.CounterValue, float64(p.Runs), w)
	ch <- prometheus.MustNewConstMetric(probeHeldDesc, prometheus.CounterValue, float64(p.Held), w)
	if !p.LastStart.IsZero() {
		gauge(probeLastStartDesc, float64(p.LastStart.UnixNano())/1e9, w)
		gauge(probeLastSuccessDesc, boolValue(p.LastOK), w)
	}
	for _, cell := range p.Cells {
		for _, s := range probeStates {
			gauge(probeStateDesc, boolValue(cell.State == s), w, cell.Row, cell.Load, s)
		}
		gauge(probeSuccessDesc, cell.SuccessRate, w, cell.Row, cell.Load)
		if cell.State != "valid" {
			continue
		}
		gauge(probeThroughputDesc, cell.Throughput, w, cell.Row, cell.Load)
		gauge(probeTTFT50Desc, cell.TTFTp50, w, cell.Row, cell.Load)
		gauge(probeTTFT95Desc, cell.TTFTp95, w, cell.Row, cell.Load)
		gauge(probeTPOTDesc, cell.TPOTp95, w, cell.Row, cell.Load)
	}
	// Every figure compared is exported, 0 or 1, so that an alert on 1 resolves when the
	// next run is back within the noise band rather than by its series going away.
	for _, c := range p.Compared {
		gauge(probeRegressionDesc, boolValue(c.Regressed), w, c.Row, c.Load, c.Figure)
	}
	for _, g := range p.Gate {
		for _, v := range probeVerdicts {
			gauge(probeGateDesc, boolValue(g.Verdict == v), w, g.Name, v)
		}
	}
}
