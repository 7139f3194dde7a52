package synth

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// The schedule's timers run on a fake clock that the tests step; the probes themselves
// run against the simulator in real time. What the scheduler does at which time, to the
// nanosecond, is schedule's tests' business; these check that a Schedule probes, keeps
// the report and is held back through it.

// trafficGuard is a Guard whose answer the test sets.
type trafficGuard struct{ busy atomic.Bool }

var _ Guard = (*trafficGuard)(nil)

func (g *trafficGuard) Busy() (bool, string) {
	if g.busy.Load() {
		return true, "live TTFT p95 above its SLO"
	}
	return false, ""
}

// hangLimit turns a hang into a failure. It bounds waits that end as soon as the code
// does what it should; nothing is asserted about time.
const hangLimit = 30 * time.Second

// await returns the schedule's status once cond holds for it, woken by each change of
// status.
func await(t *testing.T, s *Schedule, what string, cond func(ScheduleStatus) bool) ScheduleStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	st, err := s.Await(ctx, cond)
	if err != nil {
		t.Fatalf("waiting until %s: %v; status %+v", what, err, st)
	}
	return st
}

// step moves the schedule's fake clock on by d once the scheduler waits on it.
func step(clk *clock.Fake, d time.Duration) {
	clk.BlockUntil(1)
	clk.Step(d)
}

// runSchedule runs s until the test ends, checking that Run returns when its ctx ends.
func runSchedule(t *testing.T, s *Schedule) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(hangLimit):
			t.Error("Run did not return after its ctx ended")
		}
	})
}

var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// quickWorkload is a probe of two small cells, count-bounded.
var quickWorkload = Workload{Name: "quick", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1, 2}, Requests: 1}

func TestScheduleTrigger(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	clk := clock.NewFake(epoch)
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: quickWorkload, Clock: clk})
	if _, ok := s.Latest(); ok {
		t.Error("a report before any probe")
	}
	// Asked for before Run starts: the request waits; a second one is refused.
	if !s.Trigger() || s.Trigger() {
		t.Error("Trigger: want the first request accepted and the second refused while it is pending")
	}
	runSchedule(t, s)
	st := await(t, s, "the triggered probe has run", func(st ScheduleStatus) bool { return st.Runs == 1 })
	rep, ok := s.Latest()
	if !ok || len(rep.Cells) != 2 || !GatePassed(rep.Gate) || len(rep.Gate) == 0 {
		t.Fatalf("Latest = %d cells, gate %s, ok %v", len(rep.Cells), verdicts(rep.Gate), ok)
	}
	if st.Running || st.Held != 0 || st.LastErr != "" || !st.LastStart.Equal(epoch) || !st.LastEnd.Equal(epoch) {
		t.Errorf("status %+v; want start and end on the schedule's clock", st)
	}
	// Without an interval nothing more runs until the next trigger, however long it
	// waits (schedule's tests check this exactly); the second probe sends as many
	// requests as the first.
	first, _ := c.counts()
	clk.Step(24 * time.Hour)
	if again, _ := c.counts(); again != first || s.Status().Runs != 1 {
		t.Errorf("probes ran a day later without a trigger: %d requests, %d runs", again-first, s.Status().Runs)
	}
	if !s.Trigger() {
		t.Error("a second trigger was refused")
	}
	st = await(t, s, "the second probe has run", func(st ScheduleStatus) bool { return st.Runs == 2 })
	if again, _ := c.counts(); again != 2*first || !st.LastStart.Equal(epoch.Add(24*time.Hour)) {
		t.Errorf("after the second trigger: %d requests, want %d; status %+v", again, 2*first, st)
	}
}

func TestScheduleInterval(t *testing.T) {
	const every = 20 * time.Second
	_, tg := countedSim(t, enginesim.Config{})
	clk := clock.NewFake(epoch)
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: quickWorkload, Interval: every, Jitter: 0.5, Clock: clk})
	runSchedule(t, s)
	// Each probe comes at most an interval and a half (the jitter) after the last.
	for i := 1; i <= 2; i++ {
		step(clk, every+every/2)
		await(t, s, "a probe has run on the interval", func(st ScheduleStatus) bool { return st.Runs == i })
	}
}

