package admission

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Saturation says when the engine counts as saturated: new requests then wait (or are
// turned away) whatever their tier's limits allow. Zero values take the defaults.
type Saturation struct {
	QueueDepth float64       // the engine's waiting requests at which it is saturated; default 8
	KVUsage    float64       // KV-cache usage (engine-reported, or slogate's own in-flight tokens against capacity) at which it is saturated; default 0.9
	StaleAfter time.Duration // engine data older than this is stale; default 5s
	FailClosed bool          // stale or missing engine data means the engine is down (503); default: ignore it
}

func (s Saturation) withDefaults() Saturation {
	s.QueueDepth = orDefault(s.QueueDepth, 8)
	s.KVUsage = orDefault(s.KVUsage, 0.9)
	s.StaleAfter = orDefault(s.StaleAfter, 5*time.Second)
	return s
}

// engineRetry is the Retry-After of requests turned away because the engine is down.
const engineRetry = 5 * time.Second

// engineState reports whether the engine can take a request of n more KV tokens now:
// NoReason, Saturated, or EngineDown.
func (c *Controller) engineState(now time.Time, n int) Reason {
	if c.opts.Engine == nil {
		return NoReason
	}
	s := c.opts.Saturation
	snap := c.opts.Engine.Latest()
	fresh := snap.Up && snap.Age(now) <= s.StaleAfter
	if !fresh && s.FailClosed {
		return EngineDown
	}
	if fresh && snap.Sleeping { // vLLM sleep mode: the engine answers but serves nothing
		return EngineDown
	}
	// slogate's own count: the KV tokens of the requests in flight by the ledger (every
	// class, and in shadow mode also those enforce would have held), estimated at the
	// bytes per token learned per model. A request that fits the engine alone is never
	// held for it: with nothing in flight it can only be the engine's limits that stop it.
	capacity := snap.KVCapacityTokens
	if engine.Known(capacity) && capacity > 0 {
		if inFlight := c.led.kvTokens(); inFlight > 0 && float64(inFlight+int64(n)) > s.KVUsage*capacity {
			return Saturated
		}
	}
	// Where the engine says why requests wait (vLLM reason=capacity), only those
	// waiting for room count: deferred ones (e.g. long prefills held back by design)
	// are no sign of saturation.
	waiting := snap.Waiting
	if engine.Known(snap.WaitingCapacity) {
		waiting = snap.WaitingCapacity
	}
	if fresh && (waiting >= s.QueueDepth || snap.KVUsage >= s.KVUsage) { // NaN compares false
		return Saturated
	}
	return NoReason
}

// pump dispatches waiters while the engine and their tiers have room, the next one
// always the first by Controller.before among the tiers' next waiters (so the tiers'
// queues compete for the engine by class, then by their tenants' fair share, then by
// arrival); a tier whose next waiter the engine cannot take now (its KV tokens do not
// fit) is passed over until the next pump. It runs under the lock.
func (c *Controller) pump(now time.Time) {
	for _, t := range c.all() {
		t.releasePrefill(now)
	}
	blocked := map[*tierState]bool{}
	for {
		var best *waiter
		var bt *tierState
		for _, t := range c.all() {
			if blocked[t] {
				continue
			}
			if w := c.ready(t); w != nil && (best == nil || c.before(w, best)) {
				best, bt = w, t
			}
		}
		if best == nil {
			return
		}
		switch c.engineState(now, best.tokens) {
		case NoReason:
			c.dispatch(now, bt, best)
		case Saturated:
			blocked[bt] = true
		default:
			return
		}
	}
}

// turnAway rejects waiter w, already out of its queue, at now, under the lock. A real
// waiter gives back its reservation when it reads the rejection (granted); a virtual
// one (shadow mode) is already in flight and nobody reads it, so it gives it back here,
// as enforce would have.
func (c *Controller) turnAway(w *waiter, rej *Rejection, now time.Time) {
	if w.virtual {
		c.unreserve(w.ticket)
	}
	w.ch <- grant{err: rej, wait: now.Sub(w.enqueued)}
}

// dispatch sends waiter w of t to the engine, under the lock.
func (c *Controller) dispatch(now time.Time, t *tierState, w *waiter) {
	t.remove(w)
	t.inFlight++
	t.hold(w.ticket.ten, 1)
	c.dispatched(w.ticket)
	if w.virtual { // shadow mode: already in flight, now inside the counts as well
		t.shadowed--
		w.ticket.shadowed, w.ticket.virtual = false, nil
		t.startPrefill(now, w.ticket)
		return
	}
	w.ticket.start, w.ticket.wait = now, now.Sub(w.enqueued)
	c.enter(w.ticket) // under the lock, before the next waiter's engine check
	t.startPrefill(now, w.ticket)
	w.ch <- grant{ticket: w.ticket, wait: w.ticket.wait}
}

// dispatched records that tk's request goes to the engine (or, in shadow mode, would
// have): its tenant is charged its prompt. Under the lock.
func (c *Controller) dispatched(tk *Ticket) {
	tk.dispatched = true
	c.served(tk)
}

// Tick does what time alone triggers: waiters past their deadline are turned away
// (QueueTimeout, or EngineDown when the engine is down and the policy is closed), queues
// move on when the engine stops being saturated, and the SLO feedback runs. Run calls it
// periodically; tests call it with a fake clock.
func (c *Controller) Tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	down := c.engineState(now, 0) == EngineDown
	for _, t := range c.all() {
		for w := c.next(t); w != nil && down; w = c.next(t) {
			t.remove(w)
			c.turnAway(w, reject(t, EngineDown, engineRetry, "the engine is down, asleep or its metrics are stale"), now)
		}
		c.expire(now, t)
		t.adjust(now, c.fb)
	}
	if c.shared != nil {
		c.shared.lend(now, c.demand(now))
	}
	c.pump(now)
	c.dropRetired()
}

