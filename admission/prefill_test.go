package admission

import (
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
)

// prefillTier is one tier that bounds its prompts in prefill at 10,000 tokens, with
// room for ten requests in flight and four waiting, so that only the bound holds
// requests back.
func prefillTier() Config {
	return tierConfig(func(tc *TierConfig) {
		tc.MaxInFlight, tc.MaxQueue, tc.MaxPrefillTokens = 10, 4, 10000
	})
}

// stream is an interactive streaming request of exactly n input tokens: its first output
// reaches the ticket.
func stream(n int) Request {
	r := req(n)
	r.Stream = true
	return r
}

func (h *harness) prefill() int64 {
	h.t.Helper()
	return h.only().PrefillTokens
}

// A tier's prompts count in prefill from admission until their first output or their
// end, whichever comes first, exactly once; a request that would take them past
// max_prefill_tokens is turned away at once, with a Retry-After of when the excess
// drains at the rate the bound implies; one with nothing ahead of it never is.
func TestPrefillBound(t *testing.T) {
	h := newHarness(t, Enforce, prefillTier())
	a, b := h.admitNow(stream(4000)), h.admitNow(stream(4000))
	if got := h.prefill(); got != 8000 {
		t.Fatalf("two prompts of 4000 in prefill: %d tokens", got)
	}
	rej := h.rejectNow(stream(4000), PrefillBacklog)
	if rej.RetryAfter != time.Second { // 2,000 over, a fifth of a 1 s TTFT SLO's 10,000: at least a second
		t.Errorf("Retry-After %v, want the 1s floor", rej.RetryAfter)
	}
	if rej := h.rejectNow(stream(30000), PrefillBacklog); rej.RetryAfter != 2800*time.Millisecond {
		t.Errorf("Retry-After %v for 28,000 tokens over, want 2.8s", rej.RetryAfter)
	}
	if got := h.prefill(); got != 8000 {
		t.Fatalf("rejections changed the prefill count: %d", got)
	}

	a.Output(1) // a's first token: its prefill is over
	a.Output(7) // later output changes nothing
	if got := h.prefill(); got != 4000 {
		t.Fatalf("after a's first token: %d tokens in prefill, want 4000", got)
	}
	c := h.admitNow(stream(4000))
	b.Done(measure.Result{Outcome: measure.EngineError, Status: 500}) // ends without output
	if got := h.prefill(); got != 4000 {
		t.Fatalf("after b ended without output: %d tokens in prefill, want c's 4000", got)
	}
	a.Done(ok)
	c.Output(3)
	c.Done(ok)
	b.Output(5) // after Done: nothing
	if got := h.prefill(); got != 0 {
		t.Fatalf("all done: %d tokens in prefill", got)
	}
	// Alone, a prompt longer than the bound is admitted: nothing else would make it wait.
	big := h.admitNow(stream(50000))
	h.rejectNow(stream(10), PrefillBacklog)
	big.Done(ok)
	if got := h.prefill(); got != 0 {
		t.Fatalf("after the long prompt: %d tokens in prefill", got)
	}
}

// Requests waiting in the queue are dispatched only while they fit the bound: when the
// engine stops being saturated, the queue moves on until the next one would take the
// tier past it, and the rest wait for first tokens.
func TestPrefillBoundQueue(t *testing.T) {
	h := newHarness(t, Enforce, prefillTier())
	saturated := func(s *engine.Snapshot) { s.Waiting = 100 }
	h.eng.Set(snap(h.clock.Now(), saturated))
	var ps []*pending
	for i := range 3 {
		ps = append(ps, h.admitAsync(stream(4000), i+1))
	}
	h.eng.Set(snap(h.clock.Now()))
	h.c.Tick()
	first, second := h.granted(ps[0]), h.granted(ps[1])
	if st := h.only(); st.Queued[Interactive] != 1 || st.PrefillTokens != 8000 {
		t.Fatalf("after the pump: %d waiting, %d tokens in prefill; want 1 and 8000", st.Queued[Interactive], st.PrefillTokens)
	}
	first.Output(1)
	h.c.Tick()
	third := h.granted(ps[2])
	for _, tk := range []*Ticket{first, second, third} {
		tk.Done(ok)
	}
	if got := h.prefill(); got != 0 {
		t.Fatalf("all done: %d tokens in prefill", got)
	}
}

