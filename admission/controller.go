package admission

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Mode is how admission acts on its decisions.
type Mode uint8

// The modes.
const (
	Off     Mode = iota // no admission: every request is forwarded
	Shadow              // decide and record everything, but never delay or reject
	Enforce             // delay and reject as decided
)

// ParseMode parses "off", "shadow" or "enforce".
func ParseMode(s string) (Mode, error) {
	for m, n := range []string{"off", "shadow", "enforce"} {
		if s == n {
			return Mode(m), nil
		}
	}
	return Off, fmt.Errorf("admission: unknown mode %q (want off, shadow or enforce)", s)
}

// String returns "off", "shadow" or "enforce".
func (m Mode) String() string {
	return [...]string{"off", "shadow", "enforce"}[min(m, Enforce)]
}

// EngineSource gives the latest engine snapshot.
type EngineSource interface{ Latest() engine.Snapshot }

// DecisionObserver receives every decision. It is called without admission's lock held
// and must not block.
type DecisionObserver interface{ ObserveDecision(Decision) }

// Options configure a Controller.
type Options struct {
	Mode       Mode
	SLO        measure.SLO        // the SLOs of tiers that set none
	Engine     EngineSource       // nil: no engine signals
	Saturation Saturation         // when the engine counts as saturated
	Clock      clock.Clock        // decisions, queue deadlines, Run's ticker; default clock.Real
	Observers  []DecisionObserver // see every decision
}

// Request is what admission needs to know of a request.
type Request struct {
	Model  string
	Prompt wire.PromptSize
	Class  Class
	// Tenant is the request's tenant, as Controller.Tenant named it from its headers.
	// Requests of the Probe class belong to none.
	Tenant string
	// Output is the most output tokens the request may produce (max_tokens times the
	// choices it asks for), 0 when it sets no bound: what it reserves of its tenant's
	// output budget (without a bound, the tenant's learned mean).
	Output int
	// Stream says the response streams, so that its first output reaches the ticket
	// (Ticket.Output) and ends its prompt's count in its tier's prefill. Without a stream
	// nothing is seen before the end: the prompt counts until an estimate of its
	// prefill's end instead (tierState.startPrefill).
	Stream bool
}

// Controller makes admission decisions, and keeps the ledger of the requests in flight
// it let through (InFlight), which its saturation check reads. It is safe for concurrent
// use.
type Controller struct {
	opts Options
	est  estimator
	led  ledger

	mu      sync.Mutex
	cfg     Config // as loaded, before defaults
	fb      Feedback
	tiers   []*tierState  // the current tiers, by growing max_input_tokens
	retired []*tierState  // tiers removed by a reload that still have requests
	ten     *tenancy      // nil without a tenants section
	shared  *sharedBudget // the engine budget the tiers share; nil unless Config.SharedRate
	seq     uint64        // numbers the waiters in order of arrival

	resolver atomic.Pointer[resolver] // the tenants section's identities; nil without one
}

