package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guard is a Guard whose answer the test sets.
type guard struct{ busy atomic.Bool }

func (g *guard) Busy() (bool, string) {
	if g.busy.Load() {
		return true, "the test says so"
	}
	return false, ""
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// start runs s until the test ends.
func start(t *testing.T, s *Scheduler) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestTriggerAndInterval(t *testing.T) {
	var runs atomic.Int32
	task := func(context.Context) error { runs.Add(1); return nil }

	s := New(Config{Name: "on request"}, task)
	start(t, s)
	if !s.Trigger() {
		t.Fatal("Trigger refused on an idle scheduler")
	}
	eventually(t, "the triggered run", func() bool { return s.Status().Runs == 1 })
	time.Sleep(20 * time.Millisecond)
	if runs.Load() != 1 {
		t.Errorf("%d runs without a trigger or interval, want 1", runs.Load())
	}

	every := New(Config{Name: "interval", Interval: 5 * time.Millisecond, Jitter: 1}, task)
	start(t, every)
	eventually(t, "runs on the interval", func() bool { return every.Status().Runs >= 3 })
}

func TestHeldBackByLiveTraffic(t *testing.T) {
	g := &guard{}
	g.busy.Store(true)
	var runs atomic.Int32
	s := New(Config{Guard: g, Retry: 5 * time.Millisecond}, func(context.Context) error { runs.Add(1); return nil })
	start(t, s)
	s.Trigger()
	eventually(t, "two held starts", func() bool { return s.Status().Held >= 2 })
	if st := s.Status(); runs.Load() != 0 || !strings.Contains(st.LastErr, "live traffic") || !strings.Contains(st.LastErr, "the test says so") {
		t.Fatalf("while busy: %d runs, %+v", runs.Load(), st)
	}
	g.busy.Store(false)
	eventually(t, "a run once the traffic is gone", func() bool { return s.Status().Runs == 1 })
}

func TestStoppedWhenLiveTrafficRises(t *testing.T) {
	g := &guard{}
	started := make(chan struct{})
	var stopped atomic.Value
	s := New(Config{Guard: g, Poll: time.Millisecond, Retry: time.Hour}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		stopped.Store(context.Cause(ctx))
		return ctx.Err()
	})
	start(t, s)
	s.Trigger()
	<-started
	if !s.Status().Running || s.Trigger() {
		t.Fatalf("a running task: %+v, and Trigger accepted a second run", s.Status())
	}
	g.busy.Store(true)
	eventually(t, "the run to stop", func() bool { return s.Status().Held == 1 })
	if err, _ := stopped.Load().(error); !errors.Is(err, ErrHeld) {
		t.Errorf("the task's context ended with %v, want ErrHeld", err)
	}
	if st := s.Status(); st.Running || st.Runs != 0 {
		t.Errorf("after the stop: %+v", st)
	}
}

func TestFailureIsRecorded(t *testing.T) {
	s := New(Config{}, func(context.Context) error { return errors.New("engine on fire") })
	start(t, s)
	s.Trigger()
	eventually(t, "the failed run", func() bool { return s.Status().LastErr != "" })
	if st := s.Status(); st.Runs != 0 || st.Held != 0 || st.LastErr != "engine on fire" || st.LastEnd.Before(st.LastStart) {
		t.Errorf("status %+v", st)
	}
}
