package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/tenant"
	"github.com/slogate/slogate/wire"
)

// The proxy's side of tenants: every request's tenant reaches admission with its output
// bound and the Observer in its Result, and the responses of a tenant with budgets
// carry the x-ratelimit-* headers OpenAI clients read, admitted or turned away.
// Admission runs on a fake clock that stands still unless a test moves it, so that
// every allowance the headers carry is exact: the budgets refill only when told to.

// tenantsFile is a tiers file with one tier and a tenant for each kind of budget.
const tenantsFile = `
tiers:
  - name: all
    max_in_flight: 64
    max_queue: 8
tenants:
  identify: {header: X-Tenant}
  default: free
  named:
    - name: req
      budget: {requests_per_minute: 3}
    - name: seven
      budget: {requests_per_minute: 7}
    - name: in
      budget: {input_tokens_per_minute: 200}
    - name: out
      budget: {output_tokens_per_minute: 30}
    - name: conc
      budget: {max_concurrent: 1}
    - name: free
  other:
    budget: {requests_per_minute: 1000}
`

// noTenantsFile is a tiers file without a tenants section.
const noTenantsFile = `
tiers:
  - name: all
    max_in_flight: 64
    max_queue: 8
`

// decisions keeps every admission decision. Safe for concurrent use.
type decisions struct {
	mu  sync.Mutex
	got []admission.Decision
}

func (d *decisions) ObserveDecision(x admission.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, x)
}

func (d *decisions) all() []admission.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

// tenantEnv is the simulator with slogate in front, whose admission control reads a
// tiers file with tenants.
type tenantEnv struct {
	mode admission.Mode
	sim  *sim
	f    *front
	clk  *clock.Fake // admission's clock
	dec  *decisions
	log  *simtest.Buffer // the proxy's log, as JSON
}

// startTenantEnv starts a simulator and slogate in front of it, with admission control
// in mode for the tiers file tiers, on a fake clock.
func startTenantEnv(t *testing.T, mode admission.Mode, tiers string) *tenantEnv {
	t.Helper()
	s := startSim(t, enginesim.Config{})
	e := &tenantEnv{mode: mode, sim: s, dec: &decisions{}, log: &simtest.Buffer{}}
	var ctl *admission.Controller
	ctl, e.clk = tenantAdmission(t, mode, tiers, e.dec)
	e.f = startProxy(t, s.hs.URL, proxy.Config{
		InjectUsage: true, Admission: ctl, Logger: slog.New(slog.NewJSONHandler(e.log, nil)),
	})
	return e
}

