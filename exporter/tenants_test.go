package exporter

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/tenant"
	"github.com/slogate/slogate/wire"
)

// tenantHeader is the header the test controllers identify tenants by.
const tenantHeader = "X-Tenant"

// testTenants is a tenants section of two named tenants: alpha, weight 2, with a request
// budget and a concurrency cap; beta without budgets; and everyone else (other) with
// token budgets.
func testTenants() *admission.Tenants {
	return &admission.Tenants{
		Identify: tenant.Rule{Header: tenantHeader},
		Named: []admission.TenantConfig{
			{Name: "alpha", Weight: 2, Budget: admission.Budget{RequestsPerMinute: 60, MaxConcurrent: 4}},
			{Name: "beta"},
		},
		Other: admission.TenantConfig{Budget: admission.Budget{InputTokensPerMinute: 1000, OutputTokensPerMinute: 500}},
	}
}

// newTenantController returns a controller of the built-in tiers, short with a TTFT SLO
// of 1 s of its own, the others with the sidecar's SLOs of 2 s and 100 ms, and the
// tenants ts (nil: no tenants section).
func newTenantController(t testing.TB, mode admission.Mode, clk *clock.Fake, ts *admission.Tenants, obs ...admission.DecisionObserver) *admission.Controller {
	t.Helper()
	cfg := admission.DefaultConfig()
	cfg.Tiers[0].SLO = measure.NewSLO(time.Second, 0)
	cfg.Tenants = ts
	c, err := admission.New(cfg, admission.Options{Mode: mode, Clock: clk, Observers: obs,
		SLO: measure.NewSLO(2*time.Second, 100*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exposed scrapes reg's text exposition and returns every sample of the families whose
// name has prefix, keyed as samples keys them.
func exposed(t *testing.T, reg *prometheus.Registry, prefix string) map[string]float64 {
	t.Helper()
	fams := scrapeText(t, reg)
	return samples(t, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return slices.Collect(maps.Values(fams)), nil
	}), prefix)
}

// checkNonZero checks that got has want's samples and that every other sample is 0 (a
// series created up front).
func checkNonZero(t *testing.T, got, want map[string]float64) {
	t.Helper()
	maps.DeleteFunc(got, func(k string, v float64) bool { _, ok := want[k]; return !ok && v == 0 })
	checkExactly(t, got, want)
}

// Results of the tenant tests: a stream in tier short that waited 500 ms and got its
// first token 800 ms after dispatch (1.3 s as its client saw it), with usage.
var tenantStream = measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
	TTFT: 800 * time.Millisecond, TPOT: 20 * time.Millisecond, E2E: 2 * time.Second, OutputChunks: 50,
	InputTokens: 300, OutputTokens: 50, Tokens: measure.TokensUsage, Tier: "short", QueueWait: 500 * time.Millisecond}

// with returns r changed by f.
func with(r measure.Result, f func(*measure.Result)) measure.Result {
	f(&r)
	return r
}

func TestTenantRequestMetrics(t *testing.T) {
	key := func(name, tenant string, labels ...string) string {
		return name + "{" + strings.Join(append(labels, `tenant="`+tenant+`"`), ",") + "}"
	}
	req := func(tenant, outcome string) string {
		return key("slogate_tenant_requests_total", tenant, `outcome="`+outcome+`"`)
	}
	tests := []struct {
		name    string
		results []measure.Result
		want    map[string]float64 // non-zero samples; every other one must be 0
	}{{
		name:    "no tenant, no series",
		results: []measure.Result{tenantStream, with(tenantStream, func(r *measure.Result) { r.Outcome = measure.Rejected })},
		want:    map[string]float64{},
	}, {
		name: "outcomes and tokens",
		results: []measure.Result{
			with(tenantStream, func(r *measure.Result) { r.Tenant = "alpha" }),
			with(tenantStream, func(r *measure.Result) {
				r.Tenant, r.Outcome, r.Status, r.OutputTokens, r.Tokens = "alpha", measure.ClientCancelled, 499, 7, measure.TokensChunks
			}),
			with(tenantStream, func(r *measure.Result) {
				r.Tenant, r.Outcome, r.Status, r.InputTokens, r.OutputTokens, r.Tokens = "beta", measure.Rejected, 429, 0, 0, measure.TokensNone
			}),
		},
		want: map[string]float64{
			req("alpha", "ok"): 1, req("alpha", "client_cancelled"): 1, req("beta", "rejected"): 1,
			key("slogate_tenant_input_tokens_total", "alpha"):  600,
			key("slogate_tenant_output_tokens_total", "alpha"): 57,
			// the queue wait of the dispatched two; none for the rejected one
			key("slogate_tenant_queue_wait_seconds_count", "alpha"): 2,
			key("slogate_tenant_queue_wait_seconds_sum", "alpha"):   1,
			// only the stream that ended ok is judged; 1.3 s misses short's 1 s TTFT SLO
			key("slogate_tenant_slo_judged_requests_total", "alpha"): 1,
		},
	}, {
		name: "each judged by its tier's SLO, the queue wait included",
		results: []measure.Result{
			// 1.3 s: within long's 2 s (the sidecar's), not within short's own 1 s
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.Tier = "alpha", "long" }),
			with(tenantStream, func(r *measure.Result) { r.Tenant = "alpha" }),
			// without the wait, 0.8 s: within short's 1 s
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.QueueWait = "beta", 0 }),
			// a TPOT past long's 100 ms
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.Tier, r.TPOT = "beta", "long", 150*time.Millisecond }),
			// a tier admission does not report: the sidecar's SLO (Options, 1.5 s)
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.Tier = "beta", "gone" }),
			// not classified (no queue wait observed): the sidecar's SLO too
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.Tier, r.QueueWait = "beta", "", 0 }),
			// neither judged: not streamed, or no output
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.Stream = "beta", false }),
			with(tenantStream, func(r *measure.Result) { r.Tenant, r.OutputChunks = "beta", 0 }),
		},
		want: map[string]float64{
			req("alpha", "ok"): 2, req("beta", "ok"): 6,
			key("slogate_tenant_input_tokens_total", "alpha"):        600,
			key("slogate_tenant_output_tokens_total", "alpha"):       100,
			key("slogate_tenant_input_tokens_total", "beta"):         1800,
			key("slogate_tenant_output_tokens_total", "beta"):        300,
			key("slogate_tenant_queue_wait_seconds_count", "alpha"):  2,
			key("slogate_tenant_queue_wait_seconds_sum", "alpha"):    1,
			key("slogate_tenant_queue_wait_seconds_count", "beta"):   5,
			key("slogate_tenant_queue_wait_seconds_sum", "beta"):     2,
			key("slogate_tenant_slo_judged_requests_total", "alpha"): 2,
			key("slogate_tenant_slo_met_requests_total", "alpha"):    1,
			key("slogate_tenant_slo_judged_requests_total", "beta"):  4,
			key("slogate_tenant_slo_met_requests_total", "beta"):     3,
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := newTenantController(t, admission.Enforce, clock.NewFake(time.Unix(1, 0)), testTenants())
			m, reg := newMetrics(t, Options{ServedModels: served("llama"), TTFT: 1500 * time.Millisecond, Admission: ctrl})
			for _, res := range tc.results {
				m.Observe(wire.Request{Route: res.Route, Model: "llama", Stream: res.Stream}, res)
			}
			got := exposed(t, reg, "slogate_tenant_")
			for k := range got {
				if strings.Contains(k, "_budget_") || !strings.Contains(k, "_total") && !strings.Contains(k, "queue_wait") {
					delete(got, k) // the gauges have a test of their own
				}
			}
			checkNonZero(t, got, tc.want)
		})
	}
}

