package synth

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Guard says whether live traffic leaves room for a probe. Busy returns true, with the
// reason, when live load is above its allowed share of capacity or live TTFT is over its
// SLO; the scheduler then does not start a probe, and stops one that runs.
type Guard interface {
	Busy() (bool, string)
}

// ErrGuarded reports a probe stopped (or never started) because live traffic needed the
// engine.
var ErrGuarded = errors.New("synth: probe held back by live traffic")

// ScheduleConfig configures a Schedule.
type ScheduleConfig struct {
	Target   *Target
	Workload Workload
	Interval time.Duration // 0: probe only when triggered
	Jitter   float64       // share of Interval added at random, in [0,1]
	Guard    Guard         // nil: never held back
	Retry    time.Duration // wait after a held-back probe; default a minute
	Logger   *slog.Logger
}

// Schedule runs a workload against a target every Interval (plus up to Jitter of it at
// random, so that replicas do not probe in step), or at once when triggered. Safe for
// concurrent use.
type Schedule struct {
	cfg     ScheduleConfig
	trigger chan struct{}
	mu      sync.Mutex
	status  ScheduleStatus
	latest  *Report
}

// NewSchedule returns a Schedule for cfg; Run starts it.
func NewSchedule(cfg ScheduleConfig) *Schedule {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Minute
	}
	return &Schedule{cfg: cfg, trigger: make(chan struct{}, 1)}
}

// ScheduleStatus is what the scheduler did last.
type ScheduleStatus struct {
	Running   bool
	Runs      int       // probes run to the end
	Held      int       // probes not started or stopped because of live traffic
	LastStart time.Time // zero before the first
	LastEnd   time.Time
	LastErr   string // "" when the last probe completed
}

// Trigger asks for a probe now; it reports false when one is already running or asked
// for.
func (s *Schedule) Trigger() bool {
	s.mu.Lock()
	running := s.status.Running
	s.mu.Unlock()
	if running {
		return false
	}
	select {
	case s.trigger <- struct{}{}:
		return true
	default:
		return false
	}
}

// Latest returns the report of the last probe that produced one.
func (s *Schedule) Latest() (Report, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		return Report{}, false
	}
	return *s.latest, true
}

// Status returns the scheduler's state.
func (s *Schedule) Status() ScheduleStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Run probes on the schedule until ctx is done. With Interval 0 it probes only when
// triggered.
func (s *Schedule) Run(ctx context.Context) {
	next := s.nextWait()
	for {
		if !s.wait(ctx, next) {
			return
		}
		if err := s.runOnce(ctx); errors.Is(err, ErrGuarded) {
			next = s.cfg.Retry
			continue
		}
		next = s.nextWait()
	}
}

// wait returns after d (never, for d = 0) or a trigger; false when ctx ended first.
func (s *Schedule) wait(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer:
	case <-s.trigger:
	}
	return true
}

func (s *Schedule) nextWait() time.Duration {
	if s.cfg.Interval <= 0 {
		return 0
	}
	return s.cfg.Interval + time.Duration(rand.Float64()*s.cfg.Jitter*float64(s.cfg.Interval))
}

// runOnce runs one probe unless live traffic is too high, stopping it if live traffic
// rises while it runs.
func (s *Schedule) runOnce(ctx context.Context) error {
	if busy, why := s.busy(); busy {
		s.finish(Report{}, false, ErrGuarded, why)
		return ErrGuarded
	}
	s.mu.Lock()
	s.status.Running, s.status.LastStart = true, time.Now()
	s.mu.Unlock()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go s.watch(runCtx, cancel)
	rep, err := Run(runCtx, s.cfg.Target, s.cfg.Workload, Options{Gate: true})
	why := ""
	if cause := context.Cause(runCtx); errors.Is(cause, ErrGuarded) {
		err, why = ErrGuarded, cause.Error()
	}
	// Keep what a probe found unless it was stopped before finishing: a partial report
	// would replace a complete one. A failed gate is a finding.
	s.finish(rep, err == nil || errors.Is(err, ErrGateFailed), err, why)
	return err
}

// watch cancels a running probe when the guard says live traffic needs the engine.
func (s *Schedule) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if busy, why := s.busy(); busy {
				cancel(errors.Join(ErrGuarded, errors.New(why)))
				return
			}
		}
	}
}

func (s *Schedule) busy() (bool, string) {
	if s.cfg.Guard == nil {
		return false, ""
	}
	return s.cfg.Guard.Busy()
}

func (s *Schedule) finish(rep Report, keep bool, err error, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Running, s.status.LastEnd, s.status.LastErr = false, time.Now(), ""
	switch {
	case errors.Is(err, ErrGuarded):
		s.status.Held++
		s.status.LastErr = "held back by live traffic: " + why
	case err != nil:
		s.status.LastErr = err.Error()
	default:
		s.status.Runs++
	}
	if keep {
		s.latest = &rep
	}
	s.cfg.Logger.Info("probe finished", "workload", s.cfg.Workload.Name, "cells", len(rep.Cells), "err", s.status.LastErr)
}
