package admission

import "sync/atomic"

// ledger is the account of the requests in flight: those the controller has let through
// (in every mode) whose ticket has not been released yet, and the KV tokens they hold in
// the engine, as running sums per class group, so that reading them costs the same
// however many requests are open and the per-chunk path adds to one counter.
//
// A request enters it when it is admitted — at once, or when its tier's queue grants it
// — and never while it is being decided or waits in the queue; in Shadow and Enforce
// mode it enters under the controller's lock, so the next decision sees its tokens. It
// leaves it exactly once, when its ticket's Done is called (see Ticket.leave).
type ledger struct {
	live, probe tally // live traffic (interactive and batch) and slogate's own probes
}

// tally is a running count of requests and of the KV tokens they hold: each one's
// estimated prompt plus the output it reported so far.
type tally struct {
	requests atomic.Int64
	kv       atomic.Int64
}

func (l *ledger) tally(c Class) *tally {
	if c == Probe {
		return &l.probe
	}
	return &l.live
}

// kvTokens returns the KV tokens of every request in flight, probes included.
func (l *ledger) kvTokens() int64 { return l.live.kv.Load() + l.probe.kv.Load() }

// left is the output count of a ticket that has left the ledger.
const left = -1

// enter counts tk in the ledger: from now on its prompt holds KV in the engine. It is
// called once per ticket, before the ticket reaches the caller of Admit.
func (c *Controller) enter(tk *Ticket) {
	a := c.led.tally(tk.class)
	tk.tally = a
	a.requests.Add(1)
	a.kv.Add(int64(tk.tokens))
}

// InFlight returns the requests in flight and the KV tokens they hold, over every class
// (probes included): each admitted request's estimated prompt (exact for token-id
// prompts, else its text at the bytes per token learned for its model) plus the output
// tokens reported through Ticket.Output so far. A request counts from the moment it is
// admitted until its ticket's Done; one waiting in a queue does not. It is kept in
// every mode, Off included. Safe for concurrent use and lock-free; the two figures are
// read one after the other, not as one snapshot.
func (c *Controller) InFlight() (requests int, kvTokens int64) {
	l := &c.led
	return int(l.live.requests.Load() + l.probe.requests.Load()), l.kvTokens()
}

// LiveInFlight is InFlight without the requests of the Probe class: the load of live
// traffic alone. Safe for concurrent use.
func (c *Controller) LiveInFlight() (requests int, kvTokens int64) {
	return int(c.led.live.requests.Load()), c.led.live.kv.Load()
}

// Output records that the ticket's request has produced n output tokens so far — a
// running total, not an increment (the proxy passes the output chunks it has seen, a
// lower bound where the engine sends several tokens a chunk) — so that the ledger counts
// them as KV tokens in flight. A total no greater than the last one recorded, and any
// call after Done, change nothing. It is meant for the per-chunk path: it takes no lock
// and does not allocate. Safe for concurrent use with itself and with Done; when it
// races Done, the ledger is exact again once both have returned.
func (tk *Ticket) Output(n int) {
	a := tk.tally
	if a == nil {
		return
	}
	for {
		old := tk.out.Load()
		if old == left || int64(n) <= old {
			return
		}
		if tk.out.CompareAndSwap(old, int64(n)) {
			if old == 0 { // its first output: its prefill is over
				tk.endPrefill()
			}
			a.kv.Add(int64(n) - old)
			if tk.ten != nil {
				tk.ten.output.Add(int64(n) - old)
			}
			return
		}
	}
}

// leave takes the ticket out of the ledger, with its prompt and its output so far, and
// returns that output; only the first call does anything (later ones return 0).
func (tk *Ticket) leave() int64 {
	a := tk.tally
	if a == nil {
		return 0
	}
	out := tk.out.Swap(left)
	if out == left {
		return 0
	}
	a.requests.Add(-1)
	a.kv.Add(-int64(tk.tokens) - out)
	tk.endPrefill() // it ends, if without output still counted in prefill
	return out
}

// PrefillDone says the request's first output can no longer be seen — the proxy passes
// the rest of its stream through unmeasured — so that its prompt leaves its tier's
// prompts in prefill now rather than at its end, as when its first output comes. Safe
// for concurrent use with Output and Done; lock-free.
func (tk *Ticket) PrefillDone() { tk.endPrefill() }

// endPrefill takes the ticket's prompt out of its tier's prefill, if it is still there:
// only the first call does anything. Lock-free, for the per-chunk path.
func (tk *Ticket) endPrefill() {
	if tk.t != nil && tk.inPrefill.CompareAndSwap(true, false) {
		tk.t.prefill.Add(-int64(tk.tokens))
	}
}