// tenantAdmission returns admission control in mode for the tiers file tiers, parsed as
// slogate reads a file, on a fake clock, reporting its decisions to dec.
func tenantAdmission(t testing.TB, mode admission.Mode, tiers string, dec admission.DecisionObserver) (*admission.Controller, *clock.Fake) {
	t.Helper()
	cfg, err := admission.ParseConfig([]byte(tiers))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	ctl, err := admission.New(cfg, admission.Options{
		Mode: mode, SLO: measure.NewSLO(2*time.Second, 100*time.Millisecond), Clock: clk,
		Observers: []admission.DecisionObserver{dec},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ctl, clk
}

// shortQuestion is a prompt the simulator answers in a token or two, "4", however
// large max_tokens is.
const shortQuestion = "What is 2 + 2?"

// chatBody returns a chat request for the simulator: content (shortQuestion when ""),
// max_tokens when maxTokens > 0, n when n > 0.
func chatBody(content string, maxTokens, n int, ignoreEOS, stream bool) string {
	if content == "" {
		content = shortQuestion
	}
	body := map[string]any{
		"model":    simModel,
		"messages": []map[string]string{{"role": "user", "content": content}},
		"stream":   stream,
	}
	if maxTokens > 0 {
		body["max_tokens"] = maxTokens
	}
	if n > 0 {
		body["n"] = n
	}
	if ignoreEOS {
		body["ignore_eos"] = true
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// tenantStep is one request of a tenant test and what it must get.
type tenantStep struct {
	advance   time.Duration // admission's clock moves on by this first
	tenant    string        // the X-Tenant header; none when ""
	content   string        // the prompt; shortQuestion when ""
	maxTokens int           // max_tokens; not sent when 0
	n         int           // n; not sent when 0
	ignoreEOS bool          // the answer is max_tokens long

	status int              // what the client gets
	reason admission.Reason // the decision's reason (NoReason: admitted); a 429's too
	retry  string           // a 429's Retry-After-Ms
	final  bool             // a 429 that no retry can turn: x-should-retry: false
	// The x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers as
	// "limit remaining reset", "*" for any value; "" when they must be absent.
	requests, tokens string
	result           string // the Result's (and the decision's) tenant: tenant when "", none when noTenant
}

// noTenant is a tenantStep's result when the request belongs to no tenant.
const noTenant = "(none)"

// run sends the steps' requests one after the other, each once the one before it has
// ended (and settled its reservation), and checks each against its step.
func (e *tenantEnv) run(t *testing.T, steps []tenantStep, stream bool) {
	t.Helper()
	admitted := 0
	for i, st := range steps {
		what := fmt.Sprintf("step %d (tenant %q)", i+1, st.tenant)
		e.clk.Step(st.advance)
		h := http.Header{}
		if st.tenant != "" {
			h.Set("X-Tenant", st.tenant)
		}
		status, header, body := do(t, e.f.hs.Client(), http.MethodPost, e.f.hs.URL+"/v1/chat/completions",
			chatBody(st.content, st.maxTokens, st.n, st.ignoreEOS, stream), h)
		if status != st.status {
			t.Fatalf("%s: status %d, want %d: %s", what, status, st.status, body)
		}
		checkQuota(t, what, header, "requests", st.requests)
		checkQuota(t, what, header, "tokens", st.tokens)
		wantTenant := st.tenant
		switch st.result {
		case "":
		case noTenant:
			wantTenant = ""
		default:
			wantTenant = st.result
		}
		res := e.f.obs.last(t, i+1).res
		if res.Tenant != wantTenant {
			t.Errorf("%s: Result.Tenant %q, want %q", what, res.Tenant, wantTenant)
		}
		if status == http.StatusOK {
			admitted++
			if res.Outcome != measure.OK {
				t.Errorf("%s: outcome %v, want ok", what, res.Outcome)
			}
		} else {
			checkRejection(t, what, header, body, st.reason, st.retry, st.final)
			if res.Outcome != measure.Rejected {
				t.Errorf("%s: outcome %v, want rejected", what, res.Outcome)
			}
		}
		ds := e.dec.all()
		if len(ds) != i+1 {
			t.Fatalf("%s: %d decisions, want %d", what, len(ds), i+1)
		}
		d, verdict := ds[i], admission.Admitted
		if st.reason != admission.NoReason {
			verdict = admission.Rejected
		}
		if d.Verdict != verdict || d.Reason != st.reason || d.Tenant != wantTenant || d.Shadow != (e.mode == admission.Shadow) {
			t.Errorf("%s: decision %+v, want %v (%v) for tenant %q in %v mode", what, d, verdict, st.reason, wantTenant, e.mode)
		}
	}
	e.sim.mu.Lock()
	defer e.sim.mu.Unlock()
	if e.sim.requests != admitted {
		t.Errorf("the simulator got %d requests, want the %d admitted", e.sim.requests, admitted)
	}
}

// checkQuota checks the x-ratelimit-*-what headers against want ("limit remaining
// reset", "*" for any value; "" when they must be absent).
func checkQuota(t *testing.T, what string, h http.Header, kind, want string) {
	t.Helper()
	names := []string{"x-ratelimit-limit-" + kind, "x-ratelimit-remaining-" + kind, "x-ratelimit-reset-" + kind}
	if want == "" {
		for _, n := range names {
			if v, ok := h[http.CanonicalHeaderKey(n)]; ok {
				t.Errorf("%s: %s: %q, want none", what, n, v)
			}
		}
		return
	}
	for i, w := range strings.Fields(want) {
		vs := h.Values(names[i])
		if len(vs) != 1 || w != "*" && vs[0] != w {
			t.Errorf("%s: %s: %q, want %q", what, names[i], vs, w)
		}
	}
}

// checkRejection checks a 429 of admission: its reason in the header and as the OpenAI
// error's code, when to retry in both headers OpenAI clients read, and whether to retry
// at all (x-should-retry: false on a final rejection, absent otherwise).
func checkRejection(t *testing.T, what string, h http.Header, body []byte, reason admission.Reason, retryMs string, final bool) {
	t.Helper()
	if got, want := h.Get("X-Should-Retry"), map[bool]string{true: "false"}[final]; got != want {
		t.Errorf("%s: x-should-retry %q, want %q", what, got, want)
	}
	if got := h.Get("X-Slogate-Reason"); got != reason.String() {
		t.Errorf("%s: X-Slogate-Reason %q, want %q", what, got, reason)
	}
	if got := h.Get("Retry-After-Ms"); got != retryMs {
		t.Errorf("%s: Retry-After-Ms %q, want %q", what, got, retryMs)
	}
	var ms int
	if _, err := fmt.Sscan(retryMs, &ms); err != nil {
		t.Fatalf("%s: bad test: Retry-After-Ms %q", what, retryMs)
	}
	if got, want := h.Get("Retry-After"), fmt.Sprint(max((ms+999)/1000, 1)); got != want {
		t.Errorf("%s: Retry-After %q, want %q", what, got, want)
	}
	e := apiError(t, body)
	if e.Code != reason.String() || e.Type != wire.TypeRateLimit {
		t.Errorf("%s: error code %v of type %q, want %q of type %q", what, e.Code, e.Type, reason, wire.TypeRateLimit)
	}
}

// TestTenantQuota checks what a tenant's requests get, streaming or not, request by
// request: the x-ratelimit-* headers of its budgets with the allowance left falling as
// requests are admitted (rounded down) and the time until the budget is whole (rounded
// up to the millisecond); the 429 of each per-minute budget, with those headers, when to
// retry and the OpenAI error whose code is the reason; no such headers for a tenant
// without budgets, nor without a tenants section; shadow mode sending the headers and
// refusing nothing while recording the decisions enforce would take; the output budget
// reserving max_tokens × n; and the tenant of every Result and decision.
func TestTenantQuota(t *testing.T) {
	cases := []struct {
		name  string
		mode  admission.Mode // default Enforce
		tiers string         // default tenantsFile
		steps []tenantStep
	}{
		{
			// A budget of 3 a minute holds 3 and refills one every 20 s.
			name: "requests budget spent, turned away, refilled",
			steps: []tenantStep{
				{tenant: "req", status: 200, requests: "3 2 20s"},
				{tenant: "req", status: 200, requests: "3 1 40s"},
				{tenant: "req", status: 200, requests: "3 0 1m0s"},
				{tenant: "req", status: 429, reason: admission.TenantRequests, retry: "20000", requests: "3 0 1m0s"},
				{tenant: "req", advance: 19 * time.Second, status: 429, reason: admission.TenantRequests, retry: "1000", requests: "3 0 41s"},
				{tenant: "req", advance: time.Second, status: 200, requests: "3 0 1m0s"},
			},
		},
		{
			// 7 a minute: one missing is 8.571428...s until whole, sent as 8.572s; 6 s
			// later 6.7 are left, and 5.7 once the next request is taken: sent as 5.
			name: "remaining rounded down, reset rounded up",
			steps: []tenantStep{
				{tenant: "seven", status: 200, requests: "7 6 8.572s"},
				{tenant: "seven", advance: 6 * time.Second, status: 200, requests: "7 5 11.143s"},
			},
		},
		{
			// Each answer is exactly max_tokens long: its reservation of 8 is what it
			// is charged. The fourth needs 8 with 6 left: 2 more come in 4 s.
			name: "output budget reserves max_tokens",
			steps: []tenantStep{
				{tenant: "out", maxTokens: 8, ignoreEOS: true, status: 200, tokens: "30 22 16s"},
				{tenant: "out", maxTokens: 8, ignoreEOS: true, status: 200, tokens: "30 14 32s"},
				{tenant: "out", maxTokens: 8, ignoreEOS: true, status: 200, tokens: "30 6 48s"},
				{tenant: "out", maxTokens: 8, ignoreEOS: true, status: 429, reason: admission.TenantOutputTokens, retry: "4000", tokens: "30 6 48s"},
			},
		},
		{
			// A bound above a minute's budget can never be served: turned away at once,
			// with the budget untouched. The bound is max_tokens × n.
			name: "output bound above the budget",
			steps: []tenantStep{
				{tenant: "out", maxTokens: 31, status: 429, reason: admission.TenantOutputTokens, retry: "60000", final: true, tokens: "30 30 0s"},
				{tenant: "out", maxTokens: 16, n: 2, status: 429, reason: admission.TenantOutputTokens, retry: "60000", final: true, tokens: "30 30 0s"},
				{tenant: "out", maxTokens: 16, n: 1, ignoreEOS: true, status: 200, tokens: "30 14 32s"},
			},
		},
		{
			// The first prompt is estimated at 14 bytes / 4 = 4 tokens; the second, of
			// 4000 bytes, at 250 or more (whatever ratio was learned), more than a minute's
			// budget.
			name: "input budget",
			steps: []tenantStep{
				{tenant: "in", status: 200, tokens: "200 196 1.2s"},
				{tenant: "in", content: strings.Repeat("x", 4000), status: 429, reason: admission.TenantInputTokens, retry: "60000", final: true, tokens: "200 * *"},
			},
		},
		{
			name: "no budgets, the default and everyone else",
			steps: []tenantStep{
				{tenant: "free", status: 200},
				{status: 200, result: "free"},
				{tenant: "conc", status: 200},
				{tenant: "a-stranger", status: 200, result: admission.OtherTenant, requests: "1000 999 60ms"},
				{tenant: "another-stranger", status: 200, result: admission.OtherTenant, requests: "1000 998 120ms"},
			},
		},
		{
			name:  "no tenants section",
			tiers: noTenantsFile,
			steps: []tenantStep{
				{tenant: "req", status: 200, result: noTenant},
				{status: 200, result: noTenant},
			},
		},
		{
			// Shadow mode refuses nothing but records what enforce would do, on the same
			// state: the fourth and fifth are over the budget, and reserve nothing.
			name: "shadow",
			mode: admission.Shadow,
			steps: []tenantStep{
				{tenant: "req", status: 200, requests: "3 2 20s"},
				{tenant: "req", status: 200, requests: "3 1 40s"},
				{tenant: "req", status: 200, requests: "3 0 1m0s"},
				{tenant: "req", status: 200, reason: admission.TenantRequests, requests: "3 0 1m0s"},
				{tenant: "req", status: 200, reason: admission.TenantRequests, requests: "3 0 1m0s"},
				{tenant: "out", maxTokens: 31, status: 200, reason: admission.TenantOutputTokens, tokens: "30 30 0s"},
			},
		},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", tc.name, stream), func(t *testing.T) {
				mode, tiers := tc.mode, tc.tiers
				if mode == admission.Off {
					mode = admission.Enforce
				}
				if tiers == "" {
					tiers = tenantsFile
				}
				startTenantEnv(t, mode, tiers).run(t, tc.steps, stream)
			})
		}
	}
}

// TestTenantRefund checks that a short answer gives back what its max_tokens reserved
// and it did not use: the first request reserves 20 of the tenant's 30 output tokens a
// minute and its answer is a token or two, so the second, which reserves 20 again on a
// clock that has not moved, is admitted only because the first was refunded.
func TestTenantRefund(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			e := startTenantEnv(t, admission.Enforce, tenantsFile)
			h := http.Header{"X-Tenant": {"out"}}
			post := func() (int, http.Header, []byte) {
				return do(t, e.f.hs.Client(), http.MethodPost, e.f.hs.URL+"/v1/chat/completions", chatBody("", 20, 0, false, stream), h)
			}
			status, header, body := post()
			if status != http.StatusOK {
				t.Fatalf("first request: status %d: %s", status, body)
			}
			checkQuota(t, "first request", header, "tokens", "30 10 40s")
			first := e.f.obs.last(t, 1).res
			used := first.OutputTokens
			if first.Tokens != measure.TokensUsage || used < 1 || used > 10 {
				t.Fatalf("first answer: %d output tokens from %v, want 1-10 from usage (the test needs a short answer)", used, first.Tokens)
			}
			if got := outputRemaining(t, e.f.ledger, "out"); got != float64(30-used) {
				t.Errorf("after the first answer (%d tokens) the tenant has %v output tokens left, want %d", used, got, 30-used)
			}

			status, header, body = post()
			if status != http.StatusOK {
				t.Fatalf("second request: status %d, want 200 from the first's refund: %s", status, body)
			}
			checkQuota(t, "second request", header, "tokens", fmt.Sprintf("30 %d %s", 10-used, time.Duration(20+used)*2*time.Second))
			e.f.obs.last(t, 2)
		})
	}
}

