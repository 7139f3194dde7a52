package admission

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
)

func TestOffMode(t *testing.T) {
	h := newHarness(t, Off, tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxQueue = 1, 1, 0 }),
		func(o *Options) { o.Saturation.FailClosed = true })
	h.eng.Set(engine.NewSnapshot()) // down, and fail closed: ignored when off
	var tickets []*Ticket
	for range 10 {
		tk := h.admitNow(req(1 << 20))
		if tk.Tier() != "" || tk.Wait() != 0 {
			t.Fatalf("off-mode ticket in tier %q", tk.Tier())
		}
		tickets = append(tickets, tk)
	}
	// No tier counts them, but the ledger does.
	if h.only().InFlight != 0 {
		t.Fatalf("off mode: %d in flight in the tier", h.only().InFlight)
	}
	h.wantLedger(liveOnly(10, 10<<20))
	for _, tk := range tickets {
		tk.Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 5})
	}
	if h.rec.len() != 0 || h.only().InFlight != 0 || h.c.Mode() != Off {
		t.Fatalf("off mode recorded %d decisions, %d in flight", h.rec.len(), h.only().InFlight)
	}
	h.wantLedger(ledgerView{})
}

func TestDoneTwiceReleasesOnce(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 2 }))
	a := h.admitNow(req(1))
	b := h.admitNow(req(1))
	p := h.admitAsync(req(1), 1)
	a.Done(ok)
	c := h.granted(p)
	a.Done(ok) // must not free c's slot
	if st := h.only(); st.InFlight != 2 {
		t.Fatalf("in flight %d after a second Done, want 2", st.InFlight)
	}
	d := h.admitAsync(req(1), 1) // still full
	b.Done(ok)
	h.granted(d).Done(ok)
	c.Done(ok)
	c.Done(ok)
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d, want 0", st.InFlight)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Off, Shadow, Enforce} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, bad := range []string{"", "Enforce", "on"} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
		}
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	if _, err := New(Config{}, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(empty) = %v", err)
	}
}

// Run ticks on the controller's clock, and returns when its ctx ends. Run here in a
// synctest bubble: synctest.Wait returns once the tick the clock's step fired has been
// handled, so the waiter's fate at each step is exact. The queue wait is 2s; the ticker
// ticks every nanosecond, so a step of the clock makes one tick at its end.
func TestRunTicksOnItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Enforce, tierConfig())
		running := h.admitNow(req(10))
		defer running.Done(ok)
		p := h.admitAsync(req(10), 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.c.Run(ctx, time.Nanosecond); close(done) }()
		t.Cleanup(func() { p.cancel(); cancel(); <-done }) // also when the test fails
		synctest.Wait()                                    // Run waits on its ticker
		h.clock.Step(2*time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case o := <-p.ch:
			t.Fatalf("a tick before the queue wait ran out turned the waiter away: %v", o.err)
		default:
		}
		h.clock.Step(time.Nanosecond)
		synctest.Wait()
		select {
		case o := <-p.ch:
			p.ch <- o
		default: // a ticker not on the controller's clock has not ticked: the bubble's time stood still
			t.Fatal("no tick of the controller's clock turned the waiter away at its deadline")
		}
		h.refused(p, QueueTimeout)
	})
}