func TestTenantDecisions(t *testing.T) {
	const name = "slogate_tenant_admission_decisions_total"
	key := func(tenant, decision, reason string) string {
		return name + `{decision="` + decision + `",reason="` + reason + `",tenant="` + tenant + `"}`
	}
	tests := []struct {
		name      string
		decisions []admission.Decision
		want      map[string]float64
	}{{
		name: "by tenant, verdict and reason",
		decisions: []admission.Decision{
			{Tier: "short", Tenant: "alpha", Verdict: admission.Admitted},
			{Tier: "long", Tenant: "alpha", Verdict: admission.Admitted},
			{Tier: "short", Tenant: "alpha", Verdict: admission.Rejected, Reason: admission.TenantRequests},
			{Tier: "short", Tenant: "beta", Class: admission.Batch, Verdict: admission.Queued, Reason: admission.InFlightCap},
			{Tier: "short", Tenant: "other", Verdict: admission.Rejected, Reason: admission.TenantOutputTokens, Shadow: true},
		},
		want: map[string]float64{
			key("alpha", "admitted", "none"):                 2,
			key("alpha", "rejected", "tenant-requests"):      1,
			key("beta", "queued", "in-flight-cap"):           1,
			key("other", "rejected", "tenant-output-tokens"): 1,
		},
	}, {
		name: "no tenant, or a probe's: none",
		decisions: []admission.Decision{
			{Tier: "short", Verdict: admission.Rejected, Reason: admission.QueueFull},
			{Tier: "short", Tenant: "alpha", Class: admission.Probe, Verdict: admission.Admitted},
		},
		want: map[string]float64{},
	}, {
		name: "out-of-range enums share the unknown label",
		decisions: []admission.Decision{
			{Tier: "short", Tenant: "beta", Verdict: 201, Reason: 202},
			{Tier: "short", Tenant: "beta", Verdict: 101, Reason: 102},
		},
		want: map[string]float64{key("beta", "unknown", "unknown"): 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newMetrics(t, Options{})
			for _, d := range tc.decisions {
				m.ObserveDecision(d)
			}
			checkExactly(t, exposed(t, reg, name), tc.want)
		})
	}
}