// outputRemaining returns what is left of the output budget of tenant name.
func outputRemaining(t *testing.T, ctl *admission.Controller, name string) float64 {
	t.Helper()
	for _, ts := range ctl.Stats().Tenants {
		if ts.Name == name {
			return ts.Quota.OutputTokens.Remaining
		}
	}
	t.Fatalf("no tenant %q in admission's stats", name)
	return 0
}

// TestTenantConcurrency checks the concurrency budget: while one request of a tenant
// allowed one at a time streams, its next is turned away with tenant-concurrency (and
// no x-ratelimit-* headers: the tenant has no per-minute budget), another tenant's is
// served, and once the first has ended the tenant's next is served again.
func TestTenantConcurrency(t *testing.T) {
	e := startTenantEnv(t, admission.Enforce, tenantsFile)
	client, url := e.f.hs.Client(), e.f.hs.URL+"/v1/chat/completions"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := fault("stall_after=1")
	hold.Set("X-Tenant", "conc")
	resp := send(ctx, t, client, http.MethodPost, url, chatBody("tell me a story", 100, 0, true, true), hold)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: status %d", resp.StatusCode)
	}
	if got := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() == 1 }); got.outputs() != 1 {
		t.Fatalf("first request: %d outputs before the stall, want 1 (%v)", got.outputs(), got.err)
	}

	status, header, body := do(t, client, http.MethodPost, url, chatBody("", 8, 0, false, false), http.Header{"X-Tenant": {"conc"}})
	if status != http.StatusTooManyRequests {
		t.Fatalf("second request of the tenant: status %d, want 429: %s", status, body)
	}
	checkRejection(t, "second request", header, body, admission.TenantConcurrency, "1000", false)
	checkQuota(t, "second request", header, "requests", "")
	checkQuota(t, "second request", header, "tokens", "")
	if res := e.f.obs.last(t, 1).res; res.Tenant != "conc" || res.Outcome != measure.Rejected {
		t.Errorf("second request: tenant %q, outcome %v; want conc, rejected", res.Tenant, res.Outcome)
	}
	if status, _, body := do(t, client, http.MethodPost, url, chatBody("", 8, 0, false, false), http.Header{"X-Tenant": {"free"}}); status != http.StatusOK {
		t.Fatalf("another tenant's request: status %d, want 200: %s", status, body)
	}
	e.f.obs.last(t, 2)

	cancel()
	if res := e.f.obs.last(t, 3).res; res.Tenant != "conc" || res.Outcome != measure.ClientCancelled {
		t.Errorf("first request: tenant %q, outcome %v; want conc, client_cancelled", res.Tenant, res.Outcome)
	}
	if status, _, body := do(t, client, http.MethodPost, url, chatBody("", 8, 0, false, false), http.Header{"X-Tenant": {"conc"}}); status != http.StatusOK {
		t.Fatalf("the tenant's request after the first ended: status %d, want 200: %s", status, body)
	}
	e.f.obs.last(t, 4)
}

