package admission

import (
	"context"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
)

// arrival is one request of a scenario and what enforce does with it at once.
type arrival struct {
	class  Class
	want   Verdict // Queued: it waits (enforce) or is recorded as queued (shadow)
	reason Reason
	shed   bool // it pushes the newest waiter of the lowest class out of a full queue
}

type scenario struct {
	name     string
	cfg      Config
	opts     func(*Options)
	setup    func(h *harness) // in both modes, before the arrivals
	arrivals []arrival
}

func admitted(c Class) arrival             { return arrival{class: c, want: Admitted} }
func queued(c Class, r Reason) arrival     { return arrival{class: c, want: Queued, reason: r} }
func turnedAway(c Class, r Reason) arrival { return arrival{class: c, want: Rejected, reason: r} }
func shedding(c Class, r Reason) arrival {
	return arrival{class: c, want: Queued, reason: r, shed: true}
}
func withOpts(f func(*Options)) func(*Options) { return f }

var scenarios = []scenario{
	{name: "admitted at once", cfg: tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 2 }),
		arrivals: []arrival{admitted(Interactive), admitted(Batch)}},
	{name: "tier rate", cfg: tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxInFlight = 1, 1, 9 }),
		arrivals: []arrival{admitted(Interactive), turnedAway(Interactive, TierRate)}},
	{name: "in-flight cap, then queue full", cfg: tierConfig(),
		arrivals: []arrival{admitted(Interactive), queued(Interactive, InFlightCap), queued(Interactive, InFlightCap), turnedAway(Interactive, QueueFull)}},
	{name: "predicted late", cfg: tierConfig(func(tc *TierConfig) { tc.MaxQueue = 10 }),
		setup:    func(h *harness) { h.serveAtOneASecond(4) },
		arrivals: []arrival{admitted(Interactive), queued(Interactive, InFlightCap), queued(Interactive, InFlightCap), turnedAway(Interactive, PredictedLate)}},
	{name: "saturated engine", cfg: tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 9 }),
		setup:    func(h *harness) { h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Waiting = 9 })) },
		arrivals: []arrival{queued(Interactive, Saturated), queued(Interactive, Saturated), turnedAway(Interactive, QueueFull)}},
	{name: "stale engine, fail closed", cfg: tierConfig(), opts: withOpts(func(o *Options) { o.Saturation.FailClosed = true }),
		setup:    func(h *harness) { h.eng.Set(engine.NewSnapshot()) },
		arrivals: []arrival{turnedAway(Interactive, EngineDown), turnedAway(Batch, EngineDown)}},
	{name: "stale engine, fail open", cfg: tierConfig(),
		setup:    func(h *harness) { h.eng.Set(engine.NewSnapshot()) },
		arrivals: []arrival{admitted(Interactive)}},
	{name: "no queue", cfg: tierConfig(func(tc *TierConfig) { tc.MaxQueue = 0 }),
		arrivals: []arrival{admitted(Interactive), turnedAway(Interactive, QueueFull), turnedAway(Probe, QueueFull)}},
	{name: "priorities", cfg: tierConfig(func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 5, 4 }),
		arrivals: []arrival{admitted(Batch), admitted(Batch), admitted(Probe), admitted(Batch), queued(Batch, InFlightCap),
			admitted(Interactive), queued(Interactive, InFlightCap), queued(Probe, InFlightCap)}},
	{name: "shedding", cfg: tierConfig(),
		arrivals: []arrival{admitted(Interactive), queued(Batch, InFlightCap), queued(Probe, InFlightCap),
			shedding(Interactive, InFlightCap), turnedAway(Batch, QueueFull), shedding(Interactive, InFlightCap), turnedAway(Interactive, QueueFull)}},
}

