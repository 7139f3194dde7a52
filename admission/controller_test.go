package admission

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/wire"
)

func TestAdmitAtOnce(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 2 }))
	tk := h.admitNow(req(10))
	if tk.Tier() != "t" || tk.Wait() != 0 || tk.EstimatedTokens() != 10 {
		t.Fatalf("ticket: tier %q wait %v tokens %d", tk.Tier(), tk.Wait(), tk.EstimatedTokens())
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Class: Interactive, Verdict: Admitted, Reason: NoReason})
	if got := h.only().InFlight; got != 1 {
		t.Fatalf("in flight %d, want 1", got)
	}
	tk.Done(ok)
	if got := h.only().InFlight; got != 0 {
		t.Fatalf("in flight after Done %d, want 0", got)
	}
}

func TestTierSelection(t *testing.T) {
	tiers := func(lastMax int) Config {
		return Config{Tiers: []TierConfig{
			{Name: "a", MaxInputTokens: 100, MaxInFlight: 100},
			{Name: "b", MaxInputTokens: 1000, MaxInFlight: 100},
			{Name: "c", MaxInputTokens: lastMax, MaxInFlight: 100},
		}}
	}
	tests := []struct {
		name    string
		lastMax int
		prompt  wire.PromptSize
		want    string
	}{
		{name: "empty prompt", prompt: wire.PromptSize{}, want: "a"},
		{name: "one token", prompt: wire.PromptSize{TokenIDs: 1}, want: "a"},
		{name: "exactly the first bound", prompt: wire.PromptSize{TokenIDs: 100}, want: "a"},
		{name: "one above the first bound", prompt: wire.PromptSize{TokenIDs: 101}, want: "b"},
		{name: "exactly the second bound", prompt: wire.PromptSize{TokenIDs: 1000}, want: "b"},
		{name: "above the second bound", prompt: wire.PromptSize{TokenIDs: 1001}, want: "c"},
		{name: "far above: last tier unbounded", prompt: wire.PromptSize{TokenIDs: 1 << 30}, want: "c"},
		{name: "above a bounded last tier still goes to it", lastMax: 5000, prompt: wire.PromptSize{TokenIDs: 6000}, want: "c"},
		{name: "text at 4 bytes per token, on the bound", prompt: wire.PromptSize{TextBytes: 400}, want: "a"},
		{name: "text one byte over rounds up", prompt: wire.PromptSize{TextBytes: 401}, want: "b"},
		{name: "token ids plus text", prompt: wire.PromptSize{TokenIDs: 90, TextBytes: 44}, want: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, tiers(tt.lastMax))
			tk := h.admitNow(Request{Model: "m", Prompt: tt.prompt})
			defer tk.Done(ok)
			if tk.Tier() != tt.want {
				t.Fatalf("tier %q (%d tokens), want %q", tk.Tier(), tk.EstimatedTokens(), tt.want)
			}
			if d := h.rec.last(t); d.Tier != tt.want {
				t.Fatalf("decision tier %q, want %q", d.Tier, tt.want)
			}
		})
	}
}

func TestTierRate(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxInFlight = 2, 2, 100 }))
	for range 2 { // the burst
		defer h.admitNow(req(1)).Done(ok)
	}
	rej := h.rejectNow(req(1), TierRate)
	if rej.Status() != http.StatusTooManyRequests || rej.Tier != "t" || !strings.Contains(rej.Message, "rate") {
		t.Fatalf("rejection %+v (status %d)", rej, rej.Status())
	}
	if rej.RetryAfter != 500*time.Millisecond { // one token at 2/s
		t.Fatalf("RetryAfter %v, want 500ms", rej.RetryAfter)
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Rejected, Reason: TierRate})

	h.clock.Step(200 * time.Millisecond)
	if rej := h.rejectNow(req(1), TierRate); rej.RetryAfter != 300*time.Millisecond {
		t.Fatalf("RetryAfter %v after 200ms, want 300ms (rejections must not take tokens)", rej.RetryAfter)
	}
	h.clock.Step(300 * time.Millisecond)
	defer h.admitNow(req(1)).Done(ok)
	h.rejectNow(req(1), TierRate)
}

