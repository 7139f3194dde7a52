package enginesim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/slogate/slogate/measure"
)

// Virtual time: the Scheduler driven by a loop that jumps from one step's end to the
// next, without sleeping and without goroutines, so that minutes of an engine's life take
// milliseconds and come out the same on every run. The calibration tests hold the
// profiles to their published figures (docs/simulator.md) this way, and SustainableRate
// answers, from the model alone, what rate a profile sustains inside an SLO — the figure
// slogate calibrate must find by measuring over HTTP.

// virtualEngine drives a Scheduler in virtual time. Requests enter the scheduler
// APILatency after they arrive, as in the HTTP server.
type virtualEngine struct {
	p        Profile
	s        *Scheduler
	now      time.Time
	nextID   uint64
	pending  []Request // arrived, not yet submitted; sorted by Arrival
	finished []Finished
	onDone   func(end time.Time) // closed-loop clients resubmit here
}

var epoch = time.Unix(1_700_000_000, 0)

func newVirtualEngine(p Profile) *virtualEngine {
	v := &virtualEngine{p: p, now: epoch}
	v.s = NewScheduler(p, Hooks{Finished: func(f Finished) { v.finished = append(v.finished, f) }})
	return v
}

// arrive queues a request that reaches the API server at time at.
func (v *virtualEngine) arrive(at time.Time, prompt, output int) {
	v.nextID++
	r := Request{ID: v.nextID, PromptTokens: prompt, OutputTokens: output, MaxTokens: output, FinishReason: "length", Arrival: at}
	i, _ := slices.BinarySearchFunc(v.pending, r, func(a, b Request) int { return a.Arrival.Compare(b.Arrival) })
	v.pending = slices.Insert(v.pending, i, r)
}

func (v *virtualEngine) submitUntil(t time.Time) {
	for len(v.pending) > 0 && !v.pending[0].Arrival.Add(v.p.APILatency).After(t) {
		r := v.pending[0]
		v.pending = v.pending[1:]
		v.s.Submit(r.Arrival.Add(v.p.APILatency), r)
	}
}

// run advances virtual time until the engine is idle with nothing pending, or until
// the deadline.
func (v *virtualEngine) run(deadline time.Time) {
	for v.now.Before(deadline) {
		v.submitUntil(v.now)
		d, ok := v.s.Step(v.now)
		if !ok {
			if len(v.pending) == 0 {
				return
			}
			v.now = v.pending[0].Arrival.Add(v.p.APILatency)
			continue
		}
		end := v.now.Add(d)
		v.submitUntil(end)
		for _, e := range v.s.Complete(end) {
			if e.Done && v.onDone != nil {
				v.onDone(end)
			}
		}
		v.now = end
	}
}

// closedLoop runs conc clients that each send a new request as soon as the previous one
// finishes, for dur, and returns completions per second and the finished requests.
func closedLoop(p Profile, prompt, output, conc int, dur time.Duration) (float64, []Finished) {
	v := newVirtualEngine(p)
	stop := v.now.Add(dur)
	v.onDone = func(end time.Time) {
		if end.Before(stop) {
			v.arrive(end, prompt, output)
		}
	}
	for range conc {
		v.arrive(v.now, prompt, output)
	}
	v.run(stop)
	return float64(len(v.finished)) / dur.Seconds(), v.finished
}

// openLoop sends requests at the given offsets from the start, runs until all finish,
// and returns the finished requests and the time from the first arrival to the last finish.
func openLoop(p Profile, prompt, output int, offsets []time.Duration) ([]Finished, time.Duration) {
	return openLoopUntil(p, prompt, output, offsets, 24*time.Hour)
}

// openLoopUntil is openLoop that stops at most limit after the start: requests not
// finished by then are left out of the result.
func openLoopUntil(p Profile, prompt, output int, offsets []time.Duration, limit time.Duration) ([]Finished, time.Duration) {
	v := newVirtualEngine(p)
	for _, off := range offsets {
		v.arrive(epoch.Add(off), prompt, output)
	}
	v.run(epoch.Add(limit))
	return v.finished, v.now.Sub(epoch)
}

// constantArrivals returns offsets of requests evenly spaced at rate per second over dur.
func constantArrivals(rate float64, dur time.Duration) []time.Duration {
	n := int(rate * dur.Seconds())
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(float64(i) / rate * float64(time.Second))
	}
	return out
}

