package admission

import (
	"strings"
	"testing"
)

func TestPriorityHeadroom(t *testing.T) {
	for _, low := range []Class{Batch, Probe} {
		t.Run(low.String(), func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 5, 4 }))
			var lows []*Ticket
			for range 4 {
				lows = append(lows, h.admitNow(classReq(low)))
			}
			pl := h.admitAsync(classReq(low), 1) // the fifth slot is headroom
			i1 := h.admitNow(classReq(Interactive))
			pi := h.admitAsync(classReq(Interactive), 1)
			lows[0].Done(ok) // the waiting interactive request goes first
			i2 := h.granted(pi)
			if got := h.only().Queued[low]; got != 1 {
				t.Fatalf("%d %s waiting, want 1", got, low)
			}
			lows[1].Done(ok) // 4 in flight: still no headroom for the low class
			if got := h.only().Queued[low]; got != 1 {
				t.Fatalf("%s granted into the headroom", low)
			}
			lows[2].Done(ok) // 3 in flight
			l5 := h.granted(pl)
			wantDecision(t, h.rec.last(t), Decision{Class: low, Verdict: Queued, Reason: InFlightCap})
			for _, tk := range []*Ticket{lows[3], i1, i2, l5} {
				tk.Done(ok)
			}
		})
	}
}

func TestSlots(t *testing.T) {
	tests := []struct {
		limit              float64
		interactive, lower int
	}{
		{0.5, 1, 1}, {1, 1, 1}, {4, 4, 4}, {4.9, 4, 4}, {5, 5, 4}, {9, 9, 8}, {10, 10, 8}, {20, 20, 16}, {64, 64, 52},
	}
	for _, tt := range tests {
		ts := &tierState{limit: tt.limit}
		if got := ts.slots(Interactive); got != tt.interactive {
			t.Errorf("limit %v: interactive slots %d, want %d", tt.limit, got, tt.interactive)
		}
		for _, c := range []Class{Batch, Probe} {
			if got := ts.slots(c); got != tt.lower {
				t.Errorf("limit %v: %s slots %d, want %d", tt.limit, c, got, tt.lower)
			}
		}
	}
}

func TestShed(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 3 }))
	a := h.admitNow(classReq(Interactive))
	b1 := h.admitAsync(classReq(Batch), 1)
	b2 := h.admitAsync(classReq(Batch), 2)
	p1 := h.admitAsync(classReq(Probe), 1)

	// A full queue: an interactive arrival sheds the newest of the lowest class.
	i1 := h.admitAsync(classReq(Interactive), 1)
	h.refused(p1, Shed)
	wantDecision(t, h.rec.last(t), Decision{Class: Probe, Verdict: Rejected, Reason: Shed})
	i2 := h.admitAsync(classReq(Interactive), 2)
	h.refused(b2, Shed) // then the newest batch
	if st := h.only(); st.Queued != [numClasses]int{2, 1, 0} {
		t.Fatalf("queues %v, want 2 interactive and b1", st.Queued)
	}

	// A batch arrival finds nothing below it to shed; a probe neither.
	h.rejectNow(classReq(Batch), QueueFull)
	h.rejectNow(classReq(Probe), QueueFull)
	i3 := h.admitAsync(classReq(Interactive), 3)
	h.refused(b1, Shed)
	// A queue full of interactive requests turns the next one away.
	h.rejectNow(classReq(Interactive), QueueFull)

	a.Done(ok)
	for _, p := range []*pending{i1, i2, i3} { // in order, each after the previous
		h.granted(p).Done(ok)
	}
	if st := h.only(); st.InFlight != 0 || st.queuedTotal() != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestParseClass(t *testing.T) {
	tests := []struct {
		in   string
		want Class
	}{
		{"", Interactive}, {"interactive", Interactive}, {"batch", Batch}, {"probe", Probe},
		{"Batch", Interactive}, {"urgent", Interactive}, {"batch ", Interactive}, {strings.Repeat("x", 10000), Interactive},
	}
	for _, tt := range tests {
		if got := ParseClass(tt.in); got != tt.want {
			t.Errorf("ParseClass(%.20q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
