package admission

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
)

// treq is an interactive request of tenant of exactly n input tokens.
func treq(tenant string, n int) Request { r := req(n); r.Tenant = tenant; return r }

// tenantStats returns the stats of the tenant called name.
func (h *harness) tenantStats(name string) TenantStats {
	h.t.Helper()
	all := h.c.Stats().Tenants
	i := slices.IndexFunc(all, func(ts TenantStats) bool { return ts.Name == name })
	if i < 0 {
		h.t.Fatalf("no tenant %q in Stats", name)
	}
	return all[i]
}

// enqueue starts r's Admit in a goroutine and returns once it waits in its tier's queue.
func (h *harness) enqueue(r Request) *pending {
	h.t.Helper()
	return h.admitAsync(r, h.tierStats(h.c.tierName(h.c.est.tokens(r.Model, r.Prompt))).Queued[r.Class]+1)
}

// waits returns once p, an Admit of tenant's, waits in a queue; it fails if the Admit
// returns instead.
func (h *harness) waits(p *pending, tenant string) {
	h.t.Helper()
	h.eventually(func() bool { return h.tenantStats(tenant).Queued > 0 || len(p.ch) > 0 }, tenant+" waits")
	if len(p.ch) > 0 {
		o := <-p.ch
		h.t.Fatalf("%s's Admit = %v, %v; want it to wait", tenant, o.tk, o.err)
	}
}

// waiters are Admit calls waiting in a queue, in the order they were made.
type waiters []*pending

// next waits until one of ws is granted, takes it out of ws and returns its ticket.
func (h *harness) next(ws *waiters) *Ticket {
	h.t.Helper()
	var tk *Ticket
	h.eventually(func() bool {
		for i, p := range *ws {
			select {
			case o := <-p.ch:
				p.cancel()
				if o.err != nil {
					h.t.Fatalf("waiter %d turned away: %v", i, o.err)
				}
				tk, *ws = o.tk, slices.Delete(*ws, i, i+1)
				return true
			default:
			}
		}
		return false
	}, "a waiter is granted")
	return tk
}

// serve ends running with res and returns the tenants of the next n waiters of ws
// granted a slot, each ended with res in turn.
func (h *harness) serve(running *Ticket, ws *waiters, n int, res measure.Result) []string {
	h.t.Helper()
	var order []string
	for range n {
		running.Done(res)
		running = h.next(ws)
		order = append(order, running.Tenant())
	}
	running.Done(res)
	return order
}

// leave cancels the waiters left, so that no goroutine outlives the test.
func (ws waiters) leave() {
	for _, p := range ws {
		p.cancel()
		p.result()
	}
}

// queueOf starts n requests of tenant each of tokens in the queue.
func (h *harness) queueOf(ws *waiters, tenant string, n, tokens int) {
	h.t.Helper()
	for range n {
		*ws = append(*ws, h.enqueue(treq(tenant, tokens)))
	}
}

// The counter is prompt tokens at the input weight plus output tokens at the output
// weight, over the tenant's weight: charged the prompt when the request is dispatched,
// its output as it streams, and corrected to the engine's counts when it ends.
func TestTenantCounter(t *testing.T) {
	tests := []struct {
		name                  string
		fair                  Fairness
		weight                float64
		atDispatch, streaming float64 // after dispatch, after Output(10)
		atEnd                 float64 // after Done with 120 input and 30 output tokens
	}{
		{"the defaults, 1 and 2", Fairness{}, 0, 100, 120, 180},
		{"weight 2", Fairness{}, 2, 50, 60, 90},
		{"weights 0.5 and 3", Fairness{InputWeight: 0.5, OutputWeight: 3}, 1, 50, 80, 150},
		{"output only", Fairness{OutputWeight: 1}, 4, 0, 2.5, 7.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, tenantsConfig([]TenantConfig{{Name: "a", Weight: tt.weight}}, func(ts *Tenants) { ts.Fairness = tt.fair }))
			tk := h.admitNow(treq("a", 100))
			want := func(when string, counter float64) {
				t.Helper()
				st := h.tenantStats("a")
				if st.Counter != counter || st.Service != counter*orDefault(tt.weight, 1) {
					t.Fatalf("%s: counter %v, service %v; want %v, %v", when, st.Counter, st.Service, counter, counter*orDefault(tt.weight, 1))
				}
			}
			want("at dispatch", tt.atDispatch)
			tk.Output(10)
			want("streaming", tt.streaming)
			tk.Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 120, OutputTokens: 30})
			want("at the end", tt.atEnd)
			if st := h.tenantStats(OtherTenant); st.Counter != 0 || st.Service != 0 {
				t.Fatalf("other charged: %+v", st)
			}
		})
	}
}