// TestTenantCredentials checks tenants told apart by their bearer tokens: each request's
// Result and access-log line name its tenant, and neither they nor the log holds the
// token, or the hash of one that matches no tenant.
func TestTenantCredentials(t *testing.T) {
	const (
		known   = "sk-acme-0123456789abcdef"
		unknown = "sk-stranger-fedcba9876543210"
	)
	tiers := fmt.Sprintf(`
tiers:
  - name: all
    max_in_flight: 8
    max_queue: 8
tenants:
  identify: {bearer: true}
  named:
    - name: acme
      match: [%q]
      budget: {requests_per_minute: 100}
`, tenant.Hash(known))
	e := startTenantEnv(t, admission.Enforce, tiers)
	cases := []struct {
		name, token, tenant string
	}{
		{"named", known, "acme"},
		{"other", unknown, admission.OtherTenant},
		{"none", "", admission.OtherTenant},
	}
	for i, tc := range cases {
		h := http.Header{}
		if tc.token != "" {
			h.Set("Authorization", "Bearer "+tc.token)
		}
		status, _, body := do(t, e.f.hs.Client(), http.MethodPost, e.f.hs.URL+"/v1/chat/completions", chatBody("", 4, 0, false, i%2 == 1), h)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tc.name, status, body)
		}
		res := e.f.obs.last(t, i+1).res
		if res.Tenant != tc.tenant {
			t.Errorf("%s: Result.Tenant %q, want %q", tc.name, res.Tenant, tc.tenant)
		}
		simtest.NoSecrets(t, tc.name+": the Result", fmt.Sprintf("%+v", res), []string{known, unknown, tenant.Hash(unknown)})
	}
	log := e.log.String()
	simtest.NoSecrets(t, "the access log", log, []string{known, unknown, tenant.Hash(known), tenant.Hash(unknown)})
	var tenants []string
	for line := range strings.Lines(log) {
		var rec struct{ Msg, Tenant string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "request" {
			tenants = append(tenants, rec.Tenant)
		}
	}
	if want := []string{"acme", admission.OtherTenant, admission.OtherTenant}; !slices.Equal(tenants, want) {
		t.Errorf("the access log names the tenants %q, want %q", tenants, want)
	}
}

