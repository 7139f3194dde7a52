package admission

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// epoch is where fake clocks start: any fixed time far from the wall clock, so that
// code reading the wall clock by mistake shows.
var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeEngine is an EngineSource returning whatever snapshot it was last given.
type fakeEngine struct {
	mu   sync.Mutex
	snap engine.Snapshot
}

func (e *fakeEngine) Latest() engine.Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snap
}

func (e *fakeEngine) Set(s engine.Snapshot) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.snap = s
}

var _ EngineSource = (*fakeEngine)(nil)

// snap returns a snapshot scraped at `at`, up, idle, with capacity unknown; edits change it.
func snap(at time.Time, edits ...func(*engine.Snapshot)) engine.Snapshot {
	s := engine.NewSnapshot()
	s.Up, s.At, s.Waiting, s.Running, s.KVUsage = true, at, 0, 0, 0.1
	for _, e := range edits {
		e(&s)
	}
	return s
}

// recorder is a DecisionObserver keeping every decision.
type recorder struct {
	mu sync.Mutex
	ds []Decision
}

func (r *recorder) ObserveDecision(d Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = append(r.ds, d)
}

func (r *recorder) all() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.ds...)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ds)
}

func (r *recorder) last(t *testing.T) Decision {
	t.Helper()
	ds := r.all()
	if len(ds) == 0 {
		t.Fatal("no decision recorded")
	}
	return ds[len(ds)-1]
}

var _ DecisionObserver = (*recorder)(nil)

// harness is a Controller with a fake clock, a fake engine and a decision recorder.
type harness struct {
	t     *testing.T
	c     *Controller
	clock *clock.Fake
	eng   *fakeEngine
	rec   *recorder
}

// newHarness builds a Controller of cfg in mode; opts edits the options (the fakes are
// set before it runs). The engine starts fresh and idle.
func newHarness(t *testing.T, mode Mode, cfg Config, opts ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, clock: clock.NewFake(epoch), eng: &fakeEngine{}, rec: &recorder{}}
	h.eng.Set(snap(h.clock.Now()))
	o := Options{
		Mode: mode, SLO: measure.NewSLO(time.Second, 100*time.Millisecond),
		Engine: h.eng, Clock: h.clock, Observers: []DecisionObserver{h.rec},
	}
	for _, edit := range opts {
		edit(&o)
	}
	c, err := New(cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.c = c
	return h
}

// tierConfig is a one-tier configuration: cap 1, a queue of 2 waiting at most 2s;
// edits change it.
func tierConfig(edits ...func(*TierConfig)) Config {
	tc := TierConfig{Name: "t", MaxInFlight: 1, MaxQueue: 2, MaxQueueWait: measure.Duration(2 * time.Second)}
	for _, e := range edits {
		e(&tc)
	}
	return Config{Tiers: []TierConfig{tc}}
}

// req is an interactive request of exactly n input tokens (a token-id prompt).
func req(n int) Request { return Request{Model: "m", Prompt: wire.PromptSize{TokenIDs: n, Prompts: 1}} }

func classReq(c Class) Request { r := req(10); r.Class = c; return r }

// ok is the result of a request that streamed fine.
var ok = measure.Result{Stream: true, Outcome: measure.OK}

// admitNow admits r and fails unless a ticket comes back at once.
func (h *harness) admitNow(r Request) *Ticket {
	h.t.Helper()
	tk, err := h.c.Admit(context.Background(), r)
	if err != nil || tk == nil {
		h.t.Fatalf("Admit = %v, %v; want a ticket", tk, err)
	}
	return tk
}

// rejectNow admits r and fails unless it is rejected at once for reason.
func (h *harness) rejectNow(r Request, reason Reason) *Rejection {
	h.t.Helper()
	tk, err := h.c.Admit(context.Background(), r)
	var rej *Rejection
	if !errors.As(err, &rej) || tk != nil {
		h.t.Fatalf("Admit = %v, %v; want a rejection (%s)", tk, err, reason)
	}
	if rej.Reason != reason {
		h.t.Fatalf("rejected for %s (%q), want %s", rej.Reason, rej.Message, reason)
	}
	return rej
}