// expire turns away the waiters of t whose deadline has passed.
func (c *Controller) expire(now time.Time, t *tierState) {
	for k := range t.queue {
		for _, w := range append([]*waiter(nil), t.queue[k]...) {
			if !now.Before(w.deadline) {
				t.remove(w)
				c.turnAway(w, reject(t, QueueTimeout, time.Second, "waited %s without a slot", time.Duration(t.cfg.MaxQueueWait)), now)
			}
		}
	}
}

func (c *Controller) all() []*tierState {
	return append(c.tiers[:len(c.tiers):len(c.tiers)], c.retired...)
}

func (c *Controller) dropRetired() {
	kept := c.retired[:0]
	for _, t := range c.retired {
		if t.busy() {
			kept = append(kept, t)
		}
	}
	c.retired = kept
}

// Run calls Tick every interval until ctx is done.
func (c *Controller) Run(ctx context.Context, interval time.Duration) {
	t := c.opts.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.Tick()
		}
	}
}

func (c *Controller) observe(d Decision) {
	for _, o := range c.opts.Observers {
		o.ObserveDecision(d)
	}
}

// Ticket is an admitted request's place in its tier and in the controller's ledger of
// requests in flight (InFlight). Done must be called once when the request ends; Output
// may be called as its output arrives.
type Ticket struct {
	c      *Controller // nil once Done was called: a second Done does nothing
	t      *tierState  // nil in Off mode: no tier
	class  Class
	model  string
	prompt wire.PromptSize
	tokens int
	start  time.Time
	wait   time.Duration

	// The ledger: the tally the ticket counts in (set when it is admitted, before the
	// caller gets the ticket) and the output tokens counted there so far, or left once
	// it has left the ledger.
	tally *tally
	out   atomic.Int64

	// Its tier's prompts in prefill (tierState.prefill) count it from its dispatch
	// until inPrefill is cleared, once: by its first output, its end, or for a request
	// that does not stream the estimate of its prefill's end.
	inPrefill atomic.Bool
	stream    bool

	// The tenant, set before the caller gets the ticket: its name ("" without tenants),
	// its state (nil in Off mode or without tenants), the output bound of the request,
	// what it reserved of the budgets and their state once it was admitted. dispatched
	// (under the Controller's lock) says its prompt was charged to the tenant's counter.
	tenant     string
	ten        *tenantState
	output     int
	res        reservation
	quota      Quota
	dispatched bool

	// Shadow mode, guarded by the Controller's lock: the ticket is counted in its tier's
	// shadowed requests rather than inFlight, and virtual is its place in the queue while
	// enforce would still hold it there.
	shadowed bool
	virtual  *waiter

	decision Decision // the decision that admitted it, set before the caller gets the ticket
}

// Tier returns the name of the ticket's tier ("" in Off mode).
func (tk *Ticket) Tier() string {
	if tk.t == nil {
		return ""
	}
	return tk.t.cfg.Name
}

// Class returns the class the request is served at: the one it asked for, or its
// tenant's ceiling (TenantConfig.MaxClass) when that is lower.
func (tk *Ticket) Class() Class { return tk.class }

// Tenant returns the name of the ticket's tenant ("" without a tenants section).
func (tk *Ticket) Tenant() string { return tk.tenant }

// Quota returns the state of the tenant's budgets just after the request reserved its
// share of them: what its response's x-ratelimit-* headers carry. Zero without budgets.
func (tk *Ticket) Quota() Quota { return tk.quota }

// Wait returns how long the request waited in the queue.
func (tk *Ticket) Wait() time.Duration { return tk.wait }

// Decision returns the decision that admitted the request: Admitted or Queued (with
// the reason it waited, and its wait), and whether shadow mode let it through; zero in
// Off mode.
func (tk *Ticket) Decision() Decision { return tk.decision }

// EstimatedTokens returns the input length admission estimated for the request: what
// it counts in the ledger for the prompt.
func (tk *Ticket) EstimatedTokens() int { return tk.tokens }

// Done ends the request: it leaves the ledger with its prompt and output (before
// anything else, so every decision from then on sees it gone), its prompt's token count
// goes to the estimator, and — outside Off mode — it releases its slot, feeds its TTFT
// and TPOT to the tier's SLO feedback (streams that ended ok with output, as
// measure.DispatchLatency has them) and its completion to the tier's service rate, and
// moves the queue on. Only the first call does anything; Done is not safe for concurrent
// use with itself.
func (tk *Ticket) Done(res measure.Result) {
	c := tk.c
	if c == nil {
		return
	}
	tk.c = nil
	out := tk.leave()
	if res.InputTokens > 0 {
		c.est.learn(tk.model, tk.prompt, res.InputTokens)
	}
	t := tk.t
	if t == nil { // Off mode
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	if tk.virtual != nil { // ended while enforce would still have held it
		t.remove(tk.virtual)
		tk.virtual = nil
	}
	if tk.shadowed {
		t.shadowed--
	} else {
		t.inFlight--
		t.hold(tk.ten, -1)
	}
	t.finish(now)
	if ttft, tpot, ok := measure.DispatchLatency(res); ok {
		t.slo.observe(now, tk.start, ttft, tpot)
	}
	if tk.ten != nil && tk.dispatched && int64(res.OutputTokens) > out {
		tk.ten.output.Add(int64(res.OutputTokens) - out) // the engine's count, where chunks undercounted
	}
	c.settle(tk, res)
	c.pump(now)
}