// TestTenantDecisionsFromController counts a real controller's decisions: alpha may have
// one request open, so its second is turned away for its concurrency.
func TestTenantDecisionsFromController(t *testing.T) {
	ts := testTenants()
	ts.Named[0].Budget = admission.Budget{MaxConcurrent: 1}
	var relay decisionRelay
	ctrl := newTenantController(t, admission.Enforce, clock.NewFake(time.Unix(1, 0)), ts, &relay)
	m, reg := newMetrics(t, Options{Admission: ctrl})
	relay.m = m
	r := admission.Request{Model: "llama", Prompt: shortPrompt, Tenant: "alpha"}
	first, err := ctrl.Admit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.Admit(context.Background(), r); err == nil {
		t.Fatal("alpha's second request admitted past its concurrency")
	}
	first.Done(okStream)
	r.Tenant = "nobody" // no tenant of that name: admission's other
	tk, err := ctrl.Admit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done(okStream)
	checkExactly(t, exposed(t, reg, "slogate_tenant_admission_decisions_total"), map[string]float64{
		`slogate_tenant_admission_decisions_total{decision="admitted",reason="none",tenant="alpha"}`:               1,
		`slogate_tenant_admission_decisions_total{decision="rejected",reason="tenant-concurrency",tenant="alpha"}`: 1,
		`slogate_tenant_admission_decisions_total{decision="admitted",reason="none",tenant="other"}`:               1,
	})
}

func TestTenantGauges(t *testing.T) {
	budget := func(name, tenant, budget string) string {
		return name + `{budget="` + budget + `",tenant="` + tenant + `"}`
	}
	tests := []struct {
		name string
		mode admission.Mode
		ts   *admission.Tenants
		want map[string]float64 // besides the fair-share counters
	}{{
		name: "no tenants section",
		mode: admission.Enforce,
		want: map[string]float64{},
	}, {
		name: "admission off",
		mode: admission.Off,
		ts:   testTenants(),
		want: map[string]float64{},
	}, {
		name: "enforce",
		mode: admission.Enforce,
		ts:   testTenants(),
		want: map[string]float64{
			`slogate_tenant_weight{tenant="alpha"}`: 2, `slogate_tenant_weight{tenant="beta"}`: 1, `slogate_tenant_weight{tenant="other"}`: 1,
			`slogate_tenant_open_requests{tenant="alpha"}`: 2, `slogate_tenant_open_requests{tenant="beta"}`: 0, `slogate_tenant_open_requests{tenant="other"}`: 0,
			`slogate_tenant_queued_requests{tenant="alpha"}`: 0, `slogate_tenant_queued_requests{tenant="beta"}`: 0, `slogate_tenant_queued_requests{tenant="other"}`: 0,
			budget("slogate_tenant_budget_limit", "alpha", "requests"):          60,
			budget("slogate_tenant_budget_remaining", "alpha", "requests"):      58,
			budget("slogate_tenant_budget_limit", "alpha", "concurrency"):       4,
			budget("slogate_tenant_budget_remaining", "alpha", "concurrency"):   2,
			budget("slogate_tenant_budget_limit", "other", "input_tokens"):      1000,
			budget("slogate_tenant_budget_remaining", "other", "input_tokens"):  1000,
			budget("slogate_tenant_budget_limit", "other", "output_tokens"):     500,
			budget("slogate_tenant_budget_remaining", "other", "output_tokens"): 500,
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := newTenantController(t, tc.mode, clock.NewFake(time.Unix(1, 0)), tc.ts)
			_, reg := newMetrics(t, Options{Admission: ctrl})
			for range 2 { // two of alpha's requests in flight
				tk, err := ctrl.Admit(context.Background(), admission.Request{Model: "llama", Prompt: shortPrompt, Tenant: "alpha"})
				if err != nil {
					t.Fatal(err)
				}
				defer tk.Done(okStream)
			}
			got := exposed(t, reg, "slogate_tenant_")
			for k := range got {
				if strings.Contains(k, "_total") || strings.Contains(k, "queue_wait") {
					delete(got, k) // the request and decision series have tests of their own
				}
			}
			want := maps.Clone(tc.want)
			if tc.ts != nil && tc.mode != admission.Off {
				// the fair-share counters are admission's: the gauges say what Stats says
				st := ctrl.Stats()
				for _, ten := range st.Tenants {
					want[`slogate_tenant_virtual_tokens{tenant="`+ten.Name+`"}`] = ten.Counter
					want[`slogate_tenant_service_tokens{tenant="`+ten.Name+`"}`] = ten.Service
				}
				if st.Tenants[0].Service != 200 { // alpha's two prompts of 100 tokens, input weight 1
					t.Errorf("alpha's service %v, want 200", st.Tenants[0].Service)
				}
			}
			checkExactly(t, got, want)
		})
	}
}