// A request turned away for another reason gives its arrival token back: the bucket
// counts admitted arrivals.
func TestTierRateRefundsRejected(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxQueue = 1, 1, 0 }))
	a := h.admitNow(req(1))
	h.clock.Step(time.Second)      // the bucket refills
	h.rejectNow(req(1), QueueFull) // no queue: the cap turns it away as a full queue
	a.Done(ok)
	defer h.admitNow(req(1)).Done(ok) // the token is still there
}

func TestQueuedThenGranted(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig())
	a := h.admitNow(req(1))
	p := h.admitAsync(req(1), 1)
	if st := h.only(); st.InFlight != 1 || st.Queued[Interactive] != 1 {
		t.Fatalf("stats %+v, want 1 in flight and 1 waiting", st)
	}
	h.clock.Step(300 * time.Millisecond)
	a.Done(ok)
	b := h.granted(p)
	defer b.Done(ok)
	if b.Wait() != 300*time.Millisecond || b.Tier() != "t" {
		t.Fatalf("granted ticket waited %v in %q, want 300ms in t", b.Wait(), b.Tier())
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Queued, Reason: InFlightCap, Wait: 300 * time.Millisecond})
	if st := h.only(); st.InFlight != 1 || st.queuedTotal() != 0 {
		t.Fatalf("stats %+v, want 1 in flight and none waiting", st)
	}
}

func TestQueueFull(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 1 }))
	a := h.admitNow(req(1))
	p := h.admitAsync(req(1), 1)
	rej := h.rejectNow(req(1), QueueFull)
	if rej.Status() != http.StatusTooManyRequests || rej.RetryAfter < time.Second {
		t.Fatalf("rejection %+v, status %d; want 429 and RetryAfter >= 1s", rej, rej.Status())
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Rejected, Reason: QueueFull})
	a.Done(ok)
	h.granted(p).Done(ok)
}

func TestQueueTimeout(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig())
	a := h.admitNow(req(1))
	defer a.Done(ok)
	p := h.admitAsync(req(1), 1)
	h.clock.Step(2*time.Second - time.Millisecond)
	h.c.Tick()
	if got := h.only().Queued[Interactive]; got != 1 {
		t.Fatalf("%d waiting just before the deadline, want 1", got)
	}
	h.clock.Step(time.Millisecond)
	h.c.Tick()
	rej := h.refused(p, QueueTimeout)
	if rej.Status() != http.StatusTooManyRequests || rej.RetryAfter <= 0 {
		t.Fatalf("rejection %+v", rej)
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Rejected, Reason: QueueTimeout, Wait: 2 * time.Second})
	if got := h.only().queuedTotal(); got != 0 {
		t.Fatalf("%d still waiting", got)
	}
}

// serveAtOneASecond completes n requests one second apart, so that the tier's service
// rate is 1/s (n completions span n-1 seconds).
func (h *harness) serveAtOneASecond(n int) {
	h.t.Helper()
	for range n {
		h.clock.Step(time.Second)
		h.admitNow(req(1)).Done(ok)
	}
}

func TestPredictedLate(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 10 }))
	h.serveAtOneASecond(4)
	if r := h.only().ServiceRate; r != 1 {
		t.Fatalf("service rate %v, want 1/s", r)
	}
	a := h.admitNow(req(1))
	p1 := h.admitAsync(req(1), 1) // predicted 1s
	p2 := h.admitAsync(req(1), 2) // predicted 2s: not above the 2s max
	rej := h.rejectNow(req(1), PredictedLate)
	if rej.RetryAfter != 3*time.Second || rej.Status() != http.StatusTooManyRequests {
		t.Fatalf("rejection %+v: want RetryAfter 3s (3 completions at 1/s), 429", rej)
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Rejected, Reason: PredictedLate})
	if got := h.only().Queued[Interactive]; got != 2 {
		t.Fatalf("%d waiting, want 2", got)
	}
	a.Done(ok)
	b := h.granted(p1)
	b.Done(ok)
	h.granted(p2).Done(ok)
}