// outcome is what an asynchronous Admit returned.
type outcome struct {
	tk  *Ticket
	err error
}

// pending is an Admit running in its own goroutine.
type pending struct {
	ch     chan outcome
	cancel context.CancelFunc
}

// admitAsync starts Admit(r) in a goroutine and waits until the tier's queue holds
// `queued` requests of r's class, which tells the request is waiting.
func (h *harness) admitAsync(r Request, queued int) *pending {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &pending{ch: make(chan outcome, 1), cancel: cancel}
	go func() {
		tk, err := h.c.Admit(ctx, r)
		p.ch <- outcome{tk, err}
	}()
	tier := h.c.tierName(h.c.est.tokens(r.Model, r.Prompt))
	h.eventually(func() bool { return h.tierStats(tier).Queued[r.Class] == queued }, "the request waits")
	return p
}

// hangLimit turns a hang into a failure. It is a wall-clock bound on waits that end at
// once when the code is right; nothing is asserted about time.
const hangLimit = 30 * time.Second

// result waits for the asynchronous Admit to return.
func (p *pending) result() outcome {
	select {
	case o := <-p.ch:
		p.cancel()
		return o
	case <-time.After(hangLimit):
		p.cancel()
		return outcome{err: errors.New("Admit did not return (hang)")}
	}
}

// granted waits for the asynchronous Admit and fails unless it returned a ticket.
func (h *harness) granted(p *pending) *Ticket {
	h.t.Helper()
	o := p.result()
	if o.err != nil || o.tk == nil {
		h.t.Fatalf("waiting Admit = %v, %v; want a ticket", o.tk, o.err)
	}
	return o.tk
}

// refused waits for the asynchronous Admit and fails unless it was rejected for reason.
func (h *harness) refused(p *pending, reason Reason) *Rejection {
	h.t.Helper()
	o := p.result()
	var rej *Rejection
	if !errors.As(o.err, &rej) || o.tk != nil {
		h.t.Fatalf("waiting Admit = %v, %v; want a rejection (%s)", o.tk, o.err, reason)
	}
	if rej.Reason != reason {
		h.t.Fatalf("rejected for %s, want %s", rej.Reason, reason)
	}
	return rej
}

// eventually waits, without sleeping, until cond holds. The wall-clock limit only turns
// a hang into a failure; nothing is asserted about time.
func (h *harness) eventually(cond func() bool, what string) {
	h.t.Helper()
	limit := time.Now().Add(hangLimit)
	for !cond() {
		if time.Now().After(limit) {
			h.t.Fatalf("never happened: %s", what)
		}
		runtime.Gosched()
	}
}

func (h *harness) tierStats(name string) TierStats {
	h.t.Helper()
	for _, ts := range h.c.Stats().Tiers {
		if ts.Name == name {
			return ts
		}
	}
	h.t.Fatalf("no tier %q in Stats", name)
	return TierStats{}
}

// only returns the stats of the one tier of the configuration.
func (h *harness) only() TierStats {
	h.t.Helper()
	st := h.c.Stats()
	if len(st.Tiers) != 1 {
		h.t.Fatalf("Stats has %d tiers, want 1", len(st.Tiers))
	}
	return st.Tiers[0]
}

func (ts TierStats) queuedTotal() int {
	n := 0
	for _, q := range ts.Queued {
		n += q
	}
	return n
}

// tierName is the name of the tier a request of n tokens falls into.
func (c *Controller) tierName(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tierFor(n).cfg.Name
}

// wantDecision fails unless d matches want in everything that want sets (Tier and Wait
// are compared when non-zero).
func wantDecision(t *testing.T, d, want Decision) {
	t.Helper()
	if d.Verdict != want.Verdict || d.Reason != want.Reason || d.Class != want.Class || d.Shadow != want.Shadow ||
		want.Tier != "" && d.Tier != want.Tier || want.Wait != 0 && d.Wait != want.Wait {
		t.Fatalf("decision %+v, want %+v", d, want)
	}
}