// TestTenantClassCeiling: a tenant capped at batch that asks for interactive is served,
// and logged, as batch; another tenant keeps the class it asked for.
func TestTenantClassCeiling(t *testing.T) {
	e := startTenantEnv(t, admission.Enforce, `
tiers:
  - name: all
    max_in_flight: 8
    max_queue: 8
tenants:
  identify: {header: X-Tenant}
  named:
    - {name: etl, max_class: batch}
    - {name: chat}
`)
	for i, tc := range []struct{ tenant, want string }{{"etl", "batch"}, {"chat", "interactive"}} {
		h := http.Header{"X-Tenant": {tc.tenant}, admission.PriorityHeader: {"interactive"}}
		if status, _, body := do(t, e.f.hs.Client(), http.MethodPost, e.f.hs.URL+"/v1/chat/completions", chatBody("", 4, 0, false, false), h); status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tc.tenant, status, body)
		}
		e.f.obs.last(t, i+1)
	}
	var classes []string
	for line := range strings.Lines(e.log.String()) {
		var rec struct{ Msg, Class string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "request" {
			classes = append(classes, rec.Class)
		}
	}
	if want := []string{"batch", "interactive"}; !slices.Equal(classes, want) {
		t.Errorf("the access log says classes %q, want %q", classes, want)
	}
}

