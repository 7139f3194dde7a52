package synth

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/schedule"
)

// Guard says whether live traffic leaves room for a probe (see schedule.Guard).
type Guard = schedule.Guard

// ErrGuarded reports a probe stopped, or never started, because live traffic needed the
// engine.
var ErrGuarded = schedule.ErrHeld

// ScheduleStatus is what the scheduler did last (see schedule.Status).
type ScheduleStatus = schedule.Status

// ScheduleConfig configures a Schedule.
type ScheduleConfig struct {
	Target   *Target
	Workload Workload
	Interval time.Duration // 0: probe only when triggered
	Jitter   float64       // share of Interval added at random, in [0,1]
	Guard    Guard         // nil: never held back
	Retry    time.Duration // wait after a held-back probe; default a minute
	Logger   *slog.Logger
	Clock    clock.Clock // the schedule's timers (not the probe's measurements: Target.Clock); default clock.Real
	// OnReport, when set, is called with every report the schedule keeps (see Latest),
	// once it is Latest, on the probe's goroutine: the next probe does not start before
	// it returns.
	OnReport func(Report)
}

// Schedule runs a workload against a target every Interval (plus up to Jitter of it at
// random, so that replicas do not probe in step), or at once when triggered, and keeps
// the latest report. Safe for concurrent use.
type Schedule struct {
	*schedule.Scheduler
	cfg    ScheduleConfig
	mu     sync.Mutex
	latest *Report
}

// NewSchedule returns a Schedule for cfg; Run starts it.
func NewSchedule(cfg ScheduleConfig) *Schedule {
	s := &Schedule{cfg: cfg}
	s.Scheduler = schedule.New(schedule.Config{
		Name: "probe " + cfg.Workload.Name, Interval: cfg.Interval, Jitter: cfg.Jitter,
		Guard: cfg.Guard, Retry: cfg.Retry, Logger: cfg.Logger, Clock: cfg.Clock,
	}, s.probe)
	return s
}

// probe runs the workload once and keeps its report, unless it was stopped before
// finishing: a partial report would replace a complete one. A failed gate is a finding
// and is kept.
func (s *Schedule) probe(ctx context.Context) error {
	rep, err := Run(ctx, s.cfg.Target, s.cfg.Workload, Options{Gate: true})
	if err == nil || errors.Is(err, ErrGateFailed) {
		s.mu.Lock()
		s.latest = &rep
		s.mu.Unlock()
		if s.cfg.OnReport != nil {
			s.cfg.OnReport(rep)
		}
	}
	return err
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

// Workload is the workload the schedule probes.
func (s *Schedule) Workload() Workload { return s.cfg.Workload }
