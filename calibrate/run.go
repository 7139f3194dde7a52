package calibrate

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// Result is a calibration: when, against what, and each tier's curve, knee and limits.
type Result struct {
	Started  time.Time `yaml:"started" json:"started"`
	Finished time.Time `yaml:"finished" json:"finished"`
	Target   string    `yaml:"target" json:"target"` // the engine's base URL, any password in it masked
	Model    string    `yaml:"model" json:"model"`
	Engine   string    `yaml:"engine,omitempty" json:"engine,omitempty"`
	// EngineVersion and EngineFlags are how the engine ran, as far as it tells
	// (synth.Target.ReadEngine): the limits hold for the engine run so.
	EngineVersion string            `yaml:"engine_version,omitempty" json:"engine_version,omitempty"`
	EngineFlags   map[string]string `yaml:"engine_flags,omitempty" json:"engine_flags,omitempty"`
	// Precision is how precise the plan measured, in words (Plan.Precision).
	Precision string       `yaml:"precision,omitempty" json:"precision,omitempty"`
	Tiers     []TierResult `yaml:"tiers" json:"tiers"`
}

// TierResult is one tier's measurement. Knee indexes Points (-1: none sustainable).
type TierResult struct {
	Tier      string      `yaml:"tier" json:"tier"`
	Shape     synth.Shape `yaml:"shape" json:"shape"`
	SLO       measure.SLO `yaml:"slo" json:"slo"`
	Reference float64     `yaml:"reference_rps" json:"reference_rps"` // closed-loop completions/s
	Points    []Point     `yaml:"points" json:"points"`
	Knee      int         `yaml:"knee" json:"knee"`
	KneeRate  float64     `yaml:"knee_rps" json:"knee_rps"`
	Rule      string      `yaml:"rule" json:"rule"`
	Kneedle   float64     `yaml:"kneedle_rps,omitempty" json:"kneedle_rps,omitempty"` // the Kneedle knee, with 5 points or more
	// Prefill is the engine's prefill rate for the tier's prompts, in prompt tokens per
	// second (run.prefillRate); 0 when the prefill rounds could not tell.
	Prefill float64               `yaml:"prefill_tokens_per_second,omitempty" json:"prefill_tokens_per_second,omitempty"`
	Limits  *admission.TierConfig `yaml:"-" json:"-"`
	Err     string                `yaml:"error,omitempty" json:"error,omitempty"`
}

// Progress is told about each point measured: the tier, the point, and how many rounds
// of the plan's estimate (MaxPoints per tier) are done.
type Progress func(tier string, p Point, done, total int)

// Run calibrates every tier of plan against t, one after another, having read how the
// engine runs (its version and flags, for the provenance). A tier whose
// measurement fails carries the error and no limits; Run stops early, with what it
// measured, when ctx ends.
func Run(ctx context.Context, t *synth.Target, plan Plan, engine string, progress Progress) (Result, error) {
	if _, err := t.PreparePrompts(ctx); err != nil {
		return Result{}, err
	}
	e := t.ReadEngine(ctx)
	res, err := Measure(ctx, t, plan, progress)
	res.Target, res.Model, res.Engine = t.Redacted(), t.Model, engine
	res.EngineVersion, res.EngineFlags = e.Version, e.Flags
	return res, err
}

// Rounds runs the rounds a calibration measures: closed-loop rounds for a tier's
// reference and open-loop rounds at the rates it offers. *synth.Target runs them over
// HTTP against a live engine; an engine model in virtual time can stand in for one
// (bench/goodput's virtual phase), and then the same rules find the same knees on it.
type Rounds interface {
	ClosedRound(ctx context.Context, s synth.Shape, conc int, dur time.Duration) synth.Round
	OpenRound(ctx context.Context, s synth.Shape, rate float64, dur time.Duration, poisson bool, seed uint64, drain time.Duration) synth.Round
}

// Measure calibrates every tier of plan on the rounds of m, one tier after another, as
// Run does, and returns the Result without provenance (Target, Model, Engine): a tier
// whose measurement fails carries the error and no limits, and Measure stops early, with
// what it measured, when ctx ends. Started and Finished are wall-clock times.
func Measure(ctx context.Context, m Rounds, plan Plan, progress Progress) (Result, error) {
	plan = plan.withDefaults()
	res := Result{Started: time.Now(), Precision: plan.Precision()}
	c := run{t: m, plan: plan, progress: progress, total: len(plan.Tiers) * plan.MaxPoints}
	for _, tp := range plan.Tiers {
		if ctx.Err() != nil {
			break
		}
		res.Tiers = append(res.Tiers, c.tier(ctx, tp))
	}
	res.Finished = time.Now()
	return res, ctx.Err()
}

// run carries one calibration's state.
type run struct {
	t        Rounds
	plan     Plan
	progress Progress
	done     int
	total    int
}

// tier measures one tier's curve and derives its limits.
func (c *run) tier(ctx context.Context, tp TierPlan) TierResult {
	r := TierResult{Tier: tp.Tier.Name, Shape: tp.Shape, SLO: tp.Tier.SLO, Knee: -1}
	ref := c.t.ClosedRound(ctx, tp.Shape, c.plan.RefConcurrency, c.plan.RefDuration)
	if ref.Seconds > 0 {
		r.Reference = float64(ref.Completed) / ref.Seconds
	}
	if r.Reference <= 0 {
		r.Err = fmt.Sprintf("the reference run completed no request (%d sent, failures %v)", ref.Sent, ref.Failures)
		return r
	}
	r.Prefill = c.prefillRate(ctx, tp.Shape)
	for _, m := range c.plan.Multiples {
		c.measure(ctx, &r, tp, m*r.Reference)
	}
	for len(r.Points) < c.plan.MaxPoints && ctx.Err() == nil {
		next, ok := c.nextRate(r, tp.Tier.SLO)
		if !ok {
			break
		}
		c.measure(ctx, &r, tp, next)
	}
	c.finish(&r, tp)
	return r
}

