package admission

import (
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/tenant"
)

func TestParseTenantsExample(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "tenants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Tenants{
		Identify: tenant.Rule{Header: "X-Tenant"},
		Default:  "batch-jobs",
		Fairness: Fairness{InputWeight: 1, OutputWeight: 2},
		Named: []TenantConfig{
			{Name: "search", Weight: 2, Budget: Budget{RequestsPerMinute: 600, InputTokensPerMinute: 2e6, OutputTokensPerMinute: 2e5, MaxConcurrent: 64}},
			{Name: "assistant", Match: []string{"assistant-web", "assistant-mobile"}, Budget: Budget{OutputTokensPerMinute: 1e5}},
			{Name: "batch-jobs", Match: []string{"nightly"}, Weight: 0.5, MaxClass: "batch"},
		},
		Other: TenantConfig{Weight: 1, Budget: Budget{RequestsPerMinute: 60, MaxConcurrent: 4}},
	}
	if !reflect.DeepEqual(cfg.Tenants, want) {
		t.Fatalf("tenants\n got %+v\nwant %+v", cfg.Tenants, want)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseConfig(out)
	if err != nil {
		t.Fatalf("re-parsing:\n%s\n%v", out, err)
	}
	if !reflect.DeepEqual(again.Tenants, cfg.Tenants) {
		t.Fatalf("round trip changed the tenants:\n%s", out)
	}

	// The example's tenants, as a controller sees them.
	h := newHarness(t, Enforce, cfg)
	var names []string
	for _, ts := range h.c.Stats().Tenants {
		names = append(names, ts.Name)
	}
	if !reflect.DeepEqual(names, []string{"search", "assistant", "batch-jobs", OtherTenant}) {
		t.Fatalf("tenants %v", names)
	}
	if st := h.c.Stats().Tenants[2]; st.MaxClass != Batch || st.Weight != 0.5 {
		t.Fatalf("batch-jobs: %+v", st)
	}
}

// tenantsYAML is a valid tiers file with the given tenants section (indented under
// "tenants:").
func tenantsYAML(section string) string {
	return "tiers: [{name: a, max_in_flight: 1}]\ntenants:\n" + section
}

func TestParseTenantsErrors(t *testing.T) {
	tests := []struct {
		name, section, want string
	}{
		{"unknown section field", "  identify: {header: X-T}\n  named: []\n  weights: 1\n", "field weights not found"},
		{"unknown identify field", "  identify: {headers: X-T}\n", "field headers not found"},
		{"unknown fairness field", "  fairness: {prompt_weight: 1}\n", "field prompt_weight not found"},
		{"unknown tenant field", "  named: [{name: a, wieght: 2}]\n", "field wieght not found"},
		{"unknown budget field", "  named: [{name: a, budget: {rpm: 2}}]\n", "field rpm not found"},
		{"unknown field of other", "  other: {budget: {tpm: 1}}\n", "field tpm not found"},
		{"match not a list", "  named: [{name: a, match: {x: 1}}]\n", "cannot unmarshal"},
		{"weight not a number", "  named: [{name: a, weight: heavy}]\n", "cannot unmarshal"},
		{"max_concurrent not a number", "  named: [{name: a, budget: {max_concurrent: all}}]\n", "cannot unmarshal"},
		{"duplicate key", "  named: [{name: a, name: b}]\n", "already defined"},
		{"NaN budget", "  named: [{name: a, budget: {requests_per_minute: .nan}}]\n", "budgets must be finite"},
		{"infinite budget", "  named: [{name: a, budget: {output_tokens_per_minute: .inf}}]\n", "budgets must be finite"},
		{"two identify sources", "  identify: {header: X-T, bearer: true}\n", "set one of"},
		{"bad header name", "  identify: {header: \"X T\"}\n", "not a header name"},
		{"duplicate name", "  named: [{name: a}, {name: a}]\n", "duplicate name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tenantsYAML(tt.section)))
			wantConfigErr(t, err, tt.want)
		})
	}
}

