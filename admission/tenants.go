package admission

import (
	"fmt"
	"math"
	"regexp"
	"slices"

	"github.com/slogate/slogate/tenant"
)

// Tenants is the tenants section of a tiers file: how a request's tenant is derived, the
// named tenants with their weights, budgets and class ceilings, and what applies to
// everyone else. Without it (a nil Tenants), every request belongs to one tenant and
// nothing below applies.
type Tenants struct {
	// Identify derives a request's identity from its headers (tenant.Rule).
	Identify tenant.Rule `yaml:"identify"`
	// Default is the tenant of requests without an identity: a named tenant, or "other"
	// (the default).
	Default string `yaml:"default,omitempty"`
	// Fairness weighs the service a tenant gets, in tokens.
	Fairness Fairness `yaml:"fairness,omitempty"`
	// Named lists the tenants with a name of their own, which is also their metric label.
	Named []TenantConfig `yaml:"named,omitempty"`
	// Other applies to every request whose identity matches no named tenant; its name is
	// always "other". Its weight and budgets are shared by all of them.
	Other TenantConfig `yaml:"other,omitempty"`
}

// UnmarshalYAML decodes the section as written (strictly, as the rest of the file),
// keeping no empty list: an empty named list is none, so that a section reads the same
// after it was written back.
func (ts *Tenants) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Tenants // without this method
	if err := unmarshal((*plain)(ts)); err != nil {
		return err
	}
	if len(ts.Named) == 0 {
		ts.Named = nil
	}
	return nil
}

// Fairness weighs service as the Virtual Token Counter does (Sheng et al., "Fairness in
// Serving Large Language Models", OSDI 2024): a request costs its tenant InputWeight per
// prompt token when it is dispatched and OutputWeight per output token as it streams.
// Zero values take the paper's defaults, 1 and 2.
type Fairness struct {
	InputWeight  float64 `yaml:"input_weight,omitempty"`
	OutputWeight float64 `yaml:"output_weight,omitempty"`
}

// TenantConfig is one tenant.
type TenantConfig struct {
	Name string `yaml:"name,omitempty"`
	// Match lists the identities of the tenant: header or claim values, or tenant.Hash
	// of a bearer token ("sha256:<hex>"). Default: the tenant's name.
	Match []string `yaml:"match,omitempty"`
	// Weight is the tenant's share of service relative to the others', from 0.001 to
	// 1000; default 1.
	Weight float64 `yaml:"weight,omitempty"`
	// MaxClass is the highest priority class the tenant's requests may claim
	// ("interactive", "batch"); a request asking for more is served at the ceiling.
	// Default: interactive (no ceiling).
	MaxClass string `yaml:"max_class,omitempty"`
	// Budget bounds the tenant's use; zero fields are unlimited.
	Budget Budget `yaml:"budget,omitempty"`
}

// UnmarshalYAML decodes a tenant strictly; an empty match list is none (the tenant
// matches its name).
func (tc *TenantConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain TenantConfig // without this method
	if err := unmarshal((*plain)(tc)); err != nil {
		return err
	}
	if len(tc.Match) == 0 {
		tc.Match = nil
	}
	return nil
}

// Budget is what a tenant may use. A request reserves its estimated cost at admission
// (one request, its estimated prompt tokens, and its max_tokens or the tenant's learned
// mean output) and settles it against the engine's usage when it ends, so concurrent
// requests cannot overrun a budget and a short answer is refunded what it did not use.
// The per-minute budgets are token buckets that hold one minute's worth and refill
// continuously.
type Budget struct {
	RequestsPerMinute     float64 `yaml:"requests_per_minute,omitempty"`
	InputTokensPerMinute  float64 `yaml:"input_tokens_per_minute,omitempty"`
	OutputTokensPerMinute float64 `yaml:"output_tokens_per_minute,omitempty"`
	// MaxConcurrent bounds the tenant's requests admitted and not yet ended (waiting in
	// a tier's queue or in flight).
	MaxConcurrent int `yaml:"max_concurrent,omitempty"`
}

// OtherTenant is the name (and metric label) of the tenant of every request whose
// identity matches no named tenant.
const OtherTenant = "other"