// Shadow mode counts in prefill what enforce would have dispatched: a request over the
// bound is recorded as rejected and let through, but not counted, so the next decisions
// are enforce's; one that enforce would have queued counts from when enforce would have
// dispatched it. In off mode nothing is counted.
func TestPrefillBoundModes(t *testing.T) {
	h := newHarness(t, Shadow, prefillTier())
	a := h.admitNow(stream(8000))
	b := h.admitNow(stream(8000))
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Rejected, Reason: PrefillBacklog, Shadow: true})
	if got := h.prefill(); got != 8000 {
		t.Errorf("shadow mode: %d tokens in prefill, want a's 8000 (enforce turned b away)", got)
	}
	a.Output(1)
	c := h.admitNow(stream(4000)) // enforce admits it: only its own prompt in prefill
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Admitted, Shadow: true})
	for _, tk := range []*Ticket{a, b, c} {
		tk.Done(ok)
	}
	if got := h.prefill(); got != 0 {
		t.Errorf("shadow mode, all done: %d tokens in prefill", got)
	}

	// One slot: a second request waits, virtually, for the first to end, and counts in
	// prefill from then on, as enforce would have dispatched it.
	one := newHarness(t, Shadow, tierConfig(func(tc *TierConfig) { tc.MaxQueue, tc.MaxPrefillTokens = 4, 20000 }))
	first := one.admitNow(stream(6000))
	second := one.admitNow(stream(6000))
	if st := one.only(); st.Queued[Interactive] != 1 || st.PrefillTokens != 6000 {
		t.Fatalf("shadow mode, one slot: %d waiting, %d tokens in prefill; want 1 and the first's 6000", st.Queued[Interactive], st.PrefillTokens)
	}
	first.Done(ok)
	if st := one.only(); st.Queued[Interactive] != 0 || st.PrefillTokens != 6000 {
		t.Fatalf("shadow mode, the slot freed: %d waiting, %d tokens in prefill; want 0 and the second's 6000", st.Queued[Interactive], st.PrefillTokens)
	}
	second.Done(ok)

	off := newHarness(t, Off, prefillTier())
	tks := []*Ticket{off.admitNow(stream(8000)), off.admitNow(stream(8000))}
	if got := off.prefill(); got != 0 {
		t.Errorf("off mode: %d tokens in prefill, want none counted", got)
	}
	for _, tk := range tks {
		tk.Done(ok)
	}
}

// A request that does not stream shows no output before its end: it counts in prefill
// until the estimate of its prefill's end, the prefill ahead of it and its own at the
// rate the bound implies (10,000 tokens in the 1 s TTFT SLO), and no longer. Without a
// bound it is not counted at all.
func TestPrefillBoundNoStream(t *testing.T) {
	h := newHarness(t, Enforce, prefillTier())
	start := h.clock.Now()
	a := h.admitNow(req(4000)) // ends its prefill at 0.4 s
	b := h.admitNow(req(4000)) // 8,000 with a's: 0.8 s
	h.rejectNow(req(4000), PrefillBacklog)
	h.clock.SetTime(start.Add(400 * time.Millisecond))
	if got := h.prefill(); got != 4000 {
		t.Fatalf("at 0.4 s: %d tokens in prefill, want b's 4000", got)
	}
	c := h.admitNow(req(4000)) // 8,000 with b's: 1.2 s
	b.Done(ok)                 // before its estimate: it leaves now, once
	if got := h.prefill(); got != 4000 {
		t.Fatalf("after b's end: %d tokens in prefill, want c's 4000", got)
	}
	h.clock.SetTime(start.Add(1199 * time.Millisecond))
	if got := h.prefill(); got != 4000 {
		t.Fatalf("at 1.199 s: %d tokens in prefill, want c's 4000", got)
	}
	h.clock.SetTime(start.Add(1200 * time.Millisecond))
	if got := h.prefill(); got != 0 {
		t.Fatalf("at 1.2 s: %d tokens in prefill, want none", got)
	}
	a.Done(ok)
	c.Done(ok)
	if got := h.prefill(); got != 0 {
		t.Fatalf("all done: %d tokens in prefill", got)
	}

	unbounded := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 10 }))
	d := unbounded.admitNow(req(4000))
	if got := unbounded.prefill(); got != 0 {
		t.Errorf("no bound: a request that does not stream counted, %d tokens", got)
	}
	d.Done(ok)
}