// poissonArrivals returns offsets of a Poisson process at rate per second over dur. The
// same seed gives the same unit-rate gaps at every rate, scaled by 1/rate, so that runs at
// neighbouring rates differ by their rate and not by their luck.
func poissonArrivals(rate float64, dur time.Duration, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []time.Duration
	for t := 0.0; ; {
		t += rng.ExpFloat64() / rate
		if t >= dur.Seconds() {
			return out
		}
		out = append(out, time.Duration(t*float64(time.Second)))
	}
}

// quantile returns the q-quantile of xs by linear interpolation between closest ranks
// (as numpy does, and the prober with it); NaN for no data. xs is sorted in place.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.SortFunc(xs, cmp.Compare[float64])
	pos := q * float64(len(xs)-1)
	lo := int(pos)
	if lo+1 >= len(xs) {
		return xs[lo]
	}
	return xs[lo] + (pos-float64(lo))*(xs[lo+1]-xs[lo])
}

func ttfts(fs []Finished) []float64 {
	out := make([]float64, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.TTFT.Seconds())
	}
	return out
}

// seconds turns a quantile in seconds into a Duration; NaN (no data) into 0.
func seconds(s float64) time.Duration {
	if math.IsNaN(s) {
		return 0
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}

// checkShape reports a request shape p cannot serve.
func checkShape(p Profile, input, output int) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if input < 1 || output < 1 || input+output > p.MaxModelLen {
		return fmt.Errorf("enginesim: profile %s cannot serve %d input + %d output tokens (context %d)", p.Name, input, output, p.MaxModelLen)
	}
	return nil
}

// Load is what a profile did with one run of open-loop arrivals in virtual time. The
// percentiles are over the completed requests, by linear interpolation between closest
// ranks (as the prober computes them).
type Load struct {
	Rate      float64 // offered: requests sent / arrival window
	Sent      int
	Completed int // finished before the run's drain ran out
	TTFTp50   time.Duration
	TTFTp95   time.Duration
	TPOTp95   time.Duration // 0 for one-token outputs, which have no TPOT
	MeanE2E   time.Duration
	Span      time.Duration // from the start to the last finish (or the end of the drain)
}

// Meets reports whether l is sustainable under slo: every request sent completed, and
// p95 TTFT (counted from arrival at the API server) and p95 TPOT (a request's decode
// time / (output tokens − 1)) within slo (measure.SLO.Met; a zero bound is not checked).
func (l Load) Meets(slo measure.SLO) bool {
	return l.Sent > 0 && l.Completed == l.Sent && slo.Met(l.TTFTp95, l.TPOTp95)
}

// Search says how SustainableRate measures. Zero fields take the defaults.
type Search struct {
	Window    time.Duration // arrival window of each run; default 10 minutes
	Drain     time.Duration // time after the window by which every request must finish; default Window
	Seeds     []uint64      // one search per seed of the Poisson arrivals, averaged; default 1, 2, 3
	Precision float64       // stop when the first failing rate is within this share above the last passing one; default 0.01
}

func (o Search) withDefaults() Search {
	if o.Window <= 0 {
		o.Window = 10 * time.Minute
	}
	if o.Drain <= 0 {
		o.Drain = o.Window
	}
	if len(o.Seeds) == 0 {
		o.Seeds = []uint64{1, 2, 3}
	}
	if o.Precision <= 0 {
		o.Precision = 0.01
	}
	return o
}

// minRequests is the fewest arrivals a run must expect for its p95 to mean something;
// SustainableRate looks no lower than the rate that gives them.
const minRequests = 20

// maxRequests bounds the arrivals of one run, and with it the memory and time a search
// may take.
const maxRequests = 2_000_000

// OfferPoisson runs profile p in virtual time with Poisson arrivals (drawn from seed) of
// requests of input prompt tokens and output generated tokens, at rate per second over
// window, and returns what it did; requests not finished drain after the window count
// as not completed. It is deterministic and safe for concurrent use.
func OfferPoisson(p Profile, input, output int, rate float64, window, drain time.Duration, seed uint64) (Load, error) {
	if err := checkShape(p, input, output); err != nil {
		return Load{}, err
	}
	if !(rate > 0) || math.IsInf(rate, 0) || window <= 0 || drain < 0 {
		return Load{}, fmt.Errorf("enginesim: offering %v requests/s over %v (drain %v)", rate, window, drain)
	}
	offsets := poissonArrivals(rate, window, seed)
	fs, span := openLoopUntil(p, input, output, offsets, window+drain)
	l := summarizeLoad(fs, len(offsets), window, output)
	l.Span = span
	return l, nil
}