// maxTenants bounds the named tenants, and with them the tenant label's values;
// maxWeight bounds the weights (and 1/maxWeight the tenants').
const (
	maxTenants = 64
	maxWeight  = 1000.0
)

var (
	tenantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9_.-]{0,30}[a-z0-9])?$`)
	bearerHash = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) // what tenant.Hash returns
)

// finite reports whether v is a finite number >= 0 (NaN is not).
func finite(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// validate reports the first inconsistent setting of the section.
func (ts *Tenants) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: tenants: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if err := ts.Identify.Validate(); err != nil {
		return bad("identify: %v", err)
	}
	if f := ts.Fairness; !finite(f.InputWeight) || !finite(f.OutputWeight) || f.InputWeight > maxWeight || f.OutputWeight > maxWeight {
		return bad("fairness weights are from 0 to %g", maxWeight)
	}
	if len(ts.Named) > maxTenants {
		return bad("at most %d named tenants, got %d", maxTenants, len(ts.Named))
	}
	if ts.Other.Name != "" || len(ts.Other.Match) > 0 {
		return bad("other takes no name or match: it is every request of no named tenant")
	}
	names := map[string]bool{OtherTenant: true}
	ids := map[string]string{}
	for i, tc := range slices.Concat(ts.Named, []TenantConfig{ts.Other}) { // not append: ts.Named is the caller's
		name := tc.Name
		if i == len(ts.Named) {
			name = OtherTenant
		} else {
			switch {
			case !tenantName.MatchString(name):
				return bad("tenant %d: %q: names are 1-32 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit", i, name)
			case names[name]:
				return bad("tenant %q: duplicate name (or the reserved %q)", name, OtherTenant)
			}
			names[name] = true
			for _, id := range tc.identities() {
				if prev, dup := ids[id]; dup {
					return bad("tenants %q and %q both match %q", prev, name, id)
				}
				if id == "" || len(id) > tenant.MaxIdentity {
					return bad("tenant %q: match values are 1-%d characters", name, tenant.MaxIdentity)
				}
				if ts.Identify.Bearer && len(tc.Match) > 0 && !bearerHash.MatchString(id) {
					// Not quoted: it may be a token pasted in by mistake.
					return bad("tenant %q: with identify bearer, match values are tenant hashes of the tokens (sha256: and 64 lower-case hex digits); one is not", name)
				}
				ids[id] = name
			}
		}
		b := tc.Budget
		switch {
		case !finite(tc.Weight) || tc.Weight != 0 && (tc.Weight < 1/maxWeight || tc.Weight > maxWeight):
			// Counters are service over weight: bounded weights keep them finite.
			return bad("tenant %q: weight is from %g to %g (default 1)", name, 1/maxWeight, maxWeight)
		case tc.MaxClass != "" && tc.MaxClass != "interactive" && tc.MaxClass != "batch":
			return bad("tenant %q: max_class is interactive or batch, got %q", name, tc.MaxClass)
		case !finite(b.RequestsPerMinute) || !finite(b.InputTokensPerMinute) || !finite(b.OutputTokensPerMinute) || b.MaxConcurrent < 0:
			return bad("tenant %q: budgets must be finite and >= 0 (0: unlimited)", name)
		case b.RequestsPerMinute > 0 && b.RequestsPerMinute < 1:
			// The bucket holds a minute's worth, which would never hold one request.
			return bad("tenant %q: requests_per_minute is 0 (unlimited) or at least 1, got %g", name, b.RequestsPerMinute)
		}
	}
	if ts.Default != "" && !names[ts.Default] {
		return bad("default %q is not a named tenant (or %q)", ts.Default, OtherTenant)
	}
	return nil
}

// identities returns what matches the tenant: its Match list, or its name.
func (tc TenantConfig) identities() []string {
	if len(tc.Match) == 0 {
		return []string{tc.Name}
	}
	return tc.Match
}

// class returns the class a request of the tenant asking for c is served at.
func (tc TenantConfig) class(c Class) Class {
	if tc.MaxClass == "batch" && c < Batch {
		return Batch
	}
	return c
}

func (f Fairness) withDefaults() Fairness {
	if f.InputWeight == 0 && f.OutputWeight == 0 {
		return Fairness{InputWeight: 1, OutputWeight: 2}
	}
	return f
}
