package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/slogate/slogate/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run in a synctest bubble on a fake clock: the test moves the clock, and
// synctest.Wait returns once the scheduler has done all it will do at that time, so
// that a check that something has not happened (yet) is exact.

var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// guard is a Guard whose answer the test sets.
type guard struct{ busy atomic.Bool }

func (g *guard) Busy() (bool, string) {
	if g.busy.Load() {
		return true, "the test says so"
	}
	return false, ""
}

// start runs s until the test ends.
func start(t *testing.T, s *Scheduler) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// settle returns once every goroutine of the bubble waits: for the clock, a trigger or
// the test.
func settle() { synctest.Wait() }

func TestTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		var runs atomic.Int32
		s := New(Config{Name: "on request", Clock: clk}, func(context.Context) error { runs.Add(1); return nil })
		start(t, s)
		if !s.Trigger() {
			t.Fatal("Trigger refused on an idle scheduler")
		}
		settle()
		if st := s.Status(); st.Runs != 1 || runs.Load() != 1 || !st.LastStart.Equal(epoch) {
			t.Fatalf("after a trigger: %d runs, %+v", runs.Load(), st)
		}
		// Without an interval the scheduler waits on no timer, and a day brings no run.
		if clk.HasWaiters() {
			t.Errorf("%d timers armed without an interval", clk.Waiters())
		}
		clk.Step(24 * time.Hour)
		settle()
		if runs.Load() != 1 {
			t.Errorf("%d runs a day later without a trigger or interval, want 1", runs.Load())
		}
		if !s.Trigger() {
			t.Fatal("a second trigger was refused")
		}
		settle()
		if runs.Load() != 2 || !s.Status().LastStart.Equal(epoch.Add(24*time.Hour)) {
			t.Errorf("after a second trigger: %d runs, %+v", runs.Load(), s.Status())
		}
	})
}

// Each run comes an interval after the last one ended, plus up to Jitter of it: not a
// nanosecond before the interval, and by then plus the most jitter can add.
func TestInterval(t *testing.T) {
	const every = 5 * time.Second
	for _, tc := range []struct {
		name   string
		jitter float64
		spread time.Duration // how much later than the interval a run may come, at most
	}{{"no jitter", 0, 0}, {"jitter", 1, every - time.Nanosecond}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := clock.NewFake(epoch)
				var runs atomic.Int32
				start(t, New(Config{Interval: every, Jitter: tc.jitter, Clock: clk}, func(context.Context) error { runs.Add(1); return nil }))
				for i := int32(1); i <= 3; i++ {
					settle()
					clk.Step(every - time.Nanosecond)
					settle()
					if runs.Load() != i-1 {
						t.Fatalf("%d runs a nanosecond before run %d can be due", runs.Load(), i)
					}
					clk.Step(tc.spread + time.Nanosecond)
					settle()
					if runs.Load() != i {
						t.Fatalf("%d runs once run %d is due at the latest", runs.Load(), i)
					}
				}
			})
		})
	}
}

func TestHeldBackByLiveTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retry = 5 * time.Second
		clk := clock.NewFake(epoch)
		g := &guard{}
		g.busy.Store(true)
		var runs atomic.Int32
		s := New(Config{Guard: g, Retry: retry, Clock: clk}, func(context.Context) error { runs.Add(1); return nil })
		start(t, s)
		s.Trigger()
		settle()
		if st := s.Status(); st.Held != 1 || runs.Load() != 0 || !strings.Contains(st.LastErr, "live traffic") || !strings.Contains(st.LastErr, "the test says so") {
			t.Fatalf("while busy: %d runs, %+v", runs.Load(), st)
		}
		clk.Step(retry - time.Nanosecond)
		settle()
		if st := s.Status(); st.Held != 1 {
			t.Fatalf("retried before Retry: %+v", st)
		}
		clk.Step(time.Nanosecond)
		settle()
		if st := s.Status(); st.Held != 2 || runs.Load() != 0 {
			t.Fatalf("Retry after the first hold: %d runs, %+v", runs.Load(), st)
		}
		g.busy.Store(false)
		clk.Step(retry)
		settle()
		if st := s.Status(); st.Runs != 1 || runs.Load() != 1 || st.LastErr != "" {
			t.Errorf("once the traffic is gone: %d runs, %+v", runs.Load(), st)
		}
	})
}

func TestStoppedWhenLiveTrafficRises(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = time.Second
		clk := clock.NewFake(epoch)
		g := &guard{}
		var stopped atomic.Value
		s := New(Config{Guard: g, Poll: poll, Retry: time.Hour, Clock: clk}, func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Store(context.Cause(ctx))
			return ctx.Err()
		})
		start(t, s)
		s.Trigger()
		settle()
		if !s.Status().Running || s.Trigger() {
			t.Fatalf("a running task: %+v, and Trigger accepted a second run", s.Status())
		}
		g.busy.Store(true)
		clk.Step(poll - time.Nanosecond)
		settle()
		if st := s.Status(); !st.Running || st.Held != 0 {
			t.Fatalf("stopped before the guard was asked again: %+v", st)
		}
		clk.Step(time.Nanosecond)
		settle()
		if err, _ := stopped.Load().(error); !errors.Is(err, ErrHeld) {
			t.Errorf("the task's context ended with %v, want ErrHeld", err)
		}
		if st := s.Status(); st.Running || st.Runs != 0 || st.Held != 1 {
			t.Errorf("after the stop: %+v", st)
		}
	})
}

func TestFailureIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		s := New(Config{Clock: clk}, func(context.Context) error { clk.Step(time.Second); return errors.New("engine on fire") })
		start(t, s)
		s.Trigger()
		settle()
		if st := s.Status(); st.Runs != 0 || st.Held != 0 || st.LastErr != "engine on fire" || st.LastEnd.Sub(st.LastStart) != time.Second {
			t.Errorf("status %+v", st)
		}
	})
}

// Await returns once its condition holds, and with ctx's error if it never does.
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s := New(Config{Clock: clock.NewFake(epoch)}, func(context.Context) error { <-release; return nil })
		start(t, s)
		s.Trigger()
		ctx := context.Background()
		if st, err := s.Await(ctx, func(st Status) bool { return st.Running }); err != nil || !st.Running {
			t.Fatalf("Await(running) = %+v, %v", st, err)
		}
		close(release)
		if st, err := s.Await(ctx, func(st Status) bool { return st.Runs == 1 }); err != nil || st.Running {
			t.Fatalf("Await(one run) = %+v, %v", st, err)
		}
		short, cancel := context.WithTimeout(ctx, time.Minute) // the bubble's time: no real wait
		defer cancel()
		if st, err := s.Await(short, func(st Status) bool { return st.Runs == 2 }); !errors.Is(err, context.DeadlineExceeded) || st.Runs != 1 {
			t.Errorf("Await(never) = %+v, %v", st, err)
		}
	})
}
