package admission

import (
	"container/heap"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// tierState is the live state of one tier. All of it is guarded by the Controller's lock.
type tierState struct {
	cfg      TierConfig
	limiter  *rate.Limiter // nil when the tier has no rate
	inFlight int
	// prefill is the prompt tokens of the tier's requests in flight that have had no
	// output yet (Ticket.endPrefill takes them out, without the lock); timed holds
	// those of requests that do not stream, by the estimated end of their prefill.
	prefill atomic.Int64
	timed   prefillHeap
	// shadowed counts, in shadow mode, the requests in flight that enforce would not have
	// dispatched (yet): turned away, or still in the (virtual) queue. They are outside
	// inFlight, so the shadow decisions see the tier as enforce would have left it.
	shadowed   int
	limit      float64              // the working in-flight cap, in [MinInFlight, MaxInFlight]
	rate       float64              // the working rate of the token bucket, in [Rate, max(Rate, MaxRate)]
	rateHits   int                  // arrivals turned away for the tier's rate since the feedback last ran
	budgetHits int                  // arrivals the shared budget turned away since then: to the feedback, rate hits too
	capHits    int                  // arrivals the in-flight cap held back and then turned away since then
	grown      time.Time            // when the cap last grew without a judgement (adjust)
	held       map[*tenantState]int // the requests of each tenant inside inFlight
	queue      [numClasses][]*waiter
	queued     int
	slo        sloWindow
	finished   []time.Time // recent completions, oldest first, for the service rate
	offered    rateWindow  // arrivals classified into the tier, probes excluded (TierStats.Offered)
	sustained  rateWindow  // the same arrivals over sustainedWindow, for the shared budget
	adjusted   time.Time   // when the feedback last ran
	changed    time.Time   // when the feedback last changed the cap
}

// waiter is a request waiting in a tier's queue. Its channel receives exactly one
// outcome: a ticket, or a rejection.
type waiter struct {
	class    Class
	tokens   int
	enqueued time.Time
	deadline time.Time
	ch       chan grant
	ticket   *Ticket // the ticket it will get when granted
	seq      uint64  // its place in the order of arrival, across tiers
	virtual  bool    // shadow mode: its request is already in flight; nobody reads ch
}

type grant struct {
	ticket *Ticket
	err    *Rejection
	wait   time.Duration // time spent in the queue
}

// serviceWindow is how far back completions count towards a tier's service rate, and
// maxFinished how many of them are kept. A continuous-batching engine finishes requests
// in waves (a batch admitted together ends together), so a window of a few seconds
// swings between none and many and predicts waits from the trough: the noisy-neighbour
// benchmark measured a 10 s window at 0 to 3.7/s around a mean of 1.96/s, where 30 s
// read 1.0 to 2.0/s (docs/benchmarks.md).
const (
	serviceWindow = 30 * time.Second
	maxFinished   = 256
)

func newTierState(cfg TierConfig, now time.Time) *tierState {
	t := &tierState{
		limit:     float64(cfg.MaxInFlight),
		offered:   newRateWindow(time.Second, offeredSeconds),
		sustained: newRateWindow(time.Minute, sustainedBuckets),
	}
	t.configure(cfg, now)
	return t
}

// configure applies a (new) configuration at now, keeping the live state.
func (t *tierState) configure(cfg TierConfig, now time.Time) {
	if cfg.Rate != t.cfg.Rate {
		t.rate = cfg.Rate // a new rate starts over; a reload that keeps it keeps the feedback's
	}
	t.cfg = cfg
	t.rate = min(max(t.rate, cfg.Rate), max(cfg.Rate, cfg.MaxRate))
	switch {
	case cfg.Rate <= 0:
		t.limiter = nil
	case t.limiter == nil:
		t.limiter = rate.NewLimiter(rate.Limit(t.rate), cfg.Burst)
	default: // at the controller's clock, not the wall clock SetLimit would use
		t.limiter.SetLimitAt(now, rate.Limit(t.rate))
		t.limiter.SetBurstAt(now, cfg.Burst)
	}
	t.limit = min(max(t.limit, float64(cfg.MinInFlight)), float64(cfg.MaxInFlight))
}

// slots returns how many requests of class c may be in flight: the whole cap for
// interactive requests; lower classes leave a fifth of it (rounded down) as headroom.
func (t *tierState) slots(c Class) int {
	limit := max(int(t.limit), 1)
	if c == Interactive {
		return limit
	}
	return limit - limit/5
}

// prefillRoom reports whether a request of n prompt tokens fits the tier's bound on
// prompts in prefill (TierConfig.MaxPrefillTokens); with none in prefill it always does.
func (t *tierState) prefillRoom(n int) bool {
	max, p := int64(t.cfg.MaxPrefillTokens), t.prefill.Load()
	return max == 0 || p == 0 || p+int64(n) <= max
}

// startPrefill counts tk's prompt in the tier's prefill from now, as it is dispatched.
// A request that streams leaves the count with its first output or its end; one that
// does not can only be seen to end, so with a bound on the tier's prefill it leaves at
// an estimate of its prefill's end instead — the prefill ahead of it and its own at the
// rate the bound implies (MaxPrefillTokens in one TTFT SLO, an engine draining its
// prefill first come, first served) — and without one it is not counted at all. Under
// the lock.
func (t *tierState) startPrefill(now time.Time, tk *Ticket) {
	if !tk.stream && (t.cfg.MaxPrefillTokens <= 0 || t.cfg.SLO.TTFT <= 0) { // no rate to estimate with
		return
	}
	tk.inPrefill.Store(true) // t is tk.t, set in Admit
	ahead := t.prefill.Add(int64(tk.tokens))
	if tk.out.Load() != 0 { // shadow mode: a request counted late, past its first output
		tk.endPrefill()
		return
	}
	if !tk.stream {
		heap.Push(&t.timed, timedPrefill{at: now.Add(t.prefillTime(ahead)), tk: tk})
	}
}

// releasePrefill ends the count of the requests that do not stream whose estimated
// prefill has ended by now. Under the lock.
func (t *tierState) releasePrefill(now time.Time) {
	for len(t.timed) > 0 && !t.timed[0].at.After(now) {
		heap.Pop(&t.timed).(timedPrefill).tk.endPrefill()
	}
}

// timedPrefill is a request that does not stream, counted in its tier's prefill until at.
type timedPrefill struct {
	at time.Time
	tk *Ticket
}

// prefillHeap orders timedPrefill by at, earliest first (container/heap).
type prefillHeap []timedPrefill

func (h prefillHeap) Len() int           { return len(h) }
func (h prefillHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h prefillHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *prefillHeap) Push(x any)        { *h = append(*h, x.(timedPrefill)) }
func (h *prefillHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = timedPrefill{} // drop the ticket
	*h = old[:len(old)-1]
	return x
}

// prefillTime estimates how long the engine takes to prefill n prompt tokens at the rate
// the tier's bound implies, MaxPrefillTokens in one TTFT SLO; at most a day, and 0
// without a bound or an SLO.
func (t *tierState) prefillTime(n int64) time.Duration {
	if t.cfg.MaxPrefillTokens <= 0 || t.cfg.SLO.TTFT <= 0 {
		return 0
	}
	secs := float64(n) / float64(t.cfg.MaxPrefillTokens) * time.Duration(t.cfg.SLO.TTFT).Seconds()
	return time.Duration(min(secs, (24*time.Hour).Seconds()) * float64(time.Second))
}

// prefillRetry estimates when a request of n prompt tokens would fit the tier's bound on
// prompts in prefill: the time for the excess to drain (prefillTime), at least a second.
func (t *tierState) prefillRetry(n int) time.Duration {
	return max(t.prefillTime(t.prefill.Load()+int64(n)-int64(t.cfg.MaxPrefillTokens)), time.Second)
}

// hold counts n more (or fewer) requests of tenant ts inside the tier's in-flight count;
// nil (no tenant) counts nothing.
func (t *tierState) hold(ts *tenantState, n int) {
	if ts == nil {
		return
	}
	if t.held == nil {
		t.held = map[*tenantState]int{}
	}
	if t.held[ts] += n; t.held[ts] <= 0 {
		delete(t.held, ts)
	}
}

// ahead returns the waiters that would be served before a new request of class c.
func (t *tierState) ahead(c Class) int {
	n := 0
	for k := Interactive; k <= c; k++ {
		n += len(t.queue[k])
	}
	return n
}

// serviceRate returns the tier's recent completions per second, or 0 when too few
// completions are known to tell: n completions since the first of the window span n-1
// intervals (and the time since the last, so an idle tier's rate decays).
func (t *tierState) serviceRate(now time.Time) float64 {
	i, _ := slices.BinarySearchFunc(t.finished, now.Add(-serviceWindow), func(a, b time.Time) int { return a.Compare(b) })
	recent := t.finished[i:]
	if len(recent) < 2 {
		return 0
	}
	span := now.Sub(recent[0]).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(len(recent)-1) / span
}

// predictWait estimates the wait of a request with n requests ahead of it: the time for
// the tier to finish n+1 requests at its recent service rate; 0 when it cannot tell.
func (t *tierState) predictWait(now time.Time, n int) time.Duration {
	r := t.serviceRate(now)
	if r == 0 {
		return 0
	}
	return time.Duration(float64(n+1) / r * float64(time.Second))
}

// busy reports whether the tier has requests in flight or waiting.
func (t *tierState) busy() bool { return t.inFlight > 0 || t.shadowed > 0 || t.queued > 0 }

// finish records a completion at now, for the service rate.
func (t *tierState) finish(now time.Time) {
	if len(t.finished) >= maxFinished {
		t.finished = t.finished[1:]
	}
	t.finished = append(t.finished, now)
}

// enqueue adds w at the back of its class's queue.
func (t *tierState) enqueue(w *waiter) {
	t.queue[w.class] = append(t.queue[w.class], w)
	t.queued++
	if ts := w.ticket.ten; ts != nil {
		ts.queued++
	}
}

// remove takes w out of the queue, reporting whether it was there.
func (t *tierState) remove(w *waiter) bool {
	q := t.queue[w.class]
	i := slices.Index(q, w)
	if i < 0 {
		return false
	}
	t.queue[w.class] = slices.Delete(q, i, i+1)
	t.queued--
	if ts := w.ticket.ten; ts != nil {
		ts.queued--
	}
	return true
}

// victim returns the newest waiter of the lowest class below c, to shed for a request of
// class c when the queue is full; nil when there is none.
func (t *tierState) victim(c Class) *waiter {
	for k := numClasses - 1; k > c; k-- {
		if q := t.queue[k]; len(q) > 0 {
			return q[len(q)-1]
		}
	}
	return nil
}
