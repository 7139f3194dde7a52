package admission

import (
	"net/http"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
)

// TestSleepingEngine checks that a sleeping engine (vLLM sleep mode,
// vllm:engine_sleep_state awake=0) is down for admission whatever the stale policy:
// fresh metrics, but nothing served. New requests are rejected with 503, waiters are
// turned away at the next Tick, and requests are admitted again once it wakes up.
func TestSleepingEngine(t *testing.T) {
	asleep := func(s *engine.Snapshot) { s.Sleeping = true }
	for _, failClosed := range []bool{false, true} {
		name := map[bool]string{false: "fail open", true: "fail closed"}[failClosed]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(), func(o *Options) { o.Saturation.FailClosed = failClosed })
			first := h.admitNow(req(1)) // takes the tier's one slot
			waiter := h.admitAsync(req(1), 1)

			h.eng.Set(snap(h.clock.Now(), asleep))
			h.rejectEngineDown()
			h.c.Tick()
			h.refused(waiter, EngineDown)
			first.Done(ok)

			h.clock.Step(time.Second)
			h.eng.Set(snap(h.clock.Now())) // awake again
			h.admitNow(req(1)).Done(ok)
			wantDecision(t, h.rec.last(t), Decision{Verdict: Admitted})
		})
	}
}

// rejectEngineDown admits a request and fails unless it is rejected at once as
// engine-down, with 503 and the engine's Retry-After, and Stats says the engine is down.
func (h *harness) rejectEngineDown() {
	h.t.Helper()
	rej := h.rejectNow(req(1), EngineDown)
	if rej.Status() != http.StatusServiceUnavailable || rej.RetryAfter != engineRetry {
		h.t.Fatalf("rejection %+v, status %d; want 503 after %v", rej, rej.Status(), engineRetry)
	}
	wantDecision(h.t, h.rec.last(h.t), Decision{Verdict: Rejected, Reason: EngineDown})
	if got := h.c.Stats().Engine; got != EngineDown {
		h.t.Fatalf("Stats().Engine = %s, want engine-down", got)
	}
}
