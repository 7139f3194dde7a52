package admission

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/tenant"
)

// Tenancy: who is asking, fair share inside the tiers, and budgets.
//
// A request's tenant comes from its headers by the tenants section's rule (Tenant). Each
// tenant has a virtual token counter, as in the Virtual Token Counter scheduler (Sheng
// et al., OSDI 2024): its service in tokens — Fairness.InputWeight per prompt token when
// a request is dispatched, Fairness.OutputWeight per output token as it streams —
// divided by its weight, plus the lifts below. Priority classes come first; within a
// class, every queue dispatches next the waiter of the tenant with the lowest counter
// (its oldest), and when the engine frees room the tiers' candidates compete the same
// way, so one tenant flooding one tier cannot take the engine from the others. When a
// tenant with nothing waiting sends a request, its counter is lifted to the lowest of
// the tenants that are waiting (or, with nobody waiting, to the counter of the last
// tenant dispatched): a tenant that sent nothing does not bank credit to flood with
// later. A full queue sheds the newest waiter of the tenant furthest above its share
// for a request of a tenant below it.
//
// Budgets (Budget) are reserved when a request is admitted and settled when it ends
// (reserve, settle).

// tenancy is the live state of the tenants section; guarded by the Controller's lock
// except where noted.
type tenancy struct {
	fair     Fairness
	named    []*tenantState // in the file's order
	other    *tenantState
	lastLeft float64 // the counter of the tenant dispatched last, for the lift rule
}

// resolver maps identities to tenant names; it is replaced whole by a reload and read
// without the Controller's lock.
type resolver struct {
	rule  tenant.Rule
	byID  map[string]string
	deflt string
}

// tenantState is one tenant's live state.
type tenantState struct {
	cfg    TenantConfig // with its weight defaulted
	class  Class        // the highest class its requests are served at
	input  float64      // weighted prompt tokens dispatched
	output atomic.Int64 // output tokens streamed by its requests (the ticket's per-chunk path)
	lift   float64      // what the lift rule added to the counter
	queued int          // its waiters in every tier's queue
	active int          // requests holding a reservation: admitted (queued or in flight), not ended

	requests, inputTok, outputTok bucket
	meanOutput                    float64 // learned mean output of its requests without max_tokens
}

// defaultMeanOutput is the output reserved for a request without max_tokens before a
// tenant's mean is learned.
const defaultMeanOutput = 256

// counter returns the tenant's virtual token counter.
func (ts *tenantState) counter(f Fairness) float64 {
	if ts == nil { // a waiter from before a reload added tenants
		return 0
	}
	return (ts.input+f.OutputWeight*float64(ts.output.Load()))/ts.cfg.Weight + ts.lift
}

// Tenant returns the tenant of a request with headers h: the named tenant its identity
// matches, the default tenant when it has none, else OtherTenant; "" when the tiers file
// has no tenants section. The result is one of a bounded set of names (at most
// maxTenants and OtherTenant), fit for a metric label. Safe for concurrent use; it takes
// no lock.
func (c *Controller) Tenant(h http.Header) string {
	r := c.resolver.Load()
	if r == nil {
		return ""
	}
	id := r.rule.Identity(h)
	if id == "" {
		return r.deflt
	}
	if name, ok := r.byID[id]; ok {
		return name
	}
	return OtherTenant
}

// configureTenants applies a (new) tenants section at now, keeping the live state of
// tenants that keep their name. It runs under the lock.
func (c *Controller) configureTenants(ts *Tenants, now time.Time) {
	if ts == nil {
		c.ten = nil
		c.resolver.Store(nil)
		return
	}
	old := map[string]*tenantState{}
	if c.ten != nil {
		for _, s := range append(c.ten.named, c.ten.other) {
			old[s.cfg.Name] = s
		}
	}
	state := func(tc TenantConfig) *tenantState {
		s, ok := old[tc.Name]
		if !ok {
			s = &tenantState{meanOutput: defaultMeanOutput}
		}
		tc.Weight = orDefault(tc.Weight, 1)
		s.cfg, s.class = tc, tc.class(Interactive)
		s.requests.configure(tc.Budget.RequestsPerMinute, now)
		s.inputTok.configure(tc.Budget.InputTokensPerMinute, now)
		s.outputTok.configure(tc.Budget.OutputTokensPerMinute, now)
		return s
	}
	ten := &tenancy{fair: ts.Fairness.withDefaults()}
	r := &resolver{rule: ts.Identify, byID: map[string]string{}, deflt: orDefault(ts.Default, OtherTenant)}
	for _, tc := range ts.Named {
		ten.named = append(ten.named, state(tc))
		for _, id := range tc.identities() {
			r.byID[id] = tc.Name
		}
	}
	other := ts.Other
	other.Name = OtherTenant
	ten.other = state(other)
	if c.ten != nil {
		ten.lastLeft = c.ten.lastLeft
	}
	c.ten = ten
	c.resolver.Store(r)
}

