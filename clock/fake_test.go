package clock

import (
	"context"
	"testing"
	"time"
)

var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// fired reports whether c holds a value, and which.
func fired(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimer(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if f.Waiters() != 1 {
		t.Fatalf("%d waiters, want 1", f.Waiters())
	}
	f.Step(time.Second - time.Nanosecond)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("fired a nanosecond early")
	}
	f.Step(time.Nanosecond)
	if v, ok := fired(tm.C()); !ok || !v.Equal(epoch.Add(time.Second)) {
		t.Fatalf("at its time: %v, %v; want %v", v, ok, epoch.Add(time.Second))
	}
	if f.HasWaiters() || tm.Stop() {
		t.Error("a fired timer still waits")
	}
	f.Step(time.Hour)
	if _, ok := fired(tm.C()); ok {
		t.Error("a timer fired twice")
	}
	if !f.Now().Equal(epoch.Add(time.Hour+time.Second)) || f.Since(epoch) != time.Hour+time.Second {
		t.Errorf("Now %v, Since %v", f.Now(), f.Since(epoch))
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() || f.HasWaiters() {
		t.Fatal("Stop of a waiting timer")
	}
	f.Step(time.Minute)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	if tm.Reset(time.Second) {
		t.Error("Reset of a stopped timer reports it waiting")
	}
	f.Step(time.Second)
	// Sent but not received: Reset drops it, as a time.Timer does since Go 1.23.
	if tm.Reset(time.Second) {
		t.Error("Reset of a fired timer reports it waiting")
	}
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a tick sent before Reset was received after it")
	}
	f.Step(time.Second)
	if v, ok := fired(tm.C()); !ok || !v.Equal(f.Now()) {
		t.Errorf("after Reset: %v, %v", v, ok)
	}
	now := f.NewTimer(0)
	if _, ok := fired(now.C()); !ok || f.HasWaiters() {
		t.Error("a timer of 0 did not fire at once")
	}
	if _, ok := fired(f.After(-time.Second)); !ok {
		t.Error("After of a negative duration did not fire at once")
	}
}

func TestFakeTicker(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(10 * time.Second)
	for i := 1; i <= 3; i++ {
		f.Step(10*time.Second - 1)
		if _, ok := fired(tk.C()); ok {
			t.Fatalf("tick %d came early", i)
		}
		f.Step(1)
		if v, ok := fired(tk.C()); !ok || !v.Equal(epoch.Add(time.Duration(i)*10*time.Second)) {
			t.Fatalf("tick %d: %v, %v", i, v, ok)
		}
	}
	// A long step gives one tick, and the next is due on the ticker's period.
	f.Step(35 * time.Second) // to 65 s
	if _, ok := fired(tk.C()); !ok {
		t.Fatal("no tick over 35 s")
	}
	if _, ok := fired(tk.C()); ok {
		t.Fatal("more than one tick kept")
	}
	f.Step(5*time.Second - 1)
	if _, ok := fired(tk.C()); ok {
		t.Fatal("tick before 70 s")
	}
	f.Step(1)
	if _, ok := fired(tk.C()); !ok {
		t.Fatal("no tick at 70 s")
	}
	tk.Stop()
	f.Step(time.Hour)
	if _, ok := fired(tk.C()); ok || f.HasWaiters() {
		t.Error("a stopped ticker ticked")
	}
	defer func() {
		if recover() == nil {
			t.Error("NewTicker(0) did not panic")
		}
	}()
	f.NewTicker(0)
}

// Timers fire earliest first, each with its own due time, and going back fires nothing.
func TestFakeOrderAndSetTime(t *testing.T) {
	f := NewFake(epoch)
	late, early := f.NewTimer(2*time.Second), f.NewTimer(time.Second)
	f.SetTime(epoch.Add(-time.Hour))
	if f.Waiters() != 2 {
		t.Fatalf("going back fired something: %d waiters", f.Waiters())
	}
	f.SetTime(epoch.Add(time.Minute))
	a, okA := fired(early.C())
	b, okB := fired(late.C())
	if !okA || !okB || !a.Equal(epoch.Add(time.Second)) || !b.Equal(epoch.Add(2*time.Second)) {
		t.Errorf("early %v %v, late %v %v", a, okA, b, okB)
	}
}

func TestBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan struct{})
	go func() {
		f.BlockUntil(2)
		close(done)
	}()
	f.NewTimer(time.Second)
	tk := f.NewTicker(time.Second)
	<-done // would hang, and time out, if the second waiter did not wake it
	tk.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.BlockUntilContext(ctx, 2); err != context.Canceled {
		t.Errorf("BlockUntilContext with one waiter and ctx done = %v", err)
	}
	if err := f.BlockUntilContext(ctx, 1); err != nil {
		t.Errorf("BlockUntilContext with one waiter of 1 = %v", err)
	}
}

func TestRealAndOr(t *testing.T) {
	var r Clock = Real{}
	if Or(nil) != r || Or(NewFake(epoch)) == r {
		t.Error("Or")
	}
	tm := r.NewTimer(time.Hour)
	if !tm.Stop() || tm.Reset(time.Hour) || !tm.Stop() {
		t.Error("real timer Stop/Reset")
	}
	if _, ok := fired(tm.C()); ok {
		t.Error("a stopped real timer fired")
	}
	<-r.After(0)
	tk := r.NewTicker(time.Hour)
	tk.Stop()
	if d := r.Since(r.Now()); d < 0 || d > time.Minute {
		t.Errorf("Since(Now()) = %v", d)
	}
}