// With the tier's cap at 1, the next waiter dispatched is always of the tenant with the
// lowest counter.
func TestFairOrder(t *testing.T) {
	t.Run("a tenant with one waiter goes before one with many", func(t *testing.T) {
		h := newHarness(t, Enforce, tenantsConfig([]TenantConfig{{Name: "a"}, {Name: "b"}}))
		running := h.admitNow(treq("a", 100))
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "a", 3, 100)
		h.queueOf(&ws, "b", 1, 100)
		if got := h.serve(running, &ws, 4, ok); !slices.Equal(got, []string{"b", "a", "a", "a"}) {
			t.Fatalf("order %v, want b first", got)
		}
	})
	t.Run("output counts at its weight", func(t *testing.T) {
		// a's requests answer 50 tokens (cost 110 each), b's none (cost 10): b gets 11
		// requests for each of a's.
		h := newHarness(t, Enforce, withQueue(tenantsConfig([]TenantConfig{{Name: "a"}, {Name: "b"}}), 64))
		running := h.admitNow(treq("a", 10))
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "a", 4, 10)
		h.queueOf(&ws, "b", 30, 10)
		var order []string
		for range 26 {
			res := ok
			if running.Tenant() == "a" {
				res.OutputTokens = 50
			}
			running.Done(res)
			running = h.next(&ws)
			order = append(order, running.Tenant())
		}
		running.Done(ok)
		if n := count(order, "a"); n < 2 || n > 3 {
			t.Fatalf("a served %d of 26: %v; want 2 or 3 (1 in 12)", n, order)
		}
	})
	t.Run("weights 2:1 give 2:1 service", func(t *testing.T) {
		h := newHarness(t, Enforce, withQueue(tenantsConfig([]TenantConfig{{Name: "a", Weight: 2}, {Name: "b"}}), 64))
		running := h.admitNow(treq("b", 100))
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "a", 25, 100)
		h.queueOf(&ws, "b", 25, 100)
		order := h.serve(running, &ws, 30, measure.Result{Stream: true, Outcome: measure.OK, OutputTokens: 50})
		if a, b := count(order, "a"), count(order, "b"); a != 20 || b != 10 {
			t.Fatalf("a served %d, b %d of 30: %v; want 20 and 10", a, b, order)
		}
		// What VTC guarantees: the counters stay within one request's cost (200).
		if a, b := h.tenantStats("a").Counter, h.tenantStats("b").Counter; a-b > 200 || b-a > 200 {
			t.Fatalf("counters a %v, b %v: more than one request apart", a, b)
		}
	})
	t.Run("classes first", func(t *testing.T) {
		// b has had nothing, a much; b's batch request still waits behind a's
		// interactive one.
		h := newHarness(t, Enforce, tenantsConfig([]TenantConfig{{Name: "a"}, {Name: "b"}}))
		for range 5 {
			h.admitNow(treq("a", 1000)).Done(ok)
		}
		running := h.admitNow(treq("a", 1000))
		var ws waiters
		defer func() { ws.leave() }()
		batch := treq("b", 10)
		batch.Class = Batch
		ws = append(ws, h.enqueue(batch))
		h.queueOf(&ws, "a", 1, 1000)
		if got := h.serve(running, &ws, 2, ok); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("order %v, want a's interactive request first", got)
		}
	})
	t.Run("max_class batch serves interactive requests as batch", func(t *testing.T) {
		h := newHarness(t, Enforce, tenantsConfig([]TenantConfig{{Name: "a"}, {Name: "jobs", MaxClass: "batch"}}))
		for range 5 {
			h.admitNow(treq("a", 1000)).Done(ok)
		}
		if st := h.tenantStats("jobs"); st.MaxClass != Batch {
			t.Fatalf("jobs: max class %s", st.MaxClass)
		}
		running := h.admitNow(treq("a", 1000))
		var ws waiters
		defer func() { ws.leave() }()
		// It asks for interactive (admitAsync waits for no interactive waiter, at once)...
		ws = append(ws, h.admitAsync(treq("jobs", 10), 0))
		h.eventually(func() bool { return h.only().Queued[Batch] == 1 }, "jobs waits as batch")
		h.queueOf(&ws, "a", 1, 1000)
		if got := h.serve(running, &ws, 2, ok); !slices.Equal(got, []string{"a", "jobs"}) {
			t.Fatalf("order %v, want a's interactive request first", got)
		}
		wantTenantDecision(t, h.rec.last(t), Decision{Tenant: "jobs", Class: Batch, Verdict: Queued, Reason: InFlightCap})
		tk := h.admitNow(treq("jobs", 10)) // ...and is served as batch when admitted at once
		defer tk.Done(ok)
		wantTenantDecision(t, h.rec.last(t), Decision{Tenant: "jobs", Class: Batch, Verdict: Admitted})
	})
	t.Run("probes belong to no tenant", func(t *testing.T) {
		h := newHarness(t, Enforce, tenantsConfig([]TenantConfig{{Name: "a", MaxClass: "batch"}}))
		r := treq("a", 10)
		r.Class = Probe
		tk := h.admitNow(r)
		defer tk.Done(ok)
		if d := h.rec.last(t); d.Class != Probe { // not capped at a's batch
			t.Fatalf("probe: decision %+v", d)
		}
		if st := h.tenantStats("a"); st.Service != 0 || st.Open != 0 {
			t.Fatalf("a charged for a probe: %+v", st)
		}
	})
}