// prefillRate measures the engine's prefill rate for prompts of shape s, in prompt
// tokens per second: one stream at a time (so that each request has the engine to
// itself) sends s's prompt for PrefillRound, then a prompt a quarter as long for as
// long, each asking for one output token; the rate is the difference of the two prompt
// lengths over the difference of their median TTFTs. The difference leaves out what
// every request pays whatever its length — the API server, scheduling, the first step —
// which the TTFT of one length alone would count as prefill. Where the prompts span
// several of the engine's chunked-prefill steps, the extra steps' overheads are in the
// difference, and the rate is what the engine prefills of a backlog; where both fit in
// one step it is the rate per token, somewhat above (a tenth on the simulator's
// h20x8-flash, calibrate/prefill_test.go). It returns 0 when the rounds cannot tell:
// a prompt too short to quarter, a round with no request completed, or a shorter prompt
// no faster.
func (c *run) prefillRate(ctx context.Context, s synth.Shape) float64 {
	if s.Input < 8 {
		return 0
	}
	short := s.Input / 4
	long := c.t.ClosedRound(ctx, synth.Shape{Name: s.Name, Input: s.Input, Output: 1}, 1, c.plan.PrefillRound)
	quarter := c.t.ClosedRound(ctx, synth.Shape{Name: s.Name, Input: short, Output: 1}, 1, c.plan.PrefillRound)
	if long.Completed == 0 || quarter.Completed == 0 || !(long.TTFTp50 > quarter.TTFTp50) {
		return 0
	}
	return float64(s.Input-short) / (long.TTFTp50 - quarter.TTFTp50)
}

// measure offers rate and inserts the point in order.
func (c *run) measure(ctx context.Context, r *TierResult, tp TierPlan, rate float64) {
	window, drain := c.plan.window(rate)
	// Every rate of a tier replays the same Poisson arrivals, scaled: neighbouring rates
	// then differ by their rate and not by their luck, and λ* is not merely the luckiest
	// of several draws.
	round := c.t.OpenRound(ctx, tp.Shape, rate, window, true, c.plan.Seed, drain)
	p := Point{
		Target: rate, Offered: round.Offered, TTFTp50: secs(round.TTFTp50), TTFTp95: secs(round.TTFTp95),
		TPOTp95: secs(round.TPOTp95), MeanE2E: secs(round.E2Emean),
	}
	if round.Seconds > 0 {
		p.Throughput = float64(round.Completed) / round.Seconds
	}
	if round.Sent > 0 {
		p.Completion = float64(round.Completed) / float64(round.Sent)
	}
	i, _ := slices.BinarySearchFunc(r.Points, p, func(a, b Point) int { return cmp.Compare(a.Offered, b.Offered) })
	r.Points = slices.Insert(r.Points, i, p)
	c.done++
	if c.progress != nil {
		c.progress(r.Tier, p, c.done, max(c.total, c.done))
	}
}

// nextRate returns the next rate to ask for: above the highest rate when every rate
// was sustainable, below the lowest when none was, else the middle of the bracket
// between λ* and the first unsustainable rate while it is wider than Bracket. It
// bisects the rates asked for, not those sent: a round's arrivals may send a few percent
// more or less than asked (the same share at every rate, as they are the same arrivals
// scaled), and a bisection of the rates sent would then never close its bracket.
func (c *run) nextRate(r TierResult, slo measure.SLO) (float64, bool) {
	knee, _ := kneeOf(r.Points, slo)
	switch {
	case knee == len(r.Points)-1:
		return r.Points[knee].Target * c.plan.Climb, true
	case knee < 0:
		low := r.Points[0].Target / 2
		return low, low >= 0.02*r.Reference
	}
	lo, hi := r.Points[knee].Target, r.Points[knee+1].Target
	if hi/lo-1 <= c.plan.Bracket {
		return 0, false
	}
	return math.Sqrt(lo * hi), true
}

// finish records the knee and the limits it gives.
func (c *run) finish(r *TierResult, tp TierPlan) {
	r.Knee, r.Rule = kneeOf(r.Points, tp.Tier.SLO)
	if k, ok := kneedle(r.Points); ok {
		r.Kneedle = k
	}
	if r.Knee < 0 {
		r.Err = r.Rule
		return
	}
	r.KneeRate = r.Points[r.Knee].Offered
	lim := deriveLimits(r.Points[r.Knee], r.Points[0].TTFTp50, r.Prefill, tp.Tier.SLO)
	lim.Name, lim.MaxInputTokens = tp.Tier.Name, tp.Tier.MaxInputTokens
	r.Limits = &lim
}

// window returns the arrival window and drain for offering rate: Round and Drain, or
// longer in proportion where Round would bring fewer than MinRequests, up to MaxRound.
func (p Plan) window(rate float64) (window, drain time.Duration) {
	window = p.Round
	if need := secs(float64(p.MinRequests) / rate); need > window {
		window = min(need.Round(time.Second), p.MaxRound)
	}
	return window, time.Duration(float64(p.Drain) * float64(window) / float64(p.Round))
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