func TestScenariosEnforce(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t, Enforce, sc.cfg, optsOf(sc)...)
			if sc.setup != nil {
				sc.setup(h)
			}
			var tickets []*Ticket
			var waiting [numClasses][]*pending
			for i, a := range sc.arrivals {
				r := classReq(a.class)
				switch a.want {
				case Admitted:
					tickets = append(tickets, h.admitNow(r))
					wantDecision(t, h.rec.last(t), Decision{Class: a.class, Verdict: Admitted})
				case Rejected:
					h.rejectNow(r, a.reason)
					wantDecision(t, h.rec.last(t), Decision{Class: a.class, Verdict: Rejected, Reason: a.reason})
				case Queued:
					p := h.admitAsync(r, len(waiting[a.class])+1)
					if a.shed {
						victim := lowestWaiting(&waiting)
						h.refused(victim, Shed)
					}
					waiting[a.class] = append(waiting[a.class], p)
				}
				if t.Failed() {
					t.Fatalf("arrival %d", i)
				}
			}
			// Only what enforce dispatched counts in the ledger, not who waits.
			h.wantLedger(ledgerOf(sc.arrivals, func(a arrival) bool { return a.want == Admitted }))
			for _, ps := range waiting { // the clients leave
				for _, p := range ps {
					p.cancel()
					if o := p.result(); o.err == nil {
						t.Fatalf("a waiter was granted with nothing done")
					}
				}
			}
			for _, tk := range tickets {
				tk.Done(ok)
			}
			if st := h.only(); st.InFlight != 0 || st.queuedTotal() != 0 {
				t.Fatalf("stats %+v", st)
			}
			h.wantLedger(ledgerView{})
		})
	}
}

// ledgerOf is the ledger of the arrivals for which runs holds, at the 10 tokens of
// classReq each.
func ledgerOf(arrivals []arrival, runs func(arrival) bool) ledgerView {
	var v ledgerView
	for _, a := range arrivals {
		if !runs(a) {
			continue
		}
		v.requests, v.kv = v.requests+1, v.kv+10
		if a.class != Probe {
			v.live, v.liveKV = v.live+1, v.liveKV+10
		}
	}
	return v
}

// Shadow mode records, for every arrival, what enforce would have done, but lets every
// request through at once and counts it in flight.
func TestScenariosShadow(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t, Shadow, sc.cfg, optsOf(sc)...)
			if sc.setup != nil {
				sc.setup(h)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // even a client already gone is let through at once
			var tickets []*Ticket
			for i, a := range sc.arrivals {
				tk, err := h.c.Admit(ctx, classReq(a.class))
				if err != nil || tk == nil {
					t.Fatalf("arrival %d: Admit = %v, %v; shadow mode must let it through", i, tk, err)
				}
				tickets = append(tickets, tk)
				wantDecision(t, h.rec.last(t), Decision{Tier: "t", Class: a.class, Verdict: a.want, Reason: a.reason, Shadow: true})
			}
			if got := h.only().InFlight; got != len(sc.arrivals) {
				t.Fatalf("in flight %d, want all %d arrivals", got, len(sc.arrivals))
			}
			h.wantLedger(ledgerOf(sc.arrivals, func(arrival) bool { return true }))
			for _, tk := range tickets {
				tk.Done(ok)
			}
			h.c.Tick()
			if st := h.only(); st.InFlight != 0 || st.queuedTotal() != 0 {
				t.Fatalf("stats %+v", st)
			}
			h.wantLedger(ledgerView{})
		})
	}
}

func optsOf(sc scenario) []func(*Options) {
	if sc.opts == nil {
		return nil
	}
	return []func(*Options){sc.opts}
}

// lowestWaiting pops the newest waiter of the lowest class that has one.
func lowestWaiting(w *[numClasses][]*pending) *pending {
	for k := numClasses - 1; ; k-- {
		if q := w[k]; len(q) > 0 {
			w[k] = q[:len(q)-1]
			return q[len(q)-1]
		}
	}
}