func TestClientGoneWhileQueued(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig())
	a := h.admitNow(req(1))
	p := h.admitAsync(req(1), 1)
	h.clock.Step(500 * time.Millisecond)
	p.cancel()
	o := p.result()
	if o.tk != nil || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("Admit = %v, %v; want context.Canceled", o.tk, o.err)
	}
	var rej *Rejection
	if !errors.As(o.err, &rej) || rej.Reason != ClientGone || rej.Tier != "t" {
		t.Fatalf("a client that left got %v; want a ClientGone rejection naming its tier", o.err)
	}
	wantDecision(t, h.rec.last(t), Decision{Tier: "t", Verdict: Rejected, Reason: ClientGone, Wait: 500 * time.Millisecond})
	if st := h.only(); st.queuedTotal() != 0 || st.InFlight != 1 {
		t.Fatalf("stats %+v, want nobody waiting, 1 in flight", st)
	}
	a.Done(ok)
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d after Done: the gone client was granted", st.InFlight)
	}
}

func TestSaturation(t *testing.T) {
	tests := []struct {
		name      string
		edit      func(*engine.Snapshot)
		kv        int // the prompt of a request slogate has in flight; 0: none
		saturated bool
	}{
		{name: "engine queue at the threshold", edit: func(s *engine.Snapshot) { s.Waiting = 8 }, saturated: true},
		{name: "engine queue below the threshold", edit: func(s *engine.Snapshot) { s.Waiting = 7 }},
		{name: "KV usage at the threshold", edit: func(s *engine.Snapshot) { s.KVUsage = 0.9 }, saturated: true},
		{name: "KV usage below the threshold", edit: func(s *engine.Snapshot) { s.KVUsage = 0.89 }},
		{name: "unknown KV usage and queue", edit: func(s *engine.Snapshot) {
			s.KVUsage, s.Waiting = engine.NewSnapshot().KVUsage, engine.NewSnapshot().Waiting
		}},
		{name: "own KV tokens plus the request over capacity", edit: func(s *engine.Snapshot) { s.KVCapacityTokens = 1000 }, kv: 851, saturated: true},
		{name: "own KV tokens plus the request exactly at the threshold", edit: func(s *engine.Snapshot) { s.KVCapacityTokens = 1000 }, kv: 850},
		{name: "own KV tokens with unknown capacity", kv: 1 << 40},
		// vLLM's num_requests_waiting_by_reason: deferred requests wait by design
		// (e.g. long prefills held back), only capacity-waiting ones mean saturation.
		{name: "deferred waiting above the threshold, capacity waiting below", edit: func(s *engine.Snapshot) { s.Waiting, s.WaitingCapacity = 40, 7 }},
		{name: "capacity waiting at the threshold", edit: func(s *engine.Snapshot) { s.Waiting, s.WaitingCapacity = 8, 8 }, saturated: true},
		{name: "no reason given: all waiting count", edit: func(s *engine.Snapshot) { s.Waiting = 40 }, saturated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 10 }))
			h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) {
				if tt.edit != nil {
					tt.edit(s)
				}
			}))
			var holder *Ticket // admitted first: with nothing in flight it always is
			if tt.kv > 0 {
				holder = h.admitNow(req(tt.kv))
			}
			r := req(50)
			if !tt.saturated {
				h.admitNow(r).Done(ok)
				if holder != nil {
					holder.Done(ok)
				}
				wantDecision(t, h.rec.last(t), Decision{Verdict: Admitted})
				return
			}
			if got := h.c.Stats().Engine; got != Saturated && tt.kv == 0 {
				t.Fatalf("Stats().Engine = %s, want saturated", got)
			}
			p := h.admitAsync(r, 1)
			h.c.Tick()
			if got := h.only().Queued[Interactive]; got != 1 {
				t.Fatalf("granted while the engine is saturated (%d waiting)", got)
			}
			h.clock.Step(time.Second)
			h.eng.Set(snap(h.clock.Now()))
			if holder != nil {
				holder.Done(ok)
			}
			h.c.Tick()
			h.granted(p).Done(ok)
			wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: Saturated, Wait: time.Second})
		})
	}
}