func TestValidateTenants(t *testing.T) {
	hash := tenant.Hash("sk-a")
	valid := func() *Tenants {
		return &Tenants{
			Identify: tenant.Rule{Header: "X-Tenant"},
			Named: []TenantConfig{
				{Name: "a", Weight: 2, MaxClass: "interactive", Budget: Budget{RequestsPerMinute: 10, InputTokensPerMinute: 1000, OutputTokensPerMinute: 100, MaxConcurrent: 3}},
				{Name: "b", Match: []string{"b1", "b2"}, MaxClass: "batch"},
			},
		}
	}
	named := func(i int, edit func(*TenantConfig)) func(*Tenants) { return func(ts *Tenants) { edit(&ts.Named[i]) } }
	tests := []struct {
		name string
		edit func(*Tenants)
		want string // "" valid
	}{
		{name: "valid", edit: func(*Tenants) {}},
		{name: "no named tenants", edit: func(ts *Tenants) { ts.Named = nil }},
		{name: "no identify: everyone is the default", edit: func(ts *Tenants) { ts.Identify = tenant.Rule{} }},
		{name: "default a named tenant", edit: func(ts *Tenants) { ts.Default = "b" }},
		{name: "default other", edit: func(ts *Tenants) { ts.Default = OtherTenant }},
		{name: "other with a weight and budget", edit: func(ts *Tenants) {
			ts.Other = TenantConfig{Weight: 0.5, MaxClass: "batch", Budget: Budget{MaxConcurrent: 1}}
		}},
		{name: "fairness weights", edit: func(ts *Tenants) { ts.Fairness = Fairness{InputWeight: 0, OutputWeight: 1} }},
		{name: "bearer hashes", edit: func(ts *Tenants) {
			ts.Identify = tenant.Rule{Bearer: true}
			ts.Named = []TenantConfig{{Name: "a", Match: []string{hash}}}
		}},
		{name: "jwt claim", edit: func(ts *Tenants) { ts.Identify = tenant.Rule{JWTClaim: "org.id"} }},
		{name: "64 tenants", edit: func(ts *Tenants) { ts.Named = manyTenants(64) }},
		{name: "the least and most weights", edit: func(ts *Tenants) { ts.Named[0].Weight, ts.Named[1].Weight, ts.Other.Weight = 0.001, 1000, 1 }},
		{name: "a long name", edit: named(0, func(tc *TenantConfig) { tc.Name = strings.Repeat("a", 32) })},
		{name: "huge budgets", edit: named(0, func(tc *TenantConfig) { tc.Budget.RequestsPerMinute, tc.Budget.InputTokensPerMinute = 1.5e308, 1.5e308 })},
		{name: "one request a minute", edit: named(0, func(tc *TenantConfig) { tc.Budget.RequestsPerMinute = 1 })},
		{name: "bearer, the default without a match", edit: func(ts *Tenants) {
			ts.Identify, ts.Default = tenant.Rule{Bearer: true}, "anonymous"
			ts.Named = []TenantConfig{{Name: "a", Match: []string{hash}}, {Name: "anonymous"}}
		}},

		{name: "65 tenants", edit: func(ts *Tenants) { ts.Named = manyTenants(65) }, want: "at most 64"},
		{name: "two identify sources", edit: func(ts *Tenants) { ts.Identify.JWTClaim = "sub" }, want: "set one of"},
		{name: "header, bearer and claim", edit: func(ts *Tenants) { ts.Identify = tenant.Rule{Header: "X", Bearer: true, JWTClaim: "sub"} }, want: "set one of"},
		{name: "empty claim path element", edit: func(ts *Tenants) { ts.Identify = tenant.Rule{JWTClaim: "org..id"} }, want: "empty path element"},
		{name: "duplicate names", edit: named(1, func(tc *TenantConfig) { tc.Name = "a" }), want: `"a": duplicate name`},
		{name: "other is reserved", edit: named(1, func(tc *TenantConfig) { tc.Name = OtherTenant }), want: "reserved"},
		{name: "no name", edit: named(0, func(tc *TenantConfig) { tc.Name = "" }), want: "names are 1-32"},
		{name: "name too long", edit: named(0, func(tc *TenantConfig) { tc.Name = strings.Repeat("a", 33) }), want: "names are 1-32"},
		{name: "upper-case name", edit: named(0, func(tc *TenantConfig) { tc.Name = "Search" }), want: "names are 1-32"},
		{name: "name ending in a dash", edit: named(0, func(tc *TenantConfig) { tc.Name = "a-" }), want: "names are 1-32"},
		{name: "duplicate match values", edit: named(1, func(tc *TenantConfig) { tc.Match = []string{"b1", "a"} }), want: `"a" and "b" both match "a"`},
		{name: "a match value twice in one tenant", edit: named(1, func(tc *TenantConfig) { tc.Match = []string{"b1", "b1"} }), want: `both match "b1"`},
		{name: "empty match value", edit: named(1, func(tc *TenantConfig) { tc.Match = []string{""} }), want: "match values are 1-256"},
		{name: "match value too long", edit: named(1, func(tc *TenantConfig) { tc.Match = []string{strings.Repeat("x", tenant.MaxIdentity+1)} }), want: "match values are 1-256"},
		{name: "bad max_class", edit: named(0, func(tc *TenantConfig) { tc.MaxClass = "probe" }), want: "max_class is interactive or batch"},
		{name: "max_class in capitals", edit: named(0, func(tc *TenantConfig) { tc.MaxClass = "Batch" }), want: "max_class"},
		{name: "bad max_class of other", edit: func(ts *Tenants) { ts.Other.MaxClass = "urgent" }, want: `"other": max_class`},
		{name: "negative weight", edit: named(0, func(tc *TenantConfig) { tc.Weight = -1 }), want: "weight is from 0.001 to 1000"},
		{name: "NaN weight", edit: named(0, func(tc *TenantConfig) { tc.Weight = math.NaN() }), want: "weight is from"},
		{name: "infinite weight", edit: named(0, func(tc *TenantConfig) { tc.Weight = math.Inf(1) }), want: "weight is from"},
		{name: "weight too small", edit: named(0, func(tc *TenantConfig) { tc.Weight = 1e-300 }), want: "weight is from"},
		{name: "weight too large", edit: named(0, func(tc *TenantConfig) { tc.Weight = 1001 }), want: "weight is from"},
		{name: "fairness weight too large", edit: func(ts *Tenants) { ts.Fairness.OutputWeight = 1e300 }, want: "fairness weights are from 0 to 1000"},
		{name: "negative requests per minute", edit: named(0, func(tc *TenantConfig) { tc.Budget.RequestsPerMinute = -1 }), want: "budgets must be finite"},
		{name: "NaN input tokens", edit: named(0, func(tc *TenantConfig) { tc.Budget.InputTokensPerMinute = math.NaN() }), want: "budgets must be finite"},
		{name: "negative output tokens", edit: named(0, func(tc *TenantConfig) { tc.Budget.OutputTokensPerMinute = -5 }), want: "budgets must be finite"},
		{name: "infinite input tokens", edit: named(0, func(tc *TenantConfig) { tc.Budget.InputTokensPerMinute = math.Inf(1) }), want: "budgets must be finite"},
		{name: "under a request a minute", edit: named(0, func(tc *TenantConfig) { tc.Budget.RequestsPerMinute = 0.5 }), want: "at least 1"},
		{name: "bearer match not a hash", edit: func(ts *Tenants) {
			ts.Identify = tenant.Rule{Bearer: true}
			ts.Named[1].Match = []string{"sk-live-secret"}
		}, want: "tenant hashes"},
		{name: "bearer match in upper case", edit: func(ts *Tenants) {
			ts.Identify = tenant.Rule{Bearer: true}
			ts.Named = []TenantConfig{{Name: "a", Match: []string{strings.ToUpper(hash)}}}
		}, want: "tenant hashes"},
		{name: "negative max concurrent", edit: named(0, func(tc *TenantConfig) { tc.Budget.MaxConcurrent = -1 }), want: "budgets must be finite"},
		{name: "negative budget of other", edit: func(ts *Tenants) { ts.Other.Budget.RequestsPerMinute = -1 }, want: `"other": budgets`},
		{name: "NaN fairness", edit: func(ts *Tenants) { ts.Fairness.OutputWeight = math.NaN() }, want: "fairness"},
		{name: "negative fairness", edit: func(ts *Tenants) { ts.Fairness.InputWeight = -1 }, want: "fairness"},
		{name: "infinite fairness", edit: func(ts *Tenants) { ts.Fairness.InputWeight = math.Inf(1) }, want: "fairness"},
		{name: "default unknown", edit: func(ts *Tenants) { ts.Default = "c" }, want: `default "c" is not a named tenant`},
		{name: "other with a name", edit: func(ts *Tenants) { ts.Other.Name = "rest" }, want: "other takes no name or match"},
		{name: "other with a match", edit: func(ts *Tenants) { ts.Other.Match = []string{"x"} }, want: "other takes no name or match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := valid()
			tt.edit(ts)
			err := Config{Tiers: []TierConfig{{Name: "a", MaxInFlight: 1}}, Tenants: ts}.Validate()
			wantConfigErr(t, err, tt.want)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error shows what may be a token: %v", err)
			}
		})
	}
}

