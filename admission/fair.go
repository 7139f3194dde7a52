package admission

import (
	"math"
	"net/http"
	"slices"
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
// later. Between tenants level on their counters — as the lift leaves them — the one
// served less without its lifts goes first, so a tenant returning to a queue full of
// another's requests is served next, then the two take turns. A full queue sheds the
// newest waiter of the tenant furthest above its share for a request of a tenant below
// it, judged by their counters with the cost of their waiters in the queue added: the
// lift leaves a tenant arriving at a queue full of another's requests level with it,
// and only what each has waiting tells them apart.
//
// Budgets (Budget) are reserved when a request is admitted and settled when it ends
// (reserve, settle).

// tenancy is the live state of the tenants section; guarded by the Controller's lock
// except where noted.
type tenancy struct {
	fair     Fairness
	named    []*tenantState // in the file's order
	other    *tenantState
	all      []*tenantState // named, then other
	lastLeft float64        // the counter of the tenant dispatched last, for the lift rule
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
	fair   Fairness     // of the section that last configured it (a reload may remove it)
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
	return ts.service(f) + ts.lift
}

// service returns the tenant's weighted service over its weight: its counter without
// the lifts.
func (ts *tenantState) service(f Fairness) float64 {
	if ts == nil {
		return 0
	}
	return (ts.input + f.OutputWeight*float64(ts.output.Load())) / ts.cfg.Weight
}

// cost returns what tk's request will add to its tenant's counter, as its reservation
// estimates it: its prompt, and its output bound or else the tenant's mean output.
func (ts *tenantState) cost(tk *Ticket) float64 {
	out := float64(tk.output)
	if tk.output == 0 {
		out = ts.meanOutput
	}
	return (ts.fair.InputWeight*float64(tk.tokens) + ts.fair.OutputWeight*out) / ts.cfg.Weight
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
		for _, s := range c.ten.all {
			old[s.cfg.Name] = s
		}
	}
	ten := &tenancy{fair: ts.Fairness.withDefaults()}
	state := func(tc TenantConfig) *tenantState {
		s, ok := old[tc.Name]
		if !ok {
			s = &tenantState{meanOutput: defaultMeanOutput}
		}
		tc.Weight = orDefault(tc.Weight, 1)
		s.cfg, s.class, s.fair = tc, tc.class(Interactive), ten.fair
		s.requests.configure(tc.Budget.RequestsPerMinute, now)
		s.inputTok.configure(tc.Budget.InputTokensPerMinute, now)
		s.outputTok.configure(tc.Budget.OutputTokensPerMinute, now)
		return s
	}
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
	ten.named = slices.Clip(ten.named) // so that appending other to it copies
	ten.all = append(ten.named, ten.other)
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
	for _, s := range c.ten.all {
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

// served charges a dispatched request's prompt to its tenant, under the lock. The
// tenant may be of a section a reload has removed since (c.ten nil).
func (c *Controller) served(tk *Ticket) {
	ts := tk.ten
	if ts == nil {
		return
	}
	ts.input += ts.fair.InputWeight * float64(tk.tokens)
	if c.ten != nil {
		c.ten.lastLeft = ts.counter(c.ten.fair)
	}
}

// before reports whether waiter a goes before waiter b: higher class first, then the
// tenant with the lower counter, then — level on their counters, as the lift leaves a
// tenant — the one with less service without its lifts, then the one that came first.
func (c *Controller) before(a, b *waiter) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if ta, tb := a.ticket.ten, b.ticket.ten; c.ten != nil && ta != tb {
		f := c.ten.fair
		if va, vb := ta.counter(f), tb.counter(f); va != vb {
			return va < vb
		}
		if va, vb := ta.service(f), tb.service(f); va != vb {
			return va < vb
		}
	}
	return a.seq < b.seq
}

// shares is who has requests in a tier (in flight or waiting), for the slots each may
// use; it is read under the lock, and holds until the tier's state changes.
type shares struct {
	t       *tierState
	present map[*tenantState]bool // nil without tenants
	weights float64               // the weights of the tenants present
}

// shares returns who has requests in t now.
func (c *Controller) shares(t *tierState) shares {
	sh := shares{t: t}
	if c.ten == nil {
		return sh
	}
	sh.present = map[*tenantState]bool{}
	add := func(s *tenantState) {
		if s != nil && !sh.present[s] {
			sh.present[s] = true
			sh.weights += s.cfg.Weight
		}
	}
	for s := range t.held {
		add(s)
	}
	for _, q := range t.queue {
		for _, w := range q {
			add(w.ticket.ten)
		}
	}
	return sh
}

// slots returns how many requests may be in flight in the tier when the next one is
// tk's: the tier's slots for its class, and — when other tenants also have requests in
// the tier — no more than a lower class gets while tk's tenant already holds its
// weighted share of them or more. So a tenant flooding a tier leaves room for the
// others' requests to start at once, as higher classes have the room lower ones leave;
// alone in the tier, it may use all of it.
func (sh shares) slots(tk *Ticket) int {
	t, ts := sh.t, tk.ten
	n := t.slots(tk.class)
	if ts == nil || sh.present == nil || n == t.slots(Batch) || t.held[ts] == 0 {
		return n // no tenant, headroom already left (a lower class, a cap below 5), or below any share
	}
	w := sh.weights
	if !sh.present[ts] {
		w += ts.cfg.Weight
	}
	if w == ts.cfg.Weight || float64(t.held[ts]) < float64(n)*ts.cfg.Weight/w {
		return n // alone in the tier, or below its share
	}
	return t.slots(Batch)
}

// first reports whether a new request of tk may start in t before every waiter: none
// that would go before it (Controller.before, as the last to arrive) has room to start
// (shares.slots, and the tier's bound on prompts in prefill). Without tenants, that is
// when nobody of its class or a higher one waits; with them, a tenant below the waiting
// tenants' counters, or whose waiters are held back by their share of the slots, goes
// first.
func (c *Controller) first(t *tierState, tk *Ticket, sh shares) bool {
	me := waiter{class: tk.class, ticket: tk, seq: math.MaxUint64}
	for k := Interactive; k <= tk.class; k++ {
		for _, w := range t.queue[k] {
			if c.before(w, &me) && t.inFlight < sh.slots(w.ticket) && t.prefillRoom(w.tokens) {
				return false
			}
		}
	}
	return true
}

// ready returns the waiter of t to dispatch next — the first by Controller.before of
// the highest class waiting, among those with room to start — or nil when none has room.
func (c *Controller) ready(t *tierState) *waiter {
	if t.queued == 0 {
		return nil
	}
	sh := c.shares(t)
	for k := Interactive; k < numClasses; k++ {
		var best *waiter
		for _, w := range t.queue[k] {
			if t.inFlight < sh.slots(w.ticket) && t.prefillRoom(w.tokens) && (best == nil || c.before(w, best)) {
				best = w
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
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
// its class of the tenant standing highest above tk's tenant. A tenant's standing is its
// counter plus the cost of its waiters in the queue (and, for tk's tenant, of tk): where
// each would be once the queue is served.
func (c *Controller) victim(t *tierState, tk *Ticket) *waiter {
	if w := t.victim(tk.class); w != nil || tk.ten == nil || c.ten == nil {
		return w
	}
	f := c.ten.fair
	q := t.queue[tk.class]
	standing := map[*tenantState]float64{tk.ten: tk.ten.counter(f) + tk.ten.cost(tk)}
	for _, w := range q {
		if s := w.ticket.ten; s != nil {
			if _, seen := standing[s]; !seen {
				standing[s] = s.counter(f)
			}
			standing[s] += s.cost(w.ticket)
		}
	}
	var worst *tenantState
	top := standing[tk.ten]
	for _, w := range q { // in the queue's order, so that ties go the same way every time
		if s := w.ticket.ten; s != nil && standing[s] > top {
			worst, top = s, standing[s]
		}
	}
	for i := len(q) - 1; i >= 0 && worst != nil; i-- {
		if q[i].ticket.ten == worst {
			return q[i]
		}
	}
	return nil
}