func TestStaleEngine(t *testing.T) {
	stale := []struct {
		name string
		snap func(now time.Time) engine.Snapshot
	}{
		{name: "never scraped", snap: func(time.Time) engine.Snapshot { return engine.NewSnapshot() }},
		{name: "scrape failing", snap: func(now time.Time) engine.Snapshot {
			return snap(now, func(s *engine.Snapshot) { s.Up, s.Err = false, errors.New("connection refused") })
		}},
		{name: "older than stale_after", snap: func(now time.Time) engine.Snapshot {
			return snap(now.Add(-5*time.Second-time.Nanosecond), func(s *engine.Snapshot) { s.Waiting, s.KVUsage = 1000, 1 })
		}},
	}
	for _, tt := range stale {
		t.Run(tt.name+"/fail closed", func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(), func(o *Options) { o.Saturation.FailClosed = true })
			h.eng.Set(tt.snap(h.clock.Now()))
			h.rejectEngineDown()
		})
		t.Run(tt.name+"/fail open", func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig())
			h.eng.Set(tt.snap(h.clock.Now()))
			h.admitNow(req(1)).Done(ok)
			wantDecision(t, h.rec.last(t), Decision{Verdict: Admitted})
		})
	}
	t.Run("exactly stale_after old is fresh", func(t *testing.T) {
		h := newHarness(t, Enforce, tierConfig(), func(o *Options) { o.Saturation.FailClosed = true })
		h.eng.Set(snap(h.clock.Now().Add(-5 * time.Second)))
		h.admitNow(req(1)).Done(ok)
	})
	t.Run("no engine source", func(t *testing.T) {
		h := newHarness(t, Enforce, tierConfig(), func(o *Options) { o.Engine, o.Saturation.FailClosed = nil, true })
		h.admitNow(req(1)).Done(ok)
	})
}

func TestEngineDownWhileWaiting(t *testing.T) {
	for _, closed := range []bool{true, false} {
		t.Run(map[bool]string{true: "fail closed rejects", false: "fail open grants"}[closed], func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(), func(o *Options) { o.Saturation.FailClosed = closed })
			h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Waiting = 100 }))
			p1 := h.admitAsync(req(1), 1)
			p2 := h.admitAsync(req(1), 2)
			h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Up = false }))
			h.c.Tick()
			if closed {
				for _, p := range []*pending{p1, p2} {
					if rej := h.refused(p, EngineDown); rej.Status() != http.StatusServiceUnavailable {
						t.Fatalf("status %d, want 503", rej.Status())
					}
				}
				wantDecision(t, h.rec.last(t), Decision{Verdict: Rejected, Reason: EngineDown})
			} else {
				h.granted(p1).Done(ok) // cap 1: the second follows the first
				h.granted(p2).Done(ok)
			}
			if st := h.only(); st.queuedTotal() != 0 || st.InFlight != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestNoQueue(t *testing.T) {
	t.Run("cap full", func(t *testing.T) {
		h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 0 }))
		defer h.admitNow(req(1)).Done(ok)
		rej := h.rejectNow(req(1), QueueFull) // a missing queue is a full one
		if rej.Status() != http.StatusTooManyRequests || rej.RetryAfter != time.Second {
			t.Fatalf("rejection %+v", rej)
		}
		wantDecision(t, h.rec.last(t), Decision{Verdict: Rejected, Reason: QueueFull})
	})
	t.Run("engine saturated", func(t *testing.T) {
		h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 0 }))
		h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.KVUsage = 0.95 }))
		h.rejectNow(req(1), Saturated)
	})
}
