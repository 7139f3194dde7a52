package exporter

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// This file holds the per-tenant metrics: the series of each tenant label value, fed by
// Observe and ObserveDecision, and the scrape-time gauges of admission's tenants. A
// request or decision without a tenant ("": the tiers file has no tenants section)
// creates no tenant series at all.

// MaxTenantLabels is how many distinct tenant names, besides admission.OtherTenant,
// become tenant label values: twice the 64 named tenants a tiers file may hold, so that
// reloads can rename some. Any later name shares the series of admission.OtherTenant.
const MaxTenantLabels = 128

// Label names of the tenant metrics.
const (
	labelTenant = "tenant"
	labelBudget = "budget"
)

// The tenant gauges, read from an AdmissionSource at scrape time, in the same reading as
// the admission gauges (tenantCollector).
var (
	tenantWeightDesc = prometheus.NewDesc("slogate_tenant_weight",
		"The tenant's weight: its share of service relative to the other tenants' (tiers file tenants section).", []string{labelTenant}, nil)
	tenantOpenDesc = prometheus.NewDesc("slogate_tenant_open_requests",
		"The tenant's requests admitted and not yet ended: waiting in a tier's queue or in flight (what max_concurrent bounds).", []string{labelTenant}, nil)
	tenantQueuedDesc = prometheus.NewDesc("slogate_tenant_queued_requests",
		"The tenant's requests waiting in a tier's admission queue.", []string{labelTenant}, nil)
	tenantVirtualDesc = prometheus.NewDesc("slogate_tenant_virtual_tokens",
		"The tenant's virtual token counter (VTC): its weighted service over its weight, lifts included. Inside a tier, the queued request of the tenant with the lowest counter goes first.", []string{labelTenant}, nil)
	tenantServiceDesc = prometheus.NewDesc("slogate_tenant_service_tokens",
		"The tenant's weighted service since it was configured: prompt tokens times the input weight plus output tokens times the output weight (lifts excluded).", []string{labelTenant}, nil)
	tenantBudgetLimitDesc = prometheus.NewDesc("slogate_tenant_budget_limit",
		"The tenant's budget: requests, input_tokens and output_tokens per minute, or concurrency (most requests open). Absent for budgets the tenant does not have.", []string{labelTenant, labelBudget}, nil)
	tenantBudgetRemainingDesc = prometheus.NewDesc("slogate_tenant_budget_remaining",
		"What is left of the tenant's budget now, never below 0: of the per-minute budgets (requests, input_tokens, output_tokens; token buckets refilling continuously), or of concurrency. Absent for budgets the tenant does not have.", []string{labelTenant, labelBudget}, nil)
)

// tenantMetrics holds the metric vectors the tenant series are children of.
type tenantMetrics struct {
	requests  *prometheus.CounterVec   // tenant, outcome
	input     *prometheus.CounterVec   // tenant
	output    *prometheus.CounterVec   // tenant
	queueWait *prometheus.HistogramVec // tenant
	judged    *prometheus.CounterVec   // tenant
	met       *prometheus.CounterVec   // tenant
	decisions *prometheus.CounterVec   // tenant, decision, reason
}

// newTenantMetrics creates the per-request and per-decision tenant metrics with f; hist
// makes a histogram as New makes its others (native buckets when asked for).
func newTenantMetrics(f promauto.Factory, hist func(name, help string, b []float64, labels ...string) *prometheus.HistogramVec) tenantMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{labelTenant}, labels...))
	}
	return tenantMetrics{
		requests: counter("slogate_tenant_requests_total",
			"Inference requests finished, by tenant and outcome (as slogate_requests_total counts them).", labelOutcome),
		input: counter("slogate_tenant_input_tokens_total",
			"Prompt tokens of the tenant's finished requests, from the engine's usage report, whatever the outcome (as slogate_prompt_tokens_total)."),
		output: counter("slogate_tenant_output_tokens_total",
			"Output tokens of the tenant's finished requests, from the engine's usage report or the stream's chunks, whatever the outcome (as slogate_generation_tokens_total)."),
		queueWait: hist("slogate_tenant_queue_wait_seconds",
			"Time the tenant's requests waited in their tier's admission queue before dispatch (0 when admitted at once), of every request admission classified and dispatched, whatever its outcome.",
			slices.Clone(DefaultQueueWaitBuckets), labelTenant),
		judged: counter("slogate_tenant_slo_judged_requests_total",
			"The tenant's requests an SLO judges: streams that ended ok with output (measure.ClientLatency)."),
		met: counter("slogate_tenant_slo_met_requests_total",
			"The tenant's judged requests whose TTFT (queue wait included) and TPOT both met their tier's SLO (measure.SLO.MetByClient)."),
		decisions: counter("slogate_tenant_admission_decisions_total",
			"Admission decisions on the tenant's requests, by decision and reason (as slogate_admission_decisions_total; probe requests belong to no tenant). Shadow-mode decisions count the same.",
			labelDecision, labelReason),
	}
}