// In shadow mode the queue is virtual: a request enforce would hold takes a place in it
// until enforce would have dispatched it, and the cap sees the tier as enforce would.
func TestShadowVirtualQueue(t *testing.T) {
	h := newHarness(t, Shadow, tierConfig())
	a := h.admitNow(req(1))
	b := h.admitNow(req(1))
	wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: InFlightCap, Shadow: true})
	if st := h.only(); st.InFlight != 2 || st.Queued[Interactive] != 1 {
		t.Fatalf("stats %+v, want 2 in flight, 1 (virtually) waiting", st)
	}
	a.Done(ok) // enforce would dispatch b now
	if st := h.only(); st.InFlight != 1 || st.queuedTotal() != 0 {
		t.Fatalf("stats %+v, want b in flight, nobody waiting", st)
	}
	c := h.admitNow(req(1)) // b holds the slot
	wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: InFlightCap, Shadow: true})
	c.Done(ok) // ends while enforce would still hold it
	if st := h.only(); st.InFlight != 1 || st.queuedTotal() != 0 {
		t.Fatalf("stats %+v, want b alone", st)
	}
	b.Done(ok)
	h.admitNow(req(1)).Done(ok)
	wantDecision(t, h.rec.last(t), Decision{Verdict: Admitted, Shadow: true})
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d", st.InFlight)
	}
}

// Requests shadow mode would have rejected run, but do not take the cap's slots.
func TestShadowRejectedKeepsSlotsFree(t *testing.T) {
	h := newHarness(t, Shadow, tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst = 1, 1 }))
	a := h.admitNow(req(1))
	b := h.admitNow(req(1))
	wantDecision(t, h.rec.last(t), Decision{Verdict: Rejected, Reason: TierRate, Shadow: true})
	a.Done(ok)
	h.clock.Step(time.Second)
	c := h.admitNow(req(1)) // b runs, but enforce would have had the slot free
	wantDecision(t, h.rec.last(t), Decision{Verdict: Admitted, Shadow: true})
	if st := h.only(); st.InFlight != 2 {
		t.Fatalf("in flight %d, want 2 (b and c)", st.InFlight)
	}
	b.Done(ok)
	c.Done(ok)
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d", st.InFlight)
	}
}

func TestShadowTickFreesVirtualPlaces(t *testing.T) {
	t.Run("queue timeout", func(t *testing.T) {
		h := newHarness(t, Shadow, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 1 }))
		a, b := h.admitNow(req(1)), h.admitNow(req(1))
		c := h.admitNow(req(1))
		wantDecision(t, h.rec.last(t), Decision{Verdict: Rejected, Reason: QueueFull, Shadow: true})
		h.clock.Step(2 * time.Second)
		h.c.Tick() // b would have timed out
		if st := h.only(); st.queuedTotal() != 0 || st.InFlight != 3 {
			t.Fatalf("stats %+v", st)
		}
		d := h.admitNow(req(1))
		wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: InFlightCap, Shadow: true})
		for _, tk := range []*Ticket{a, b, c, d} {
			tk.Done(ok)
		}
		if st := h.only(); st.InFlight != 0 || st.queuedTotal() != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("engine down, fail closed", func(t *testing.T) {
		h := newHarness(t, Shadow, tierConfig(), func(o *Options) { o.Saturation.FailClosed = true })
		h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.KVUsage = 1 }))
		a := h.admitNow(req(1))
		wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: Saturated, Shadow: true})
		h.eng.Set(engine.NewSnapshot())
		h.c.Tick()
		if st := h.only(); st.queuedTotal() != 0 || st.InFlight != 1 {
			t.Fatalf("stats %+v", st)
		}
		a.Done(ok)
		if st := h.only(); st.InFlight != 0 {
			t.Fatalf("in flight %d", st.InFlight)
		}
	})
	t.Run("saturation clears", func(t *testing.T) {
		h := newHarness(t, Shadow, tierConfig())
		h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Waiting = 100 }))
		a := h.admitNow(req(1))
		h.eng.Set(snap(h.clock.Now()))
		h.c.Tick() // enforce would dispatch it now: it takes the slot
		if st := h.only(); st.queuedTotal() != 0 || st.InFlight != 1 {
			t.Fatalf("stats %+v", st)
		}
		b := h.admitNow(req(1))
		wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: InFlightCap, Shadow: true})
		a.Done(ok)
		b.Done(ok)
		if st := h.only(); st.InFlight != 0 || st.queuedTotal() != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}