// With live traffic at the start, the probe does not start: it is held, and retried
// after Retry until the traffic is gone.
func TestScheduleHeldAtStart(t *testing.T) {
	const retry = 20 * time.Second
	c, tg := countedSim(t, enginesim.Config{})
	clk := clock.NewFake(epoch)
	g := &trafficGuard{}
	g.busy.Store(true)
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: quickWorkload, Guard: g, Retry: retry, Clock: clk})
	runSchedule(t, s)
	s.Trigger()
	await(t, s, "the probe has been held", func(st ScheduleStatus) bool { return st.Held == 1 })
	step(clk, retry)
	st := await(t, s, "the probe has been held twice", func(st ScheduleStatus) bool { return st.Held == 2 })
	if st.Runs != 0 || !strings.Contains(st.LastErr, "live traffic") || !strings.Contains(st.LastErr, "above its SLO") {
		t.Errorf("status %+v; want no runs and LastErr naming live traffic and the guard's reason", st)
	}
	if _, ok := s.Latest(); ok {
		t.Error("a held probe left a report")
	}
	if arrived, _ := c.counts(); arrived != 0 {
		t.Errorf("%d requests sent while held", arrived)
	}
	g.busy.Store(false)
	step(clk, retry)
	if st := await(t, s, "the probe has run once the traffic is gone", func(st ScheduleStatus) bool { return st.Runs == 1 }); st.LastErr != "" || st.Held != 2 {
		t.Errorf("status %+v after a completed probe", st)
	}
}

// Live traffic rising during a probe stops it; the scheduler retries after Retry and
// completes once the traffic is gone.
func TestScheduleStoppedDuringRun(t *testing.T) {
	const retry = 20 * time.Second
	c, tg := countedSim(t, enginesim.Config{})
	clk := clock.NewFake(epoch)
	g := &trafficGuard{}
	// Two cells of 1 s rounds (on the wall clock: the probe's), stopped in the first.
	w := Workload{Name: "long", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1, 2}, Duration: measure.Duration(time.Second)}
	var kept []Report // told by OnReport: the completed probe only, not the stopped ones
	var mu sync.Mutex
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: w, Guard: g, Retry: retry, Clock: clk, OnReport: func(r Report) {
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, r)
	}})
	runSchedule(t, s)
	s.Trigger()
	await(t, s, "the probe runs", func(st ScheduleStatus) bool { return st.Running })
	c.awaitArrived(t, 1)
	g.busy.Store(true)
	step(clk, time.Second) // the guard's watch asks once a second
	st := await(t, s, "the probe has been stopped", func(st ScheduleStatus) bool { return st.Held == 1 })
	if st.Runs != 0 || st.Running || !strings.Contains(st.LastErr, "live traffic") {
		t.Errorf("status after the stop: %+v", st)
	}
	step(clk, retry)
	await(t, s, "the retry has been held too", func(st ScheduleStatus) bool { return st.Held == 2 })
	g.busy.Store(false)
	step(clk, retry)
	await(t, s, "the probe has completed", func(st ScheduleStatus) bool { return st.Runs == 1 })
	rep, ok := s.Latest()
	if !ok || len(rep.Cells) != 2 {
		t.Errorf("Latest: %d cells, ok %v; want the completed probe's 2", len(rep.Cells), ok)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 1 || len(kept[0].Cells) != 2 || !kept[0].Started.Equal(rep.Started) {
		t.Errorf("OnReport told of %d reports; want the completed probe's only", len(kept))
	}
}

// Run returns when its ctx ends, also in the middle of a probe.
func TestScheduleRunReturns(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	w := Workload{Name: "long", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1}, Duration: measure.Duration(time.Hour)}
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: w, Clock: clock.NewFake(epoch)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	s.Trigger()
	// Past the gate (whose streaming check is one completions request): under load.
	c.awaitArrived(t, 3)
	if !s.Status().Running || s.Trigger() {
		t.Errorf("Trigger accepted while a probe runs (status %+v)", s.Status())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(hangLimit):
		t.Fatal("Run did not return after its ctx ended")
	}
	if st := s.Status(); st.Running || !strings.Contains(st.LastErr, context.Canceled.Error()) {
		t.Errorf("status %+v", st)
	}
}