// wantTenantDecision is wantDecision, comparing the tenant too.
func wantTenantDecision(t *testing.T, d, want Decision) {
	t.Helper()
	wantDecision(t, d, want)
	if d.Tenant != want.Tenant {
		t.Fatalf("decision %+v, want tenant %q", d, want.Tenant)
	}
}

// withQueue returns cfg with its first tier's queue of n.
func withQueue(cfg Config, n int) Config {
	cfg.Tiers[0].MaxQueue = n
	return cfg
}

// alternates reports whether no name follows itself in order.
func alternates(order []string) bool {
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			return false
		}
	}
	return true
}

func count(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

// The lift rule: a tenant that sent nothing while another was served does not bank the
// difference. Its counter is lifted to the lowest counter of the tenants waiting (or,
// with nobody waiting, to the last tenant dispatched's), so the two take turns.
func TestLift(t *testing.T) {
	// served has a served alone: ten requests of 100 tokens, one at a time.
	served := func(t *testing.T) *harness {
		h := newHarness(t, Enforce, tenantsConfig([]TenantConfig{{Name: "a"}, {Name: "b"}}))
		for range 10 {
			h.admitNow(treq("a", 100)).Done(ok)
		}
		if a, b := h.tenantStats("a").Counter, h.tenantStats("b").Counter; a != 1000 || b != 0 {
			t.Fatalf("counters a %v, b %v; want 1000, 0", a, b)
		}
		return h
	}
	t.Run("to the lowest waiting tenant", func(t *testing.T) {
		h := served(t)
		running := h.admitNow(treq("a", 100)) // a at 1100
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "a", 4, 100)
		h.queueOf(&ws, "b", 4, 100)
		if b := h.tenantStats("b"); b.Counter != 1100 || b.Service != 0 {
			t.Fatalf("b: counter %v, service %v; want lifted to a's 1100, service 0", b.Counter, b.Service)
		}
		// Without the lift b, at 0, would take the next eleven dispatches.
		if got := h.serve(running, &ws, 8, ok); !alternates(got) {
			t.Fatalf("order %v, want the two to alternate", got)
		}
	})
	t.Run("to the last dispatched, nobody waiting", func(t *testing.T) {
		h := served(t)
		tk := h.admitNow(treq("b", 100)) // nothing waits: lifted to a's 1000, then charged
		if b := h.tenantStats("b"); b.Counter != 1100 || b.Service != 100 {
			t.Fatalf("b: counter %v, service %v; want 1000+100, 100", b.Counter, b.Service)
		}
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "b", 3, 100)
		h.queueOf(&ws, "a", 3, 100)
		if a := h.tenantStats("a").Counter; a != 1100 {
			t.Fatalf("a at %v, want lifted to b's 1100", a)
		}
		// Without the lift, a would take the next ten.
		if got := h.serve(tk, &ws, 6, ok); !alternates(got) {
			t.Fatalf("order %v, want the two to alternate", got)
		}
	})
	t.Run("never down", func(t *testing.T) {
		h := served(t)
		b := h.admitNow(treq("b", 100)) // lifted to 1000, then 1100
		b.Done(measure.Result{Stream: true, Outcome: measure.OK, OutputTokens: 1000})
		running := h.admitNow(treq("a", 100)) // lifted to b's 1100, then 1200
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "a", 1, 100)
		h.queueOf(&ws, "b", 1, 100) // above the lowest waiting: kept
		if a, b := h.tenantStats("a").Counter, h.tenantStats("b").Counter; a != 1200 || b != 3100 {
			t.Fatalf("counters a %v, b %v; want 1200 and 3100", a, b)
		}
		if got := h.serve(running, &ws, 2, ok); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("order %v", got)
		}
	})
}

