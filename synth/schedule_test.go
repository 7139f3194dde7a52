package synth

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
)

// trafficGuard is a Guard whose answer the test sets.
type trafficGuard struct{ busy atomic.Bool }

var _ Guard = (*trafficGuard)(nil)

func (g *trafficGuard) Busy() (bool, string) {
	if g.busy.Load() {
		return true, "live TTFT p95 above its SLO"
	}
	return false, ""
}

// eventually waits for cond, failing the test if it does not hold within a generous
// time. It asserts an outcome, not how long it took.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its ctx ended")
		}
	})
}

// quickWorkload is a probe of two small cells, count-bounded.
var quickWorkload = Workload{Name: "quick", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1, 2}, Requests: 1}

func TestScheduleTrigger(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: quickWorkload})
	if _, ok := s.Latest(); ok {
		t.Error("a report before any probe")
	}
	// Asked for before Run starts: the request waits; a second one is refused.
	if !s.Trigger() || s.Trigger() {
		t.Error("Trigger: want the first request accepted and the second refused while it is pending")
	}
	runSchedule(t, s)
	eventually(t, "the triggered probe has run", func() bool { return s.Status().Runs == 1 })
	rep, ok := s.Latest()
	if !ok || len(rep.Cells) != 2 || !GatePassed(rep.Gate) || len(rep.Gate) == 0 {
		t.Fatalf("Latest = %d cells, gate %s, ok %v", len(rep.Cells), verdicts(rep.Gate), ok)
	}
	st := s.Status()
	if st.Running || st.Held != 0 || st.LastErr != "" || st.LastStart.IsZero() || st.LastEnd.Before(st.LastStart) {
		t.Errorf("status %+v", st)
	}
	// Without an interval nothing more runs until the next trigger.
	arrived, _ := c.counts()
	time.Sleep(100 * time.Millisecond)
	if again, _ := c.counts(); again != arrived || s.Status().Runs != 1 {
		t.Errorf("probes ran without a trigger: %d requests, %d runs", again-arrived, s.Status().Runs)
	}
	if !s.Trigger() {
		t.Error("a second trigger was refused")
	}
	eventually(t, "the second probe has run", func() bool { return s.Status().Runs == 2 })
}

func TestScheduleInterval(t *testing.T) {
	_, tg := countedSim(t, enginesim.Config{})
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: quickWorkload, Interval: 20 * time.Millisecond, Jitter: 0.5})
	runSchedule(t, s)
	eventually(t, "two probes have run on the interval", func() bool { return s.Status().Runs >= 2 })
}

// With live traffic at the start, the probe does not start: it is held, and retried
// after Retry until the traffic is gone.
func TestScheduleHeldAtStart(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	g := &trafficGuard{}
	g.busy.Store(true)
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: quickWorkload, Guard: g, Retry: 20 * time.Millisecond})
	runSchedule(t, s)
	s.Trigger()
	eventually(t, "the probe has been held twice", func() bool { return s.Status().Held >= 2 })
	st := s.Status()
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
	eventually(t, "the probe has run once the traffic is gone", func() bool { return s.Status().Runs == 1 })
	if st := s.Status(); st.LastErr != "" {
		t.Errorf("LastErr %q after a completed probe", st.LastErr)
	}
}

// Live traffic rising during a probe stops it; the scheduler retries after Retry and
// completes once the traffic is gone.
func TestScheduleStoppedDuringRun(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	g := &trafficGuard{}
	// Two cells of 1 s rounds: long enough for the guard's once-a-second watch to see it.
	w := Workload{Name: "long", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1, 2}, Duration: measure.Duration(time.Second)}
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: w, Guard: g, Retry: 20 * time.Millisecond})
	runSchedule(t, s)
	s.Trigger()
	eventually(t, "the probe is sending load", func() bool {
		arrived, _ := c.counts()
		return s.Status().Running && arrived > 0
	})
	g.busy.Store(true)
	eventually(t, "the probe has been stopped", func() bool { return s.Status().Held >= 1 })
	if st := s.Status(); st.Runs != 0 || st.Running || !strings.Contains(st.LastErr, "live traffic") {
		t.Errorf("status after the stop: %+v", st)
	}
	eventually(t, "the retry has been held too", func() bool { return s.Status().Held >= 2 })
	g.busy.Store(false)
	eventually(t, "the probe has completed", func() bool { return s.Status().Runs == 1 })
	rep, ok := s.Latest()
	if !ok || len(rep.Cells) != 2 {
		t.Errorf("Latest: %d cells, ok %v; want the completed probe's 2", len(rep.Cells), ok)
	}
}

// Run returns when its ctx ends, also in the middle of a probe.
func TestScheduleRunReturns(t *testing.T) {
	c, tg := countedSim(t, enginesim.Config{})
	w := Workload{Name: "long", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1}, Duration: measure.Duration(time.Hour)}
	s := NewSchedule(ScheduleConfig{Target: tg, Workload: w})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	s.Trigger()
	// Past the gate (whose streaming check is one completions request): under load.
	eventually(t, "the probe sends load", func() bool {
		arrived, _ := c.counts()
		return s.Status().Running && arrived >= 3
	})
	if s.Trigger() {
		t.Error("Trigger accepted while a probe runs")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its ctx ended")
	}
	if st := s.Status(); st.Running || !strings.Contains(st.LastErr, context.Canceled.Error()) {
		t.Errorf("status %+v", st)
	}
}