// TestTenantSeriesPrecreated checks which tenant series exist before any request: every
// per-request series of the tenants admission has, at zero, and no decision counters.
func TestTenantSeriesPrecreated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ts      *admission.Tenants
		tenants []string
	}{
		{"no tenants section", nil, nil},
		{"tenants", testTenants(), []string{"alpha", "beta", "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := newTenantController(t, admission.Shadow, clock.NewFake(time.Unix(1, 0)), tc.ts)
			_, reg := newMetrics(t, Options{Admission: ctrl})
			got := exposed(t, reg, "slogate_tenant_")
			want := map[string]float64{}
			for _, ten := range tc.tenants {
				l := `{tenant="` + ten + `"}`
				for _, o := range measure.Outcomes() {
					want[`slogate_tenant_requests_total{outcome="`+o.String()+`",tenant="`+ten+`"}`] = 0
				}
				for _, n := range []string{"slogate_tenant_input_tokens_total", "slogate_tenant_output_tokens_total",
					"slogate_tenant_slo_judged_requests_total", "slogate_tenant_slo_met_requests_total",
					"slogate_tenant_queue_wait_seconds_count", "slogate_tenant_queue_wait_seconds_sum"} {
					want[n+l] = 0
				}
			}
			for k := range got {
				if !strings.Contains(k, "_total") && !strings.Contains(k, "queue_wait") {
					delete(got, k) // gauges
				}
			}
			checkExactly(t, got, want)
		})
	}
}

// TestTenantLabelBoundedByController feeds 10,000 distinct identities through a real
// controller — its Tenant names them, it decides on them, and their results are
// observed — and checks that every tenant metric has only the named tenants and other
// as label values.
func TestTenantLabelBoundedByController(t *testing.T) {
	ts := testTenants()
	ts.Named[0].Budget, ts.Other.Budget = admission.Budget{}, admission.Budget{} // no budget turns anyone away
	var relay decisionRelay
	ctrl := newTenantController(t, admission.Enforce, clock.NewFake(time.Unix(1, 0)), ts, &relay)
	m, reg := newMetrics(t, Options{ServedModels: served("llama"), Admission: ctrl})
	relay.m = m
	const identities = 10000
	h := http.Header{}
	for i := range identities {
		h.Set(tenantHeader, fmt.Sprintf("client-%d", i))
		if i%100 == 0 {
			h.Set(tenantHeader, []string{"alpha", "beta"}[i/100%2])
		}
		name := ctrl.Tenant(h)
		tk, err := ctrl.Admit(context.Background(), admission.Request{Model: "llama", Prompt: shortPrompt, Tenant: name})
		if err != nil {
			t.Fatal(err)
		}
		res := with(tenantStream, func(r *measure.Result) { r.Tenant, r.Tier = name, tk.Tier() })
		tk.Done(res)
		m.Observe(wire.Request{Route: res.Route, Model: "llama", Stream: true}, res)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"alpha", "beta", "other"} // named + 1
	checked := 0
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "slogate_tenant_") {
			continue
		}
		checked++
		var values []string
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == labelTenant && !slices.Contains(values, l.GetValue()) {
					values = append(values, l.GetValue())
				}
			}
		}
		slices.Sort(values)
		if !slices.Equal(values, want) {
			t.Errorf("%s: tenant label values %q, want %q", f.GetName(), values, want)
		}
	}
	if checked < 12 {
		t.Errorf("%d tenant families, want the 12 fed by requests, decisions and the gauges", checked)
	}
	if n := samples(t, reg, "slogate_tenant_requests_total")[`slogate_tenant_requests_total{outcome="ok",tenant="other"}`]; n != identities-identities/100 {
		t.Errorf("other's requests %v, want %d", n, identities-identities/100)
	}
}