// OfferClosed runs profile p in virtual time with conc clients that each send a request
// of input prompt tokens and output generated tokens as soon as their previous one
// finished, for dur, and returns the load of the requests that completed within it: a
// closed loop offers what it completes, so its Rate, Sent and Completed all count them
// (Rate per second of dur). It is deterministic and safe for concurrent use.
func OfferClosed(p Profile, input, output, conc int, dur time.Duration) (Load, error) {
	if err := checkShape(p, input, output); err != nil {
		return Load{}, err
	}
	if conc < 1 || dur <= 0 {
		return Load{}, fmt.Errorf("enginesim: %d clients for %v", conc, dur)
	}
	_, fs := closedLoop(p, input, output, conc, dur)
	l := summarizeLoad(fs, len(fs), dur, output)
	l.Span = dur
	return l, nil
}

func summarizeLoad(fs []Finished, sent int, window time.Duration, output int) Load {
	l := Load{Rate: float64(sent) / window.Seconds(), Sent: sent}
	ttft := make([]float64, 0, len(fs))
	var tpot []float64
	var e2e time.Duration
	for _, f := range fs {
		if f.Reason == "abort" || f.OutputTokens < output {
			continue
		}
		l.Completed++
		ttft = append(ttft, f.TTFT.Seconds())
		e2e += f.E2E
		if output > 1 {
			tpot = append(tpot, f.Decode.Seconds()/float64(output-1))
		}
	}
	l.TTFTp50, l.TTFTp95 = seconds(quantile(ttft, 0.50)), seconds(quantile(ttft, 0.95))
	l.TPOTp95 = seconds(quantile(tpot, 0.95))
	if l.Completed > 0 {
		l.MeanE2E = e2e / time.Duration(l.Completed)
	}
	return l
}

// SustainableRate returns the true sustainable rate of profile p for requests of input
// prompt tokens and output generated tokens under slo, from the model alone: the highest
// rate of Poisson arrivals at which every request completes, p95 TTFT (from arrival at the
// API server) is within slo.TTFT and p95 TPOT within slo.TPOT. For each seed it doubles
// (or halves) a rate until it has one that passes and one that fails, bisects between
// them until they are within o.Precision, and keeps the passing end; the result is the
// mean over the seeds. It returns 0 when no rate that brings 20 requests in a window
// passes (an SLO below what an idle engine does). The cost is a few dozen virtual runs of
// o.Window; with the defaults, a fraction of a second for the built-in h20x8-flash and
// h200-9b profiles (the tiny profile's rates are thousands a second: use a shorter
// window). It is deterministic and safe for concurrent use.
func SustainableRate(p Profile, input, output int, slo measure.SLO, o Search) (float64, error) {
	if err := checkShape(p, input, output); err != nil {
		return 0, err
	}
	o = o.withDefaults()
	// One request at a time, back to back: a rate an engine that batches surely sustains
	// when the SLO allows an idle engine's latency, and a scale to search from.
	fs, span := openLoop(p, input, output, []time.Duration{0})
	if len(fs) != 1 || span <= 0 {
		return 0, fmt.Errorf("enginesim: profile %s never finished a %d/%d request", p.Name, input, output)
	}
	start := 1 / span.Seconds()
	sum := 0.0
	for _, seed := range o.Seeds {
		r, err := sustainableFor(p, input, output, slo, o, seed, start)
		if err != nil {
			return 0, err
		}
		sum += r
	}
	return sum / float64(len(o.Seeds)), nil
}

// sustainableFor is SustainableRate for one seed, searching from rate start.
func sustainableFor(p Profile, input, output int, slo measure.SLO, o Search, seed uint64, start float64) (float64, error) {
	passes := func(rate float64) (bool, error) {
		l, err := OfferPoisson(p, input, output, rate, o.Window, o.Drain, seed)
		return l.Meets(slo), err
	}
	floor, ceiling := minRequests/o.Window.Seconds(), maxRequests/o.Window.Seconds()
	lo, hi := 0.0, math.Inf(1) // the highest passing and the lowest failing rate so far
	for r := start; lo == 0 || math.IsInf(hi, 1); {
		if r < floor {
			return 0, nil
		}
		if r > ceiling {
			return 0, fmt.Errorf("enginesim: profile %s still passes at %.4g requests/s; shorten the window", p.Name, lo)
		}
		ok, err := passes(r)
		if err != nil {
			return 0, err
		}
		if ok {
			lo, r = r, 2*r
		} else {
			hi, r = r, r/2
		}
	}
	for hi/lo-1 > o.Precision {
		mid := math.Sqrt(lo * hi)
		ok, err := passes(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}