// The tiers' queues compete for the engine by their tenants' counters: a tenant flooding
// one tier cannot take the engine from a light one waiting in another.
func TestFairAcrossTiers(t *testing.T) {
	cfg := Config{
		Tiers: []TierConfig{
			{Name: "short", MaxInputTokens: 100, MaxInFlight: 4, MaxQueue: 4, MaxQueueWait: measure.Duration(10 * time.Second)},
			{Name: "long", MaxInFlight: 4, MaxQueue: 4, MaxQueueWait: measure.Duration(10 * time.Second)},
		},
		Tenants: &Tenants{Named: []TenantConfig{{Name: "flood"}, {Name: "light"}}},
	}
	h := newHarness(t, Enforce, cfg)
	for range 5 {
		h.admitNow(treq("flood", 150)).Done(ok)
	}
	// One of flood's requests runs; the engine saturates (9 waiting, 8 saturate it), and
	// holds KV for 270 tokens: 100 running, then room for one request of 50 or 150.
	running := h.admitNow(treq("flood", 100))
	busy := func(waiting float64) {
		h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Waiting, s.KVCapacityTokens = waiting, 300 }))
	}
	busy(9)
	var ws waiters
	defer func() { ws.leave() }()
	h.queueOf(&ws, "flood", 3, 150)
	ws = append(ws, h.enqueue(treq("light", 50))) // lifted to flood's 850
	running.Output(100)                           // flood's running request streams: flood at 1050
	if a, b := h.tenantStats("flood").Counter, h.tenantStats("light").Counter; a != 1050 || b != 850 {
		t.Fatalf("counters flood %v, light %v; want 1050, 850", a, b)
	}

	busy(0)
	h.c.Tick()
	if tk := h.next(&ws); tk.Tenant() != "light" || tk.Tier() != "short" {
		t.Fatalf("granted %s's request in %s first, want light's in short", tk.Tenant(), tk.Tier())
	} else {
		defer tk.Done(ok)
	}
	if got := h.tierStats("long").Queued[Interactive]; got != 3 {
		t.Fatalf("%d of flood's requests wait, want 3 (the engine has room for one request)", got)
	}
	running.Done(ok)
	if tk := h.next(&ws); tk.Tenant() != "flood" {
		t.Fatalf("granted %s", tk.Tenant())
	} else {
		tk.Done(ok)
	}
	wantTenantDecision(t, h.rec.last(t), Decision{Tier: "long", Tenant: "flood", Verdict: Queued, Reason: Saturated})
}

// A full queue sheds the newest waiter of the tenant furthest above its share for a
// request of a tenant below it, and turns away a request of the tenant furthest above.
func TestShedForFairShare(t *testing.T) {
	setup := func(t *testing.T, maxQueue int) (*harness, *Ticket) {
		h := newHarness(t, Enforce, withQueue(tenantsConfig([]TenantConfig{{Name: "heavy"}, {Name: "mid"}, {Name: "light"}}), maxQueue))
		for range 5 {
			h.admitNow(treq("heavy", 100)).Done(ok)
		}
		return h, h.admitNow(treq("heavy", 100))
	}
	t.Run("a queue full of one tenant", func(t *testing.T) {
		h, running := setup(t, 2)
		h1, h2 := h.enqueue(treq("heavy", 100)), h.enqueue(treq("heavy", 100))
		l1 := h.admitAsync(treq("light", 100), 2) // the queue stays full: at once
		h.waits(l1, "light")
		rej := h.refused(h2, Shed)
		if !strings.Contains(rej.Message, "tenant below its fair share") || rej.Tenant != "heavy" {
			t.Fatalf("shed: %+v", rej)
		}
		wantTenantDecision(t, h.rec.last(t), Decision{Tenant: "heavy", Verdict: Rejected, Reason: Shed})
		// heavy, the tenant furthest above its share, is turned away.
		if rej := h.rejectNow(treq("heavy", 100), QueueFull); rej.Tenant != "heavy" {
			t.Fatalf("rejection of tenant %q", rej.Tenant)
		}
		// light with one request waiting is level with heavy: a second is turned away.
		h.rejectNow(treq("light", 100), QueueFull)
		ws := waiters{h1, l1}
		if got := h.serve(running, &ws, 2, ok); !slices.Equal(got, []string{"light", "heavy"}) {
			t.Fatalf("order %v", got)
		}
	})
	t.Run("the tenant furthest above", func(t *testing.T) {
		h, running := setup(t, 3)
		// heavy at 600 with two waiting, mid lifted to it with one.
		var ws waiters
		defer func() { ws.leave() }()
		h.queueOf(&ws, "heavy", 1, 100)
		h.queueOf(&ws, "mid", 1, 100)
		h.queueOf(&ws, "heavy", 1, 100)
		if a, b := h.tenantStats("heavy").Counter, h.tenantStats("mid").Counter; a != 600 || b != 600 {
			t.Fatalf("counters heavy %v, mid %v; want 600 both", a, b)
		}
		l := h.admitAsync(treq("light", 100), 3)
		h.waits(l, "light")
		h.refused(ws[2], Shed) // heavy's newest: heavy has two waiting, mid one
		ws = append(ws[:2], l)
		h.rejectNow(treq("mid", 10), QueueFull)
		got := h.serve(running, &ws, 3, ok)
		if !slices.Equal(got, []string{"mid", "light", "heavy"}) && !slices.Equal(got, []string{"light", "mid", "heavy"}) {
			t.Fatalf("order %v, want heavy last", got)
		}
	})
	t.Run("a lower class is shed first", func(t *testing.T) {
		h, running := setup(t, 2)
		batch := treq("light", 10)
		batch.Class = Batch
		b := h.enqueue(batch)
		h1 := h.enqueue(treq("heavy", 100))
		l := h.admitAsync(treq("light", 100), 2) // light's batch request goes, not heavy's
		h.refused(b, Shed)
		ws := waiters{h1, l}
		if got := h.serve(running, &ws, 2, ok); !slices.Equal(got, []string{"light", "heavy"}) {
			t.Fatalf("order %v", got)
		}
	})
}