// wantConfigErr fails unless err is nil (want "") or an ErrInvalidConfig mentioning want.
func wantConfigErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("err = %v, want nil", err)
	case want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want)):
		t.Fatalf("err = %v, want ErrInvalidConfig mentioning %q", err, want)
	}
}

func manyTenants(n int) []TenantConfig {
	ts := make([]TenantConfig, n)
	for i := range ts {
		ts[i] = TenantConfig{Name: "t" + string(rune('a'+i/26)) + string(rune('a'+i%26))}
	}
	return ts
}

// Validate reads the section and writes nothing, not even past the end of its lists.
func TestValidateTenantsWritesNothing(t *testing.T) {
	named := make([]TenantConfig, 1, 2)
	named[0] = TenantConfig{Name: "a"}
	c := Config{Tiers: []TierConfig{{Name: "a", MaxInFlight: 1}}, Tenants: &Tenants{Named: named, Other: TenantConfig{Weight: 3}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if spare := named[:2][1]; !reflect.DeepEqual(spare, TenantConfig{}) {
		t.Fatalf("Validate wrote %+v into the named list's spare capacity", spare)
	}
}

// tenantsConfig is a one-tier configuration (cap 1, a queue of 8 waiting at most 2s) with a
// tenants section identified by the X-Tenant header.
func tenantsConfig(named []TenantConfig, edits ...func(*Tenants)) Config {
	cfg := tierConfig(func(tc *TierConfig) { tc.MaxQueue = 8 })
	cfg.Tenants = &Tenants{Identify: tenant.Rule{Header: "X-Tenant"}, Named: named}
	for _, e := range edits {
		e(cfg.Tenants)
	}
	return cfg
}

// jwt returns a compact JWS with the given JSON payload and a dummy signature.
func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestControllerTenant(t *testing.T) {
	// The same tenants under each rule: search by its name, assistant and jobs by
	// their match lists.
	named := func(rule tenant.Rule, deflt string) *Tenants {
		assistant, jobs := []string{"web", "42"}, []string{"org-jobs"}
		if rule.Bearer {
			assistant, jobs = []string{tenant.Hash("sk-assistant")}, []string{tenant.Hash("sk-jobs")}
		}
		return &Tenants{Identify: rule, Default: deflt, Named: []TenantConfig{
			{Name: "search"}, {Name: "assistant", Match: assistant}, {Name: "jobs", Match: jobs},
		}}
	}
	header := tenant.Rule{Header: "X-Tenant"}
	bearer := tenant.Rule{Bearer: true}
	claim := tenant.Rule{JWTClaim: "org.id"}
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	auth := func(token string) http.Header { return h("Authorization", "Bearer "+token) }
	tests := []struct {
		name    string
		tenants *Tenants
		header  http.Header
		want    string
	}{
		{"no tenants section", nil, h("X-Tenant", "search"), ""},
		{"header: by name", named(header, ""), h("X-Tenant", "search"), "search"},
		{"header: by a match value", named(header, ""), h("x-tenant", "web"), "assistant"},
		{"header: a name listed by another's match is not a name", named(header, ""), h("X-Tenant", "assistant"), OtherTenant},
		{"header: unknown", named(header, ""), h("X-Tenant", "mallory"), OtherTenant},
		{"header: unknown with a named default", named(header, "jobs"), h("X-Tenant", "mallory"), OtherTenant},
		{"header: absent", named(header, ""), h("X-Other", "search"), OtherTenant},
		{"header: absent, named default", named(header, "jobs"), h(), "jobs"},
		{"header: empty, named default", named(header, "jobs"), h("X-Tenant", " "), "jobs"},
		{"header: too long is no identity", named(header, "jobs"), h("X-Tenant", strings.Repeat("s", tenant.MaxIdentity+1)), "jobs"},
		{"header: case matters", named(header, ""), h("X-Tenant", "Search"), OtherTenant},
		{"bearer: a listed token", named(bearer, ""), auth("sk-assistant"), "assistant"},
		{"bearer: another", named(bearer, ""), auth("sk-jobs"), "jobs"},
		{"bearer: an unknown token", named(bearer, "jobs"), auth("sk-mallory"), OtherTenant},
		{"bearer: the token's hash as the token", named(bearer, ""), auth(tenant.Hash("sk-jobs")), OtherTenant},
		{"bearer: none, named default", named(bearer, "search"), h(), "search"},
		{"bearer: basic auth is none", named(bearer, "search"), h("Authorization", "Basic c2stam9iczo="), "search"},
		{"jwt: a claim by match value", named(claim, ""), auth(jwt(`{"org":{"id":"org-jobs"}}`)), "jobs"},
		{"jwt: a number claim", named(claim, ""), auth(jwt(`{"org":{"id":42}}`)), "assistant"},
		{"jwt: a claim by name", named(claim, ""), auth(jwt(`{"org":{"id":"search"}}`)), "search"},
		{"jwt: unknown claim value", named(claim, "search"), auth(jwt(`{"org":{"id":"acme"}}`)), OtherTenant},
		{"jwt: no such claim", named(claim, "search"), auth(jwt(`{"sub":"jobs"}`)), "search"},
		{"jwt: not a JWT", named(claim, "search"), auth("sk-jobs"), "search"},
		{"no identify rule: the default", named(tenant.Rule{}, "jobs"), h("X-Tenant", "search"), "jobs"},
		{"no identify rule, no default: other", named(tenant.Rule{}, ""), h("X-Tenant", "search"), OtherTenant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tierConfig()
			cfg.Tenants = tt.tenants
			c := newHarness(t, Enforce, cfg).c
			if got := c.Tenant(tt.header); got != tt.want {
				t.Fatalf("Tenant = %q, want %q", got, tt.want)
			}
		})
	}
}

// However many identities clients send, the tenant label takes at most one value per
// named tenant and "other".
func TestTenantLabelBound(t *testing.T) {
	named := []TenantConfig{{Name: "a"}, {Name: "b", Match: []string{"b-1", "b-2"}}, {Name: "c"}}
	c := newHarness(t, Enforce, tenantsConfig(named, func(ts *Tenants) { ts.Default = "c" })).c
	seen := map[string]int{}
	for i := range 10000 {
		id := strconv.Itoa(i)
		switch i % 100 {
		case 0:
			id = "a"
		case 1:
			id = "b-2"
		case 2:
			id = ""
		}
		seen[c.Tenant(http.Header{"X-Tenant": {id}})]++
	}
	if len(seen) > len(named)+1 {
		t.Fatalf("%d distinct tenants from 10000 identities, want at most %d: %v", len(seen), len(named)+1, seen)
	}
	want := map[string]int{"a": 100, "b": 100, "c": 100, OtherTenant: 9700}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("tenants %v, want %v", seen, want)
	}
}
