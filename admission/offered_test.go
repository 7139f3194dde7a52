package admission

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
)

// TestOfferedRate offers a tier requests at known rates on a fake clock and reads the
// demand back from Stats: every arrival counts, admitted or turned away, probes do not,
// and the figure falls to zero a minute after the arrivals stop.
func TestOfferedRate(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	c, err := New(Config{Tiers: []TierConfig{
		{Name: "short", MaxInputTokens: 100, MaxInFlight: 2, MaxQueue: 0},
		{Name: "long", MaxInFlight: 1, MaxQueue: 0},
	}}, Options{Clock: clk, Mode: Enforce})
	if err != nil {
		t.Fatal(err)
	}
	offered := func() map[string]float64 {
		out := map[string]float64{}
		for _, ts := range c.Stats().Tiers {
			out[ts.Name] = ts.Offered
		}
		return out
	}
	var tickets []*Ticket
	rejected := 0
	admit := func(class Class, tokens int) {
		r := req(tokens)
		r.Class = class
		tk, err := c.Admit(context.Background(), r)
		var rej *Rejection
		switch {
		case err == nil:
			tickets = append(tickets, tk)
		case errors.As(err, &rej):
			rejected++
		default:
			t.Fatal(err)
		}
	}
	// Four short requests a second for 90 s (two fit, the rest are turned away), one
	// long one every two seconds, and probes that must not count.
	for s := range 90 {
		for range 4 {
			admit(Interactive, 10)
		}
		if s%2 == 0 {
			admit(Interactive, 1000)
		}
		admit(Probe, 10)
		for _, tk := range tickets {
			tk.Done(measure.Result{Stream: true, Outcome: measure.OK})
		}
		tickets = tickets[:0]
		clk.Step(time.Second)
	}
	if rejected == 0 {
		t.Fatal("no request was turned away: the test does not show that rejected arrivals count")
	}
	// The clock is at 90 s: the window holds seconds 31 to 90, and the last second has
	// no arrivals yet: 59 s of 4 short ones, and the 29 long ones of the even seconds
	// from 32 to 88.
	got := offered()
	if math.Abs(got["short"]-4*59.0/60) > 1e-9 || math.Abs(got["long"]-29.0/60) > 1e-9 {
		t.Errorf("after 90 s: offered %v, want short %.4f req/s and long %.4f req/s", got, 4*59.0/60, 29.0/60)
	}
	clk.Step(30 * time.Second)
	if got := offered(); math.Abs(got["short"]-2) > 0.1 {
		t.Errorf("30 s after the last arrival: short offered %v req/s, want about 2 (half the minute)", got["short"])
	}
	clk.Step(31 * time.Second)
	if got := offered(); got["short"] != 0 || got["long"] != 0 {
		t.Errorf("a minute after the last arrival: offered %v, want 0", got)
	}
	// A reload that keeps a tier keeps its demand.
	admit(Interactive, 10)
	if err := c.Reload(Config{Tiers: []TierConfig{
		{Name: "short", MaxInputTokens: 200, MaxInFlight: 4, MaxQueue: 0},
		{Name: "other", MaxInFlight: 1, MaxQueue: 0},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := offered(); math.Abs(got["short"]-1.0/60) > 1e-9 || got["other"] != 0 {
		t.Errorf("after a reload: offered %v, want short 1/60 req/s and other 0", got)
	}
}

// TestRateWindow pins the window's arithmetic: the newest bucket included, the oldest
// dropped as the clock passes it, a clock stepping back changing nothing; for the
// offered load's minute of one-second buckets and the shared budget's ten minutes of
// one-minute buckets. A zero window counts nothing.
func TestRateWindow(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	type point struct{ at, want float64 }
	for _, tc := range []struct {
		name   string
		w      rateWindow
		every  float64 // seconds between arrivals
		n      int     // arrivals from the epoch on
		points []point
	}{
		{"a minute of seconds", newRateWindow(time.Second, offeredSeconds), 0.5, 120, // 2 a second from 0 to 59.5 s
			[]point{{59.9, 2}, {60, 118.0 / 60}, {89.5, 60.0 / 60}, {30, 60.0 / 60}, {119.9, 0}}},
		{"ten minutes of minutes", newRateWindow(time.Minute, sustainedBuckets), 30, 20, // 2 a minute from 0 to 9m30s
			[]point{{599, 20.0 / 600}, {600, 18.0 / 600}, {900, 8.0 / 600}, {300, 8.0 / 600}, {1199, 0}}},
		{"zero", rateWindow{}, 1, 10, []point{{5, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w
			if w.rate(at(5)) != 0 {
				t.Fatal("an empty window has a rate")
			}
			for i := range tc.n {
				w.add(at(float64(i) * tc.every))
			}
			for _, p := range tc.points {
				if got := w.rate(at(p.at)); math.Abs(got-p.want) > 1e-9 {
					t.Errorf("at %v s: %v req/s, want %v", p.at, got, p.want)
				}
			}
		})
	}
}