// TestTenantLabelBounded checks the exporter's own bound, for names admission would
// never give (reloads that keep renaming tenants): MaxTenantLabels names and other.
func TestTenantLabelBounded(t *testing.T) {
	m, reg := newMetrics(t, Options{})
	const names = MaxTenantLabels + 8
	for i := range names {
		m.Observe(wire.Request{}, with(tenantStream, func(r *measure.Result) { r.Tenant = fmt.Sprintf("tenant-%d", i) }))
	}
	m.Observe(wire.Request{}, with(tenantStream, func(r *measure.Result) { r.Tenant = admission.OtherTenant }))
	got := samples(t, reg, "slogate_tenant_slo_judged_requests_total")
	if len(got) != MaxTenantLabels+1 {
		t.Errorf("%d series, want %d", len(got), MaxTenantLabels+1)
	}
	for k, want := range map[string]float64{
		`slogate_tenant_slo_judged_requests_total{tenant="tenant-0"}`:   1,
		`slogate_tenant_slo_judged_requests_total{tenant="tenant-127"}`: 1,
		`slogate_tenant_slo_judged_requests_total{tenant="other"}`:      9,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if s := m.tenants.lookup("tenant-999"); s.name != admission.OtherTenant {
		t.Errorf("tenant past the limit labelled %q, want %q", s.name, admission.OtherTenant)
	}
}

// TestTenantSLOFollowsReload checks that a reload changing a tier's SLO judges the
// tenants' requests by the new SLO from the next scrape on.
func TestTenantSLOFollowsReload(t *testing.T) {
	ctrl := newTenantController(t, admission.Enforce, clock.NewFake(time.Unix(1, 0)), testTenants())
	m, reg := newMetrics(t, Options{Admission: ctrl})
	res := with(tenantStream, func(r *measure.Result) { r.Tenant = "beta" }) // 1.3 s in short
	m.Observe(wire.Request{}, res)                                           // misses short's 1 s
	cfg := ctrl.Config()
	cfg.Tiers[0].SLO.TTFT = measure.Duration(1500 * time.Millisecond)
	if err := ctrl.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	_ = exposed(t, reg, "slogate_admission_slo_seconds") // a scrape
	m.Observe(wire.Request{}, res)                       // meets 1.5 s
	checkExactly(t, samples(t, reg, "slogate_tenant_slo_"), map[string]float64{
		`slogate_tenant_slo_judged_requests_total{tenant="beta"}`:  2,
		`slogate_tenant_slo_met_requests_total{tenant="beta"}`:     1,
		`slogate_tenant_slo_judged_requests_total{tenant="alpha"}`: 0,
		`slogate_tenant_slo_met_requests_total{tenant="alpha"}`:    0,
		`slogate_tenant_slo_judged_requests_total{tenant="other"}`: 0,
		`slogate_tenant_slo_met_requests_total{tenant="other"}`:    0,
	})
}

func TestTenantMetricsLint(t *testing.T) {
	ctrl := newTenantController(t, admission.Shadow, clock.NewFake(time.Unix(1, 0)), testTenants())
	m, reg := newMetrics(t, Options{NativeHistograms: true, Admission: ctrl})
	m.Observe(wire.Request{}, with(tenantStream, func(r *measure.Result) { r.Tenant = "alpha" }))
	m.ObserveDecision(admission.Decision{Tier: "short", Tenant: "alpha", Verdict: admission.Rejected, Reason: admission.TenantRequests})
	checkLint(t, reg)
}

func TestObserveTenantAllocs(t *testing.T) {
	ctrl := newTenantController(t, admission.Enforce, clock.NewFake(time.Unix(1, 0)), testTenants())
	m, _ := newMetrics(t, Options{ServedModels: served("llama"), Admission: ctrl})
	req := wire.Request{Route: wire.RouteChatCompletions, Model: "llama", Stream: true}
	res := with(tenantStream, func(r *measure.Result) { r.Tenant = "alpha" })
	d := admission.Decision{Tier: "short", Tenant: "alpha", Verdict: admission.Rejected, Reason: admission.TenantRequests}
	m.Observe(req, res) // creates the series
	m.ObserveDecision(d)
	if allocs := testing.AllocsPerRun(1000, func() { m.Observe(req, res) }); allocs != 0 {
		t.Errorf("Observe of a tenant's request allocates %v times, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(1000, func() { m.ObserveDecision(d) }); allocs != 0 {
		t.Errorf("ObserveDecision of a tenant's decision allocates %v times, want 0", allocs)
	}
}