// The decisions a tenant's series has a counter slot for: every verdict and reason with
// a name of its own, and one slot each for those whose String is "unknown".
var (
	numVerdictSlots = namedEnums(func(i int) string { return admission.Verdict(i).String() }) + 1
	numReasonSlots  = len(admission.Reasons()) + 1
)

// namedEnums counts the values 0, 1, ... of an enum up to the first whose name is
// "unknown".
func namedEnums(name func(int) string) int {
	n := 0
	for n < 255 && name(n) != "unknown" {
		n++
	}
	return n
}

// tenantSeries holds one tenant label value's resolved children, so that recording a
// request or a decision costs no label hashing. Creating it creates the request counter
// of every outcome, the token and SLO counters and the queue wait histogram, at zero;
// decision counters are created with their first decision.
type tenantSeries struct {
	name      string
	vec       *tenantMetrics
	requests  []prometheus.Counter // by measure.Outcome
	input     prometheus.Counter
	output    prometheus.Counter
	queueWait prometheus.Observer
	judged    prometheus.Counter
	met       prometheus.Counter

	decided []atomic.Pointer[prometheus.Counter] // by verdict × numReasonSlots + reason; nil until first use
	mu      sync.Mutex                           // serialises the creation of decided
}

func newTenantSeries(v *tenantMetrics, name string) *tenantSeries {
	s := &tenantSeries{
		name: name, vec: v,
		input:     v.input.WithLabelValues(name),
		output:    v.output.WithLabelValues(name),
		queueWait: v.queueWait.WithLabelValues(name),
		judged:    v.judged.WithLabelValues(name),
		met:       v.met.WithLabelValues(name),
		decided:   make([]atomic.Pointer[prometheus.Counter], numVerdictSlots*numReasonSlots),
	}
	for _, o := range measure.Outcomes() {
		s.requests = append(s.requests, v.requests.WithLabelValues(name, o.String()))
	}
	return s
}

// request returns the request counter of outcome o.
func (s *tenantSeries) request(o measure.Outcome) prometheus.Counter {
	if int(o) < len(s.requests) {
		return s.requests[o]
	}
	return s.vec.requests.WithLabelValues(s.name, o.String()) // an outcome added to measure later
}