// Requests from before the tenants section, or of tenants a reload removed, are served
// and end without harm.
func TestTenantsRemovedByReload(t *testing.T) {
	plain := tierConfig()
	with := tenantsConfig([]TenantConfig{{Name: "a", Budget: Budget{InputTokensPerMinute: 1000}}, {Name: "b"}})
	for _, tt := range []struct {
		name           string
		before, after  Config
		running, queue string
	}{
		{"section removed", with, plain, "a", "a"},
		{"section added", plain, with, "", ""},
		{"tenant removed", with, tenantsConfig([]TenantConfig{{Name: "b"}}), "a", "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, tt.before)
			running := h.admitNow(treq(tt.running, 100))
			ws := waiters{h.enqueue(treq(tt.queue, 100))}
			if err := h.c.Reload(tt.after); err != nil {
				t.Fatal(err)
			}
			ws = append(ws, h.enqueue(treq("b", 100)))
			h.serve(running, &ws, 2, measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 90, OutputTokens: 5})
			if st := h.only(); st.InFlight != 0 || st.queuedTotal() != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A tenant that holds its weighted share of a tier's slots or more leaves a fifth of
// them to the others (as a lower class does): its next request waits while theirs start
// at once. Alone in the tier, it may use every slot.
func TestTenantSlotHeadroom(t *testing.T) {
	cfg := withCap(withQueue(tenantsConfig([]TenantConfig{{Name: "flood"}, {Name: "calm"}}), 8), 10)
	h := newHarness(t, Enforce, cfg)
	var open []*Ticket
	for range 10 { // alone: all ten slots
		open = append(open, h.admitNow(treq("flood", 10)))
	}
	for _, tk := range open[2:] { // flood keeps 2
		tk.Done(ok)
	}
	open = open[:2]
	open = append(open, h.admitNow(treq("calm", 10))) // now flood has a neighbour
	for range 5 {                                     // flood to 7 of 10: above its share of 5, inside the 8 it may use
		open = append(open, h.admitNow(treq("flood", 10)))
	}
	p := h.enqueue(treq("flood", 10)) // 9 in flight would pass the 8 above its share
	h.waits(p, "flood")
	for range 2 { // calm, below its share, starts at once up to the whole cap
		open = append(open, h.admitNow(treq("calm", 10)))
	}
	if st := h.tierStats("t"); st.InFlight != 10 || st.Queued[Interactive] != 1 {
		t.Fatalf("in flight %d, queued %d; want 10 and flood's 1", st.InFlight, st.Queued[Interactive])
	}
	for _, tk := range open {
		tk.Done(ok)
	}
	if o := <-p.ch; o.err != nil {
		t.Fatalf("flood's waiter: %v", o.err)
	} else {
		o.tk.Done(ok)
	}
}