// tenantSet is an Observer that keeps the distinct tenants of the Results it sees.
// Safe for concurrent use.
type tenantSet struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *tenantSet) Observe(_ wire.Request, res measure.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[res.Tenant]++
}

// TestTenantLabelBound checks that the tenant in a Result, a metric label, takes only
// the tenants section's names, whatever clients send: 10,000 requests, each with an
// X-Tenant of its own but for every 50th of the two named tenants, give Results of at
// most the named tenants and "other". Everyone else shares other's budget, which turns
// most of them away: rejections are reported with their tenant too.
func TestTenantLabelBound(t *testing.T) {
	const (
		requests = 10000
		workers  = 8
		tiers    = `
tiers:
  - name: all
    max_in_flight: 64
    max_queue: 0
tenants:
  identify: {header: X-Tenant}
  named:
    - name: a
    - name: b
  other:
    budget: {requests_per_minute: 100}
`
	)
	s := startSim(t, enginesim.Config{})
	seen := &tenantSet{}
	ctl, _ := tenantAdmission(t, admission.Enforce, tiers, &decisions{})
	f := startProxyKeeping(t, s.hs.URL, proxy.Config{InjectUsage: true, Admission: ctl, Observers: []proxy.Observer{seen}}, 1)
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	body := chatBody("", 1, 0, false, false)
	for range workers {
		wg.Go(func() {
			for i := range next {
				id := fmt.Sprintf("client-%05d", i)
				switch i % 50 {
				case 0:
					id = "a"
				case 1:
					id = "b"
				}
				if err := post(f.hs.Client(), f.hs.URL+"/v1/chat/completions", body, id); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	func() {
		defer close(next)
		for i := range requests {
			select {
			case next <- i:
			case err := <-errs:
				t.Fatal(err)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f.obs.last(t, requests)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	named := []string{"a", "b"}
	want := map[string]int{"a": requests / 50, "b": requests / 50, admission.OtherTenant: requests - 2*requests/50}
	if len(seen.n) > len(named)+1 || len(seen.n) != len(want) {
		names := slices.Sorted(maps.Keys(seen.n))
		t.Fatalf("Results of %d tenants, want at most %d: %q", len(names), len(named)+1, names[:min(len(names), 8)])
	}
	for name, n := range want {
		if seen.n[name] != n {
			t.Errorf("tenant %q: %d Results, want %d", name, seen.n[name], n)
		}
	}
	var names []string
	for _, ts := range ctl.Stats().Tenants {
		names = append(names, ts.Name)
	}
	if !slices.Equal(names, []string{"a", "b", admission.OtherTenant}) {
		t.Errorf("admission keeps the tenants %q, want a, b and other", names)
	}
}

// post sends a request of tenant id and reads its answer: 200, or other's 429.
func post(client *http.Client, url, body, id string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant", id)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Errorf("tenant %q: status %d", id, resp.StatusCode)
	}
	return nil
}
