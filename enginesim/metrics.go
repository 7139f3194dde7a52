package enginesim

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Flavor selects which engine the simulator impersonates: the names, labels and buckets
// of its Prometheus metrics and its engine-specific endpoints.
type Flavor string

// The supported flavours.
const (
	FlavorVLLM   Flavor = "vllm"
	FlavorSGLang Flavor = "sglang"
)

// histKind names one per-request distribution the engines export.
type histKind uint8

const (
	histTTFT histKind = iota
	histITL
	histTPOT
	histE2E
	histQueue
	histPrefill
	histDecode
	histInference
	histPromptTokens
	histGenTokens
	histMaxTokens
	histIterTokens
	numHistKinds
)

// histSpec is one histogram of a flavour.
type histSpec struct {
	name, help string
	buckets    []float64
}

// valueSpec is a gauge or counter computed from a scheduler snapshot at scrape time.
type valueSpec struct {
	name, help string
	kind       prometheus.ValueType
	value      func(st Stats, p Profile, m *simMetrics) float64
	// label and labelValue add one label to the flavour's (vLLM reason, sleep_state);
	// "" for none.
	label, labelValue string
}

// flavorSpec is the whole metric surface of one engine, as data.
type flavorSpec struct {
	labels       []string // label names on every metric but the info one
	labelValues  func(p Profile) []string
	hists        map[histKind]histSpec
	values       []valueSpec
	specValues   []valueSpec // exported only when the profile decodes speculatively
	success      valueSpec   // per-finish-reason counter; name only
	successLabel string      // "" when the flavour counts finishes without a reason label
	aborted      string      // counter of aborted requests, "" if none
	itlPerToken  bool        // SGLang spreads a multi-token chunk's gap over its tokens
	// idleStart: until the first step or idleLog after start, only the info metric is
	// exposed (SGLang: its metrics appear with the first batch or the idle stats log).
	idleStart bool
	// priority says whether a metric carries the priority label under priority
	// scheduling and whether it has a breakdown by priority; nil: no such label.
	priority func(name string) (labelled, breakdown bool)
	info     func(p Profile) (name, help string, labels prometheus.Labels)
}

// simMetrics is the Prometheus view of one simulated engine. Histograms and finish counts
// are fed by scheduler hooks; everything else is read from a snapshot at scrape time.
// Safe for concurrent use.
type simMetrics struct {
	spec     flavorSpec
	profile  Profile
	snapshot func() Stats
	hists    [numHistKinds]prometheus.Histogram
	success  *prometheus.CounterVec
	aborted  prometheus.Counter

	now     func() time.Time // the clock; time.Now but in tests
	started time.Time
	sleep   sleepGauge // vLLM sleep mode (sleep.go)

	mu        sync.Mutex // guards the throughput window and the batch hit rate
	lastTime  time.Time
	lastTotal int64
	lastRate  float64
	hitsSeen  [2]int64 // prefix hits and queries at the last prefill batch seen
	lastBatch float64  // that batch's hit rate
}

// idleLog is how long after start SGLang writes its first stats log when idle.
const idleLog = 30 * time.Second

func newSimMetrics(reg prometheus.Registerer, f Flavor, p Profile, snapshot func() Stats) *simMetrics {
	spec := vllmSpec
	if f == FlavorSGLang {
		spec = sglangSpec
	}
	m := &simMetrics{spec: spec, profile: p, snapshot: snapshot, now: time.Now}
	m.started = m.now()
	constLabels := prometheus.Labels{}
	for i, v := range spec.labelValues(p) {
		constLabels[spec.labels[i]] = v
	}
	for kind, h := range spec.hists {
		buckets := h.buckets
		if buckets == nil {
			buckets = buckets125(p.MaxModelLen)
		}
		m.hists[kind] = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: h.name, Help: h.help, Buckets: buckets, ConstLabels: constLabels,
		})
	}
	if spec.successLabel != "" {
		m.success = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: spec.success.name, Help: spec.success.help, ConstLabels: constLabels,
		}, []string{spec.successLabel})
		for _, r := range []string{"stop", "length", "abort", "error"} {
			m.success.WithLabelValues(r)
		}
	}
	if spec.aborted != "" {
		m.aborted = prometheus.NewCounter(prometheus.CounterOpts{
			Name: spec.aborted, Help: "Number of requests aborted.", ConstLabels: constLabels,
		})
	}
	reg.MustRegister(m)
	return m
}

// hooks returns the scheduler hooks that feed the histograms and finish counters.
func (m *simMetrics) hooks() Hooks {
	return Hooks{Tokens: m.observeTokens, Finished: m.observeFinished, Step: m.observeStep}
}

func (m *simMetrics) observe(k histKind, v float64) {
	if h := m.hists[k]; h != nil {
		h.Observe(v)
	}
}

