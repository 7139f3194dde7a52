package admission

import (
	"context"
	"errors"
	"testing"
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

func TestRunStopsWithContext(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.c.Run(ctx, time.Millisecond); close(done) }()
	cancel()
	<-done
}