// New returns a Controller for cfg, which must be valid.
func New(cfg Config, opts Options) (*Controller, error) {
	opts.Clock = clock.Or(opts.Clock)
	opts.Saturation = opts.Saturation.withDefaults()
	c := &Controller{opts: opts}
	if err := c.Reload(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Mode returns the controller's mode.
func (c *Controller) Mode() Mode { return c.opts.Mode }

// Reload replaces the tiers with cfg's. A tier that keeps its name keeps its live state
// (requests in flight and waiting, its working cap clamped to the new bounds); requests
// of removed tiers finish under their old limits.
func (c *Controller) Reload(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	raw := cfg
	raw.Tiers = slices.Clone(cfg.Tiers)
	if cfg.Tenants != nil {
		ts := *cfg.Tenants
		ts.Named = slices.Clone(ts.Named)
		raw.Tenants = &ts
	}
	cfg = cfg.withDefaults(c.opts.SLO)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg = raw
	now := c.opts.Clock.Now()
	old := map[string]*tierState{}
	for _, t := range c.tiers {
		old[t.cfg.Name] = t
	}
	tiers := make([]*tierState, len(cfg.Tiers))
	for i, tc := range cfg.Tiers {
		if t, ok := old[tc.Name]; ok {
			t.configure(tc, now)
			tiers[i] = t
			delete(old, tc.Name)
			continue
		}
		tiers[i] = newTierState(tc, now)
	}
	for _, t := range old {
		if t.busy() {
			c.retired = append(c.retired, t)
		}
	}
	c.tiers, c.fb = tiers, cfg.Feedback
	c.shared = nil
	if cfg.SharedRate {
		c.shared = newSharedBudget(cfg.Tiers, now)
	}
	c.configureTenants(cfg.Tenants, now)
	return nil
}

// Config returns the configuration in force, as it was given to New or Reload (without
// the defaults filled in), so that it can be written back as a tiers file.
func (c *Controller) Config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.cfg
	cfg.Tiers = slices.Clone(cfg.Tiers)
	if cfg.Tenants != nil {
		ts := *cfg.Tenants
		ts.Named = slices.Clone(ts.Named)
		cfg.Tenants = &ts
	}
	return cfg
}

// tierFor returns the tier of a request of n input tokens.
func (c *Controller) tierFor(n int) *tierState {
	for _, t := range c.tiers[:len(c.tiers)-1] {
		if n <= t.cfg.MaxInputTokens {
			return t
		}
	}
	return c.tiers[len(c.tiers)-1]
}

// Admit decides on a request. It returns a Ticket once the request may be dispatched —
// at once, or after waiting in its tier's queue until a slot frees, the wait runs out or
// ctx ends — or a *Rejection saying why not. In Off mode it always returns a Ticket at
// once, without a tier, a decision or any limit; in Shadow mode too, after recording
// what Enforce would have done. In every mode the request counts in the ledger
// (InFlight) from the moment its Ticket is issued, never while it is being decided or
// waits; a rejected request never counts. The caller must call the Ticket's Done when
// the request ends, however it ends.
func (c *Controller) Admit(ctx context.Context, r Request) (*Ticket, error) {
	tk := &Ticket{c: c, class: r.Class, model: r.Model, prompt: r.Prompt, tokens: c.est.tokens(r.Model, r.Prompt), output: max(r.Output, 0), stream: r.Stream}
	if r.Class != Probe { // slogate's own probes belong to no tenant
		tk.tenant = r.Tenant
	}
	if c.opts.Mode == Off {
		c.enter(tk)
		return tk, nil
	}
	c.mu.Lock()
	now := c.opts.Clock.Now()
	t := c.tierFor(tk.tokens)
	tk.t = t              // set before the ticket escapes: endPrefill reads it without the lock
	if r.Class != Probe { // the demand on the tier is its users', whatever the verdict
		t.offered.add(now)
		t.sustained.add(now)
	}
	if ts := c.tenantOf(tk.tenant); ts != nil && r.Class != Probe {
		tk.ten, tk.tenant, tk.class = ts, ts.cfg.Name, ts.cfg.class(r.Class)
		c.arrive(ts)
	}
	d := Decision{Tier: t.cfg.Name, Tenant: tk.tenant, Class: tk.class, Shadow: c.opts.Mode == Shadow}
	w, rej := c.decide(now, t, tk, &d)
	admitted := w == nil && (rej == nil || d.Shadow)
	if admitted {
		c.enter(tk) // under the lock: the next decision sees its tokens
		// Shadow mode counts in prefill what enforce would have dispatched.
		if !tk.shadowed {
			t.startPrefill(now, tk)
		}
	}
	if rej != nil { // turned away, or in shadow mode would have been: it keeps nothing reserved
		c.unreserve(tk)
	}
	if tk.ten != nil {
		tk.quota = tk.ten.quota(now)
		if rej != nil {
			rej.Tenant, rej.Quota = tk.tenant, tk.quota
		}
	}
	c.mu.Unlock()
	if w != nil {
		return c.wait(ctx, t, w, d)
	}
	c.observe(d)
	if !admitted {
		return nil, rej
	}
	tk.decision = d
	return tk, nil
}

// decide makes the immediate decision for tk in tier t at now, under the lock. It
// returns a waiter when the request must queue (never in shadow mode), or the
// rejection; with neither, the request is admitted (in shadow mode, always).
//
// Shadow mode takes the same decisions on the same state as enforce: a request enforce
// would turn away, or hold in the queue, is let through but kept out of the tier's
// in-flight count (see tierState.shadowed); one it would queue takes a place in the
// queue, virtually, until enforce would have dispatched it or it ends.
func (c *Controller) decide(now time.Time, t *tierState, tk *Ticket, d *Decision) (*waiter, *Rejection) {
	reason := c.engineState(now, tk.tokens)
	if reason == EngineDown {
		d.Verdict, d.Reason = Rejected, EngineDown
		c.bypass(d, t, tk)
		return nil, reject(t, EngineDown, engineRetry, "the engine is down, asleep or its metrics are stale")
	}
	if rej := c.reserve(now, t, tk, d); rej != nil {
		return nil, rej
	}
	t.releasePrefill(now)
	if !t.prefillRoom(tk.tokens) {
		d.Verdict, d.Reason = Rejected, PrefillBacklog
		c.bypass(d, t, tk)
		return nil, reject(t, PrefillBacklog, t.prefillRetry(tk.tokens), "%d prompt tokens of the tier wait for their first token, with this one's %d over its max_prefill_tokens %d", t.prefill.Load(), tk.tokens, t.cfg.MaxPrefillTokens)
	}
	var res *rate.Reservation // the arrival's token, given back if it is turned away below
	if t.limiter != nil {
		res = t.limiter.ReserveN(now, 1)
		if delay := res.DelayFrom(now); !res.OK() || delay > 0 {
			res.CancelAt(now)
			if !res.OK() { // burst < 1, which Validate prevents: no token ever
				delay = time.Second
			}
			d.Verdict, d.Reason = Rejected, TierRate
			t.rateHits++
			c.bypass(d, t, tk)
			return nil, reject(t, TierRate, delay, "over its rate of %.3g requests/s", t.rate)
		}
	}
	shared, delay := c.reserveShared(now, t)
	if delay > 0 {
		if res != nil {
			res.CancelAt(now)
		}
		d.Verdict, d.Reason = Rejected, EngineBudget
		t.budgetHits++ // the tiers' rates together turned it away: the feedback may lower its cost
		c.bypass(d, t, tk)
		return nil, reject(t, EngineBudget, delay, "the tiers together are at the engine's budget (this tier alone may take %.3g requests/s)", t.rate)
	}
	if sh := c.shares(t); reason == NoReason && c.first(t, tk, sh) && t.inFlight < sh.slots(tk) {
		d.Verdict = Admitted
		t.inFlight++
		t.hold(tk.ten, 1)
		tk.start = now
		c.dispatched(tk)
		return nil, nil
	}
	d.Reason = reason
	if d.Reason == NoReason {
		d.Reason = InFlightCap
	}
	w, rej := c.queue(now, t, tk, d)
	if rej != nil && res != nil {
		res.CancelAt(now)
	}
	if rej != nil && shared != nil {
		shared.CancelAt(now)
	}
	return w, rej
}

// queue puts a request that cannot start now in its tier's queue, or rejects it when
// the queue is full or the wait would be too long.
func (c *Controller) queue(now time.Time, t *tierState, tk *Ticket, d *Decision) (w *waiter, rej *Rejection) {
	if d.Reason == InFlightCap {
		defer func() {
			if rej != nil { // demand above the cap: the feedback may grow it (adjust)
				t.capHits++
			}
		}()
	}
	wait := time.Duration(t.cfg.MaxQueueWait)
	if t.cfg.MaxQueue == 0 {
		// Without a queue, a request the cap holds back is turned away as from a full
		// queue; one the engine holds back, as saturated.
		if d.Reason == InFlightCap {
			d.Reason = QueueFull
		}
		d.Verdict = Rejected
		c.bypass(d, t, tk)
		return nil, reject(t, d.Reason, time.Second, "no capacity now and no queue (%s)", d.Reason)
	}
	if predicted := t.predictWait(now, c.ahead(t, tk)); predicted > wait {
		d.Verdict, d.Reason = Rejected, PredictedLate
		c.bypass(d, t, tk)
		return nil, reject(t, PredictedLate, predicted, "the predicted wait of %s exceeds the tier's %s", predicted.Round(time.Millisecond), wait)
	}
	if t.queued >= t.cfg.MaxQueue {
		victim := c.victim(t, tk)
		if victim == nil {
			d.Verdict, d.Reason = Rejected, QueueFull
			c.bypass(d, t, tk)
			return nil, reject(t, QueueFull, max(t.predictWait(now, t.queued), time.Second), "the queue of %d is full", t.cfg.MaxQueue)
		}
		t.remove(victim)
		why := "shed for a request of a higher class"
		if victim.class == tk.class {
			why = "shed for a request of a tenant below its fair share"
		}
		c.turnAway(victim, reject(t, Shed, time.Second, "%s", why), now)
	}
	c.seq++
	w = &waiter{class: tk.class, tokens: tk.tokens, enqueued: now, deadline: now.Add(wait), ch: make(chan grant, 1), ticket: tk, seq: c.seq}
	t.enqueue(w)
	if d.Shadow {
		d.Verdict = Queued
		w.virtual, tk.virtual = true, w
		c.bypass(d, t, tk)
		return nil, nil
	}
	return w, nil
}

// bypass lets a request that enforce would turn away or hold through in shadow mode,
// outside the tier's in-flight count.
func (c *Controller) bypass(d *Decision, t *tierState, tk *Ticket) {
	if d.Shadow {
		t.shadowed++
		tk.shadowed = true
	}
}

// wait blocks until the waiter is granted, rejected, or its client goes away.
func (c *Controller) wait(ctx context.Context, t *tierState, w *waiter, d Decision) (*Ticket, error) {
	select {
	case g := <-w.ch:
		return c.granted(w, g, d)
	case <-ctx.Done():
	}
	c.mu.Lock()
	removed := t.remove(w)
	var rej *Rejection
	if removed {
		d.Verdict, d.Reason, d.Wait = Rejected, ClientGone, c.opts.Clock.Now().Sub(w.enqueued)
		rej = reject(t, ClientGone, 0, "the client went away after %s in the queue", d.Wait.Round(time.Millisecond))
		rej.cause = ctx.Err()
		c.unreserve(w.ticket)
	}
	c.mu.Unlock()
	if !removed { // granted or rejected meanwhile
		return c.granted(w, <-w.ch, d)
	}
	c.observe(d)
	return nil, rej
}

func (c *Controller) granted(w *waiter, g grant, d Decision) (*Ticket, error) {
	d.Wait = g.wait
	if g.err != nil {
		if tk := w.ticket; tk.ten != nil {
			c.mu.Lock()
			c.unreserve(tk)
			g.err.Tenant, g.err.Quota = tk.tenant, tk.ten.quota(c.opts.Clock.Now())
			c.mu.Unlock()
		}
		d.Verdict, d.Reason = Rejected, g.err.Reason
		c.observe(d)
		return nil, g.err
	}
	d.Verdict = Queued
	c.observe(d)
	g.ticket.decision = d
	return g.ticket, nil
}
