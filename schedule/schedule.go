// Package schedule runs a background task — a synthetic probe, a calibration — on an
// interval with jitter or when triggered, and holds it back while live traffic needs the
// engine: a task does not start, and a running one is stopped, when its Guard says so.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/internal/signal"
)

// Guard says whether live traffic leaves room for the task. Busy returns true, with the
// reason, when it does not. It must be safe for concurrent use.
type Guard interface {
	Busy() (bool, string)
}

// Exclusive is a Guard that also keeps other work off the engine while the task runs.
// Before a run the Scheduler asks Claim in place of Busy: when it reports not busy, the
// engine is the task's until Release, which the Scheduler calls exactly once when that
// run ends. Busy is still asked while the run goes on. Its methods must be safe for
// concurrent use.
type Exclusive interface {
	Guard
	Claim() (bool, string)
	Release()
}

// ErrHeld reports a task stopped, or never started, because live traffic needed the
// engine.
var ErrHeld = errors.New("held back by live traffic")

// Task is the work a Scheduler runs. It must return soon after ctx ends.
type Task func(ctx context.Context) error

// Config configures a Scheduler.
type Config struct {
	Name     string        // for logs
	Interval time.Duration // 0: run only when triggered
	Jitter   float64       // share of Interval added at random, in [0,1], so replicas do not run in step
	Guard    Guard         // nil: never held back
	Retry    time.Duration // wait after a held-back run; default a minute
	Poll     time.Duration // how often the guard is asked during a run; default a second
	Logger   *slog.Logger
	Clock    clock.Clock // the interval, retry and poll timers and the status times; default clock.Real
}

// Status is what a Scheduler did last.
type Status struct {
	Running   bool
	Runs      int       // runs that completed
	Held      int       // runs not started, or stopped, because of live traffic
	LastStart time.Time // zero before the first run
	LastEnd   time.Time
	LastErr   string // "" when the last run completed
}

// Scheduler runs one Task at a time. Safe for concurrent use.
type Scheduler struct {
	cfg     Config
	task    Task
	trigger chan struct{}
	mu      sync.Mutex
	status  Status
	changed signal.Changed // of status
}

// New returns a Scheduler of task; Run starts it.
func New(cfg Config, task Task) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	cfg.Clock = clock.Or(cfg.Clock)
	return &Scheduler{cfg: cfg, task: task, trigger: make(chan struct{}, 1)}
}

// Trigger asks for a run now; it reports false when one is running or already asked for.
func (s *Scheduler) Trigger() bool {
	if s.Status().Running {
		return false
	}
	select {
	case s.trigger <- struct{}{}:
		return true
	default:
		return false
	}
}

// Status returns what the scheduler did last.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Await returns the status once cond holds for it, checking at every change of status;
// or the last status and ctx's error once ctx is done.
func (s *Scheduler) Await(ctx context.Context, cond func(Status) bool) (Status, error) {
	return signal.Await(ctx, func() (Status, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.status, s.changed.C()
	}, cond)
}

// Run runs the task on the schedule until ctx is done.
func (s *Scheduler) Run(ctx context.Context) {
	next := s.nextWait()
	for {
		if !s.wait(ctx, next) {
			return
		}
		if err := s.runOnce(ctx); errors.Is(err, ErrHeld) {
			next = s.cfg.Retry
			continue
		}
		next = s.nextWait()
	}
}

// wait returns after d (never, for d = 0) or a trigger; false when ctx ended first.
func (s *Scheduler) wait(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := s.cfg.Clock.NewTimer(d)
		defer t.Stop()
		timer = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer:
	case <-s.trigger:
	}
	return true
}

func (s *Scheduler) nextWait() time.Duration {
	if s.cfg.Interval <= 0 {
		return 0
	}
	return s.cfg.Interval + time.Duration(rand.Float64()*s.cfg.Jitter*float64(s.cfg.Interval))
}

// runOnce runs the task unless live traffic is too high, stopping it if live traffic
// rises while it runs.
func (s *Scheduler) runOnce(ctx context.Context) error {
	if busy, why := s.claim(); busy {
		err := fmt.Errorf("%w: %s", ErrHeld, why)
		s.finish(s.cfg.Clock.Now(), err)
		return err
	}
	start := s.cfg.Clock.Now()
	s.mu.Lock()
	s.status.Running, s.status.LastStart = true, start
	s.changed.Broadcast()
	s.mu.Unlock()
	runCtx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watch(runCtx, cancel)
	}()
	err := s.task(runCtx)
	if cause := context.Cause(runCtx); errors.Is(cause, ErrHeld) {
		err = cause
	}
	// The watcher and its ticker are gone, and the engine released, before the status
	// says the run is over.
	cancel(nil)
	<-watched
	if ex, ok := s.cfg.Guard.(Exclusive); ok {
		ex.Release()
	}
	s.finish(start, err)
	return err
}

// watch cancels a running task when the guard says live traffic needs the engine.
func (s *Scheduler) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	t := s.cfg.Clock.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if busy, why := s.busy(); busy {
				cancel(fmt.Errorf("%w: %s", ErrHeld, why))
				return
			}
		}
	}
}

// claim asks the guard whether a run may start, reserving the engine for it when the
// guard is Exclusive.
func (s *Scheduler) claim() (bool, string) {
	if ex, ok := s.cfg.Guard.(Exclusive); ok {
		return ex.Claim()
	}
	return s.busy()
}

func (s *Scheduler) busy() (bool, string) {
	if s.cfg.Guard == nil {
		return false, ""
	}
	return s.cfg.Guard.Busy()
}

func (s *Scheduler) finish(start time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Broadcast()
	end := s.cfg.Clock.Now()
	s.status.Running, s.status.LastEnd, s.status.LastErr = false, end, ""
	switch {
	case errors.Is(err, ErrHeld):
		s.status.Held++
		s.status.LastErr = err.Error()
	case err != nil:
		s.status.LastErr = err.Error()
	default:
		s.status.Runs++
	}
	s.cfg.Logger.Info("scheduled task finished", "task", s.cfg.Name, "took", end.Sub(start).Round(time.Millisecond), "err", s.status.LastErr)
}