func (m *simMetrics) observeTokens(gap time.Duration, n int) {
	if !m.spec.itlPerToken {
		m.observe(histITL, gap.Seconds())
		return
	}
	for range n {
		m.observe(histITL, gap.Seconds()/float64(n))
	}
}

func (m *simMetrics) observeStep(tokens int) { m.observe(histIterTokens, float64(tokens)) }

func (m *simMetrics) observeFinished(f Finished) {
	if m.success != nil {
		m.success.WithLabelValues(f.Reason).Inc()
	}
	if f.Reason == "abort" {
		if m.aborted != nil {
			m.aborted.Inc()
		}
		return // engines record latency histograms for completed requests only
	}
	m.observe(histTTFT, f.TTFT.Seconds())
	m.observe(histE2E, f.E2E.Seconds())
	m.observe(histQueue, f.Queue.Seconds())
	m.observe(histPrefill, f.Prefill.Seconds())
	m.observe(histDecode, f.Decode.Seconds())
	m.observe(histInference, (f.Prefill + f.Decode).Seconds())
	m.observe(histPromptTokens, float64(f.PromptTokens))
	m.observe(histGenTokens, float64(f.OutputTokens))
	m.observe(histMaxTokens, float64(f.MaxTokens))
	if f.OutputTokens > 1 {
		m.observe(histTPOT, f.Decode.Seconds()/float64(f.OutputTokens-1))
	}
}

// throughput returns generated tokens per second since the previous scrape.
func (m *simMetrics) throughput(total int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !m.lastTime.IsZero() {
		if dt := now.Sub(m.lastTime).Seconds(); dt > 0.5 {
			m.lastRate = float64(total-m.lastTotal) / dt
			m.lastTime, m.lastTotal = now, total
		}
	} else {
		m.lastTime, m.lastTotal = now, total
	}
	return m.lastRate
}

// Describe implements prometheus.Collector; the snapshot metrics are unchecked.
func (m *simMetrics) Describe(chan<- *prometheus.Desc) {}

// batchHitRate returns the prefix-cache hit rate of the last step if it prefilled
// (over the hits and queries since the last prefill seen), else 0, as SGLang's
// cache_hit_rate reads after a decode log. Only prefills seen at scrape time count.
func (m *simMetrics) batchHitRate(st Stats) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.PrefillTokensStep == 0 {
		return 0
	}
	if dq := st.PrefixQueries - m.hitsSeen[1]; dq > 0 {
		m.lastBatch = ratio(st.PrefixHits-m.hitsSeen[0], dq)
		m.hitsSeen = [2]int64{st.PrefixHits, st.PrefixQueries}
	}
	return m.lastBatch
}

// Collect implements prometheus.Collector: the histograms and finish counters, and the
// values read from a snapshot.
func (m *simMetrics) Collect(ch chan<- prometheus.Metric) {
	st := m.snapshot()
	if m.spec.info != nil {
		name, help, labels := m.spec.info(m.profile)
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, labels), prometheus.GaugeValue, 1)
	}
	if m.spec.idleStart && st.Steps == 0 && m.now().Sub(m.started) < idleLog {
		return
	}
	for _, h := range m.hists {
		if h != nil {
			h.Collect(ch)
		}
	}
	if m.success != nil {
		m.success.Collect(ch)
	}
	if m.aborted != nil {
		m.aborted.Collect(ch)
	}
	m.emit(ch, st, m.spec.values)
	if m.profile.Speculation.DraftTokens > 0 {
		m.emit(ch, st, m.spec.specValues)
	}
}

// emit sends the values specs give for st. Under priority scheduling (SGLang), a
// scheduler metric also carries priority="" and, for the running and queued requests,
// the same value again under priority="0", the one priority the simulator gives.
func (m *simMetrics) emit(ch chan<- prometheus.Metric, st Stats, specs []valueSpec) {
	names := m.spec.labels
	values := m.spec.labelValues(m.profile)
	for _, v := range specs {
		n, lv := slices.Clone(names), slices.Clone(values)
		if v.label != "" {
			n, lv = append(n, v.label), append(lv, v.labelValue)
		}
		val := v.value(st, m.profile, m)
		var split bool
		if m.profile.PriorityScheduling && m.spec.priority != nil {
			var labelled bool
			if labelled, split = m.spec.priority(v.name); labelled {
				n, lv = append(n, "priority"), append(lv, "")
			}
		}
		d := prometheus.NewDesc(v.name, v.help, n, nil)
		ch <- prometheus.MustNewConstMetric(d, v.kind, val, lv...)
		if split {
			lv[len(lv)-1] = "0"
			ch <- prometheus.MustNewConstMetric(d, v.kind, val, lv...)
		}
	}
}

// buckets125 returns 1, 2, 5, 10, 20, 50, ... up to and including the last value not above
// max, as vLLM builds its token-count histograms.
func buckets125(max int) []float64 {
	var out []float64
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*scale > max {
				return out
			}
			out = append(out, float64(m*scale))
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