// tenantOf returns the state of the tenant called name (OtherTenant when no tenant has
// that name), or nil without tenants.
func (c *Controller) tenantOf(name string) *tenantState {
	if c.ten == nil {
		return nil
	}
	for _, s := range c.ten.named {
		if s.cfg.Name == name {
			return s
		}
	}
	return c.ten.other
}

// arrive applies the lift rule to the tenant of a new request, under the lock.
func (c *Controller) arrive(ts *tenantState) {
	if ts == nil || ts.queued > 0 {
		return
	}
	f := c.ten.fair
	floor, waiting := c.ten.lastLeft, false
	for _, s := range append(c.ten.named, c.ten.other) {
		if s.queued > 0 {
			if v := s.counter(f); !waiting || v < floor {
				floor, waiting = v, true
			}
		}
	}
	if v := ts.counter(f); v < floor {
		ts.lift += floor - v
	}
}

// served charges a dispatched request's prompt to its tenant, under the lock.
func (c *Controller) served(tk *Ticket) {
	ts := tk.ten
	if ts == nil {
		return
	}
	ts.input += c.ten.fair.InputWeight * float64(tk.tokens)
	c.ten.lastLeft = ts.counter(c.ten.fair)
}

// before reports whether waiter a goes before waiter b: higher class first, then the
// tenant with the lower counter, then the one that came first.
func (c *Controller) before(a, b *waiter) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if c.ten != nil && a.ticket.ten != b.ticket.ten {
		va, vb := a.ticket.ten.counter(c.ten.fair), b.ticket.ten.counter(c.ten.fair)
		if va != vb {
			return va < vb
		}
	}
	return a.seq < b.seq
}

// next returns the waiter of t to dispatch next, or nil when none waits.
func (c *Controller) next(t *tierState) *waiter {
	for k := Interactive; k < numClasses; k++ {
		var best *waiter
		for _, w := range t.queue[k] {
			if best == nil || c.before(w, best) {
				best = w
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// ahead returns how many waiters of t a new request of tk would wait behind: every one of
// a higher class, and of its own class every one of its own tenant's, with one of every
// other tenant for each of those and itself (a fair queue serves the tenants in turn).
func (c *Controller) ahead(t *tierState, tk *Ticket) int {
	n := 0
	for k := Interactive; k < tk.class; k++ {
		n += len(t.queue[k])
	}
	q := t.queue[tk.class]
	if tk.ten == nil {
		return n + len(q)
	}
	per := map[*tenantState]int{}
	for _, w := range q {
		per[w.ticket.ten]++
	}
	own := per[tk.ten]
	for _, m := range per {
		n += min(m, own+1)
	}
	return n
}

// victim returns the waiter to shed from t's full queue for a new request of tk, or nil:
// the newest of the lowest class below tk's, else — with tenants — the newest waiter of
// its class whose tenant is above tk's tenant's counter, of the tenant highest above it.
func (c *Controller) victim(t *tierState, tk *Ticket) *waiter {
	if w := t.victim(tk.class); w != nil || tk.ten == nil {
		return w
	}
	f := c.ten.fair
	q := t.queue[tk.class]
	var worst *tenantState
	top := tk.ten.counter(f)
	for _, w := range q {
		if s := w.ticket.ten; s != nil && s != tk.ten && s.counter(f) > top {
			worst, top = s, s.counter(f)
		}
	}
	for i := len(q) - 1; i >= 0 && worst != nil; i-- {
		if q[i].ticket.ten == worst {
			return q[i]
		}
	}
	return nil
}
