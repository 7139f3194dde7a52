package calibrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/schedule"
	"github.com/slogate/slogate/synth"
)

// The calibration inside `slogate serve`: the same measurement as `slogate calibrate`,
// on a schedule or on request, planned from the tiers in force and either applied
// through admission's reload path or only kept for an operator to review.

// ScheduleConfig configures a Schedule.
type ScheduleConfig struct {
	// Target is the engine itself, not slogate's listener: a calibration offers rates
	// past the knee on purpose, which admission would turn away.
	Target *synth.Target
	// Tiers returns the tiers in force; each calibration plans from them and merges its
	// limits into them.
	Tiers  func() admission.Config
	SLO    measure.SLO                  // the SLOs of tiers that set none
	Output int                          // output tokens of every calibration request (the sidecar's --calibrate-output)
	Round  time.Duration                // arrival window of each measured rate; default 60s
	Engine func() string                // the engine's kind, for the provenance; nil: not recorded
	Apply  func(admission.Config) error // puts new limits in force; nil: report only

	Interval time.Duration // 0: calibrate only when triggered
	Jitter   float64       // share of Interval added at random, in [0,1]
	Guard    schedule.Guard
	Retry    time.Duration // wait after a held-back calibration; default a minute
	Logger   *slog.Logger
}

// Outcome is a calibration the sidecar holds: its measurement, the tiers file it
// produced, and whether those limits are in force.
type Outcome struct {
	Result   Result
	Config   admission.Config   // the tiers file, provenance included
	Applied  bool               // its limits are in force
	ApplyErr string             // why applying them failed
	Previous map[string]float64 // each tier's knee in the calibration before this one, req/s
}

// KneeChange returns a tier's knee over its knee in the calibration before, and false
// when either is unknown.
func (o Outcome) KneeChange(tier string) (float64, bool) {
	prev, ok := o.Previous[tier]
	if !ok || prev <= 0 {
		return 0, false
	}
	for _, t := range o.Result.Tiers {
		if t.Tier == tier && t.Knee >= 0 {
			return t.KneeRate / prev, true
		}
	}
	return 0, false
}

// Calibrated returns the tiers the outcome measured, with the limits its tiers file
// gives them.
func (o Outcome) Calibrated() []admission.TierConfig {
	knees := o.Result.Knees()
	var out []admission.TierConfig
	for _, t := range o.Config.Tiers {
		if _, ok := knees[t.Name]; ok {
			out = append(out, t)
		}
	}
	return out
}

// Knees returns each calibrated tier's sustainable rate λ* (requests/s), by tier name:
// the tiers whose knee was found, none of the others.
func (r Result) Knees() map[string]float64 {
	out := map[string]float64{}
	for _, t := range r.Tiers {
		if t.Knee >= 0 && t.KneeRate > 0 {
			out[t.Tier] = t.KneeRate
		}
	}
	return out
}

// FromConfig returns the calibration a tiers file records under its calibration key
// (slogate calibrate writes it), as an applied Outcome; false when there is none or it
// cannot be read.
func FromConfig(cfg admission.Config) (Outcome, bool) {
	if cfg.Calibration.IsZero() {
		return Outcome{}, false
	}
	var r Result
	if err := cfg.Calibration.Decode(&r); err != nil || r.Finished.IsZero() || len(r.Knees()) == 0 {
		return Outcome{}, false
	}
	return Outcome{Result: r, Config: cfg, Applied: true}, true
}

// Schedule calibrates on an interval or when triggered, holding back while live traffic
// needs the engine, and keeps the latest complete calibration. A calibration stopped
// before it finished changes nothing. Safe for concurrent use.
type Schedule struct {
	*schedule.Scheduler
	cfg    ScheduleConfig
	mu     sync.Mutex
	latest *Outcome
}

// NewSchedule returns a Schedule for cfg; Run starts it. When the tiers in force record
// a calibration, it is the latest one until the schedule measures another.
func NewSchedule(cfg ScheduleConfig) *Schedule {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Schedule{cfg: cfg}
	if o, ok := FromConfig(cfg.Tiers()); ok {
		s.latest = &o
	}
	s.Scheduler = schedule.New(schedule.Config{
		Name: "calibration", Interval: cfg.Interval, Jitter: cfg.Jitter,
		Guard: cfg.Guard, Retry: cfg.Retry, Logger: cfg.Logger,
	}, s.calibrate)
	return s
}

// Latest returns the latest complete calibration.
func (s *Schedule) Latest() (Outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		return Outcome{}, false
	}
	return *s.latest, true
}

// calibrate measures every tier in force once, derives their limits and applies them
// when the schedule may.
func (s *Schedule) calibrate(ctx context.Context) error {
	base := s.cfg.Tiers()
	plan, err := PlanFor(ctx, s.cfg.Target, base, s.cfg.SLO, s.cfg.Output)
	if err != nil {
		return err
	}
	plan.Round = s.cfg.Round
	engine := ""
	if s.cfg.Engine != nil {
		engine = s.cfg.Engine()
	}
	log := s.cfg.Logger
	log.Info("calibration started", "tiers", len(plan.Tiers), "estimate", plan.Estimate().Round(time.Second).String())
	res, err := Run(ctx, s.cfg.Target, plan, engine, func(tier string, p Point, done, total int) {
		log.Info("calibration point", "tier", tier, "offered_rps", p.Offered, "completed_rps", p.Throughput,
			"ttft_p95", p.TTFTp95.String(), "tpot_p95", p.TPOTp95.String(), "done", done, "of", total)
	})
	if err != nil {
		return err
	}
	if len(res.Knees()) == 0 {
		return fmt.Errorf("no tier could be calibrated: %s", res.errors())
	}
	cfg, err := res.Config(base)
	if err != nil {
		return err
	}
	out := Outcome{Result: res, Config: cfg}
	s.mu.Lock()
	if s.latest != nil {
		out.Previous = s.latest.Result.Knees()
	}
	s.mu.Unlock()
	if s.cfg.Apply != nil {
		if err := s.cfg.Apply(cfg); err != nil {
			out.ApplyErr = err.Error()
			log.Error("applying the calibrated limits failed", "err", err)
		} else {
			out.Applied = true
		}
	}
	for _, t := range res.Tiers {
		change, _ := out.KneeChange(t.Tier)
		log.Info("calibrated tier", "tier", t.Tier, "knee_rps", t.KneeRate, "knee_change", change, "rule", t.Rule, "err", t.Err, "applied", out.Applied)
	}
	s.mu.Lock()
	s.latest = &out
	s.mu.Unlock()
	if out.ApplyErr != "" {
		return errors.New("applying the calibrated limits: " + out.ApplyErr)
	}
	return nil
}

// errors joins the tiers' errors.
func (r Result) errors() string {
	var msgs []string
	for _, t := range r.Tiers {
		if t.Err != "" {
			msgs = append(msgs, t.Tier+": "+t.Err)
		}
	}
	if len(msgs) == 0 {
		return "no tier was measured"
	}
	return strings.Join(msgs, "; ")
}

// PlanFor reads the target's model and context length and plans the tiers of cfg that
// fit it, with output tokens per request (see DefaultPlan).
func PlanFor(ctx context.Context, t *synth.Target, cfg admission.Config, slo measure.SLO, output int) (Plan, error) {
	if err := t.DiscoverModel(ctx); err != nil {
		return Plan{}, err
	}
	maxLen, err := t.MaxModelLen(ctx)
	if err != nil {
		return Plan{}, err
	}
	return DefaultPlan(cfg, slo, maxLen, output)
}
