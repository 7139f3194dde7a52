package exporter

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/admission"
)

// admissionCollector reads admission control's state once per scrape and exports it as
// gauges, all from that one reading, so they are consistent with each other.
type admissionCollector struct {
	src         AdmissionSource
	sustainable SustainableSource // nil: no tier's λ* is known
}

var _ prometheus.Collector = admissionCollector{}

// Describe sends the descriptors of every admission gauge.
func (c admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		admissionModeDesc, admissionEngineStateDesc,
		admissionInFlightDesc, admissionLimitDesc, admissionLimitMinDesc, admissionLimitMaxDesc,
		admissionQueueLengthDesc, admissionQueueLimitDesc, admissionQueueWaitLimitDesc,
		admissionRateLimitDesc, admissionSLODesc, admissionObservedP95Desc,
		admissionServiceRateDesc, admissionMaxInputDesc, admissionPrefillDesc, admissionPrefillLimitDesc,
		admissionOfferedDesc, admissionSustainableDesc, admissionDemandDesc,
	} {
		ch <- d
	}
}

// admissionModes and engineStates are the values of the mode and state labels; each is
// exported as a state set: 1 for the current value, 0 for the others.
var (
	admissionModes = []admission.Mode{admission.Off, admission.Shadow, admission.Enforce}
	engineStates   = []struct {
		reason admission.Reason
		name   string
	}{
		{admission.NoReason, "ok"},
		{admission.Saturated, admission.Saturated.String()},
		{admission.EngineDown, admission.EngineDown.String()},
	}
)

// Collect reads the source once and sends the mode and, unless admission is off, the
// engine state and every tier's gauges.
func (c admissionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	for _, mode := range admissionModes {
		ch <- gauge(admissionModeDesc, boolValue(st.Mode == mode), mode.String())
	}
	if st.Mode == admission.Off {
		return // admission holds no state: every request goes straight to the engine
	}
	for _, s := range engineStates {
		ch <- gauge(admissionEngineStateDesc, boolValue(st.Engine == s.reason), s.name)
	}
	var lambda map[string]float64
	if !absent(c.sustainable) {
		lambda = c.sustainable.Sustainable()
	}
	for i := range st.Tiers {
		t := &st.Tiers[i]
		collectTier(ch, t)
		ch <- gauge(admissionOfferedDesc, t.Offered, t.Name)
		if l := lambda[t.Name]; l > 0 && !math.IsInf(l, 0) {
			ch <- gauge(admissionSustainableDesc, l, t.Name)
			ch <- gauge(admissionDemandDesc, t.Offered/l, t.Name)
		}
	}
}

// collectTier sends the gauges of one tier. Values that are unknown (observed p95s,
// service rate) or do not apply (no rate limit, no SLO, no input bound) are left out.
func collectTier(ch chan<- prometheus.Metric, t *admission.TierStats) {
	name := t.Name
	ch <- gauge(admissionInFlightDesc, float64(t.InFlight), name)
	ch <- gauge(admissionLimitDesc, t.Limit, name)
	ch <- gauge(admissionLimitMinDesc, float64(t.MinInFlight), name)
	ch <- gauge(admissionLimitMaxDesc, float64(t.MaxInFlight), name)
	for _, class := range admission.Classes() {
		if int(class) < len(t.Queued) {
			ch <- gauge(admissionQueueLengthDesc, float64(t.Queued[class]), name, class.String())
		}
	}
	ch <- gauge(admissionQueueLimitDesc, float64(t.MaxQueue), name)
	ch <- gauge(admissionQueueWaitLimitDesc, seconds(t.MaxQueueWait), name)
	if t.Rate > 0 {
		ch <- gauge(admissionRateLimitDesc, t.Rate, name)
	}
	for _, s := range []struct {
		slo         string
		target, p95 time.Duration
	}{
		{"ttft", time.Duration(t.SLO.TTFT), t.P95TTFT},
		{"tpot", time.Duration(t.SLO.TPOT), t.P95TPOT},
	} {
		if s.target > 0 {
			ch <- gauge(admissionSLODesc, seconds(s.target), name, s.slo)
		}
		if s.p95 > 0 {
			ch <- gauge(admissionObservedP95Desc, seconds(s.p95), name, s.slo)
		}
	}
	if t.ServiceRate > 0 {
		ch <- gauge(admissionServiceRateDesc, t.ServiceRate, name)
	}
	ch <- gauge(admissionPrefillDesc, float64(t.PrefillTokens), name)
	if t.MaxPrefillTokens > 0 {
		ch <- gauge(admissionPrefillLimitDesc, float64(t.MaxPrefillTokens), name)
	}
	if t.MaxInputTokens > 0 {
		ch <- gauge(admissionMaxInputDesc, float64(t.MaxInputTokens), name)
	}
}

// reloadCollector exports the outcome of the tiers file's reloads. The source only
// knows the last attempt, so the collector remembers the last success it has seen:
// after a failed reload the success timestamp stays at the previous success. (A success
// followed by a failure between two scrapes is not seen; the timestamp then stays at
// the success before.)
type reloadCollector struct {
	src ReloadSource

	mu          sync.Mutex
	lastSuccess time.Time // zero until a success is seen
}

var _ prometheus.Collector = (*reloadCollector)(nil)

// newReloadCollector returns a collector of src that has seen src's current status,
// normally the initial load.
func newReloadCollector(src ReloadSource) *reloadCollector {
	c := &reloadCollector{src: src}
	c.read()
	return c
}

// read reads the source's status and returns it with the last success seen.
func (c *reloadCollector) read() (admission.ReloadStatus, time.Time) {
	st := c.src.Status()
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.OK && st.At.After(c.lastSuccess) {
		c.lastSuccess = st.At
	}
	return st, c.lastSuccess
}

// Describe sends the descriptors of both reload gauges.
func (c *reloadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reloadSuccessfulDesc
	ch <- reloadSuccessTimeDesc
}

// Collect reads the source once and sends the outcome of the last reload and, once a
// success has been seen, its time.
func (c *reloadCollector) Collect(ch chan<- prometheus.Metric) {
	st, last := c.read()
	ch <- gauge(reloadSuccessfulDesc, boolValue(st.OK))
	if !last.IsZero() {
		ch <- gauge(reloadSuccessTimeDesc, float64(last.UnixNano())/1e9)
	}
}

// gauge returns a constant gauge sample of d.
func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// boolValue returns 1 for true and 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