// decision returns the counter of one verdict and reason, creating it once.
func (s *tenantSeries) decision(v admission.Verdict, r admission.Reason) prometheus.Counter {
	vs, rs := v.String(), r.String()
	vi, ri := numVerdictSlots-1, numReasonSlots-1
	if vs != "unknown" && int(v) < vi {
		vi = int(v)
	}
	if rs != "unknown" && int(r) < ri {
		ri = int(r)
	}
	slot := &s.decided[vi*numReasonSlots+ri]
	if c := slot.Load(); c != nil {
		return *c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := slot.Load(); c != nil {
		return *c
	}
	c := s.vec.decisions.WithLabelValues(s.name, vs, rs)
	slot.Store(&c)
	return c
}

// tenantIndex maps a tenant name to its series. Lookups of a known name take no lock
// and allocate nothing. admission.OtherTenant and the first MaxTenantLabels other names
// get their own label value; any later name shares OtherTenant's, and is not remembered
// (labelIndex). "" (no tenants section) maps to nil.
type tenantIndex struct {
	labelIndex[*tenantSeries]
	vec tenantMetrics
}

func (x *tenantIndex) init(vec tenantMetrics) {
	x.vec = vec
	x.labelIndex.init(MaxTenantLabels, admission.OtherTenant, nil, func(label string, _ int) *tenantSeries {
		return newTenantSeries(&x.vec, label)
	})
}

// observeTenant records one finished request of a tenant; nothing without one. The tier
// SLO it is judged by is its tier's as admission last reported it (slos), the sidecar's
// for a request admission did not classify.
func (m *Metrics) observeTenant(res *measure.Result) {
	s := m.tenants.lookup(res.Tenant)
	if s == nil {
		return
	}
	s.request(res.Outcome).Inc()
	if res.Tier != "" && res.Outcome != measure.Rejected {
		s.queueWait.Observe(seconds(res.QueueWait))
	}
	if res.InputTokens > 0 {
		s.input.Add(float64(res.InputTokens))
	}
	if res.OutputTokens > 0 && res.Tokens != measure.TokensNone {
		s.output.Add(float64(res.OutputTokens))
	}
	if judged, met := m.judge(res); judged {
		s.judged.Inc()
		if met {
			s.met.Inc()
		}
	}
}

// judge says whether an SLO judges res (measure.ClientLatency: a stream that ended ok
// with output) and whether it met its tier's SLO as admission last reported it (slos;
// the sidecar's for a request admission did not classify), TTFT with the queue wait
// included (measure.SLO.MetByClient). The tier and tenant SLO counters count by it.
func (m *Metrics) judge(res *measure.Result) (judged, met bool) {
	if _, _, judged = measure.ClientLatency(*res); !judged {
		return false, false
	}
	return true, m.slos.of(res.Tier).MetByClient(*res)
}

// observeTenantDecision counts one admission decision under its tenant; nothing without
// one, or for a probe, which belongs to no tenant.
func (m *Metrics) observeTenantDecision(d *admission.Decision) {
	if d.Class == admission.Probe {
		return
	}
	if s := m.tenants.lookup(d.Tenant); s != nil {
		s.decision(d.Verdict, d.Reason).Inc()
	}
}

// tierSLOs is the SLO of each tier, as admission last reported it, for judging a
// tenant's requests as the status page does: by its tier's SLO, the sidecar's (def) for
// a tier admission does not report. It is brought up to date at New and at every scrape
// of the admission gauges, so a reload that changes a tier's SLO applies from the next
// scrape. Lookups take no lock and allocate nothing.
type tierSLOs struct {
	def   measure.SLO
	table atomic.Pointer[map[string]measure.SLO] // immutable; replaced when the tiers change
}

func (x *tierSLOs) init(def measure.SLO) {
	x.def = def
	x.table.Store(&map[string]measure.SLO{})
}

// of returns the SLO of tier, def for one not reported.
func (x *tierSLOs) of(tier string) measure.SLO {
	if slo, ok := (*x.table.Load())[tier]; ok {
		return slo
	}
	return x.def
}

// update replaces the table with tiers' SLOs when they differ from it. Concurrent calls
// (two scrapes at once) each store a whole table of one reading.
func (x *tierSLOs) update(tiers []admission.TierStats) {
	old := *x.table.Load()
	same := len(old) == len(tiers)
	for i := 0; same && i < len(tiers); i++ {
		slo, ok := old[tiers[i].Name]
		same = ok && slo == tiers[i].SLO
	}
	if same {
		return
	}
	next := make(map[string]measure.SLO, len(tiers))
	for _, t := range tiers {
		next[t.Name] = t.SLO
	}
	x.table.Store(&next)
}

// initialTenants learns the tiers' SLOs, and creates the series of the tenants admission
// has when New is called, at zero, so that rate() and absence alerts work before their
// first request; tenants added by a reload get theirs with their first request or
// decision.
func (m *Metrics) initialTenants(src AdmissionSource) {
	if absent(src) {
		return
	}
	st := src.Stats()
	m.slos.update(st.Tiers)
	for _, t := range st.Tiers {
		m.tiers.lookup(t.Name)
	}
	for _, t := range st.Tenants {
		m.tenants.lookup(t.Name)
	}
}

// tenantCollector reads admission control's state once per scrape and exports from that
// one reading both the admission gauges (admissionCollector) and the tenants' gauges, so
// they are consistent with each other; it also brings the tier SLOs the tenant counters
// judge by up to date.
type tenantCollector struct {
	src         AdmissionSource
	slos        *tierSLOs
	sustainable SustainableSource
	tiers       *tierIndex // every tier in force gets its per-request series, at zero
}

var _ prometheus.Collector = tenantCollector{}

// statsReading is one reading of admission's state, as an AdmissionSource.
type statsReading admission.Stats

func (s *statsReading) Stats() admission.Stats { return admission.Stats(*s) }

// Describe sends the descriptors of the admission and tenant gauges.
func (c tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	admissionCollector{}.Describe(ch)
	for _, d := range []*prometheus.Desc{
		tenantWeightDesc, tenantOpenDesc, tenantQueuedDesc, tenantVirtualDesc, tenantServiceDesc,
		tenantBudgetLimitDesc, tenantBudgetRemainingDesc,
	} {
		ch <- d
	}
}

// Collect reads the source once and sends the admission gauges and, unless admission is
// off, every tenant's gauges.
func (c tenantCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	c.slos.update(st.Tiers)
	if c.tiers != nil {
		for _, t := range st.Tiers {
			c.tiers.lookup(t.Name)
		}
	}
	admissionCollector{src: (*statsReading)(&st), sustainable: c.sustainable}.Collect(ch)
	if st.Mode == admission.Off {
		return // admission holds no state: nothing is reserved or queued
	}
	for i := range st.Tenants {
		collectTenant(ch, &st.Tenants[i])
	}
}

// collectTenant sends the gauges of one tenant; budgets it does not have are left out.
func collectTenant(ch chan<- prometheus.Metric, t *admission.TenantStats) {
	name := t.Name
	ch <- gauge(tenantWeightDesc, t.Weight, name)
	ch <- gauge(tenantOpenDesc, float64(t.Open), name)
	ch <- gauge(tenantQueuedDesc, float64(t.Queued), name)
	ch <- gauge(tenantVirtualDesc, t.Counter, name)
	ch <- gauge(tenantServiceDesc, t.Service, name)
	concurrency := admission.Allowance{Limit: float64(t.Budget.MaxConcurrent)}
	concurrency.Remaining = max(concurrency.Limit-float64(t.Open), 0)
	for _, b := range []struct {
		budget string
		a      admission.Allowance
	}{
		{"requests", t.Quota.Requests},
		{"input_tokens", t.Quota.InputTokens},
		{"output_tokens", t.Quota.OutputTokens},
		{"concurrency", concurrency},
	} {
		if b.a.Set() {
			ch <- gauge(tenantBudgetLimitDesc, b.a.Limit, name, b.budget)
			ch <- gauge(tenantBudgetRemainingDesc, b.a.Remaining, name, b.budget)
		}
	}
}
