package enginesim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// virtualEngine drives a Scheduler in virtual time: no sleeping, no goroutines. Requests
// enter the scheduler APILatency after they arrive, as in the HTTP server.
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
	v := newVirtualEngine(p)
	for _, off := range offsets {
		v.arrive(epoch.Add(off), prompt, output)
	}
	v.run(epoch.Add(24 * time.Hour))
	return v.finished, v.now.Sub(epoch)
}

// constantArrivals returns offsets of n requests at rate per second.
func constantArrivals(rate float64, dur time.Duration) []time.Duration {
	n := int(rate * dur.Seconds())
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(float64(i) / rate * float64(time.Second))
	}
	return out
}

// poissonArrivals returns offsets of a Poisson process at rate per second over dur.
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

// quantile returns the q-quantile of xs by linear interpolation (xs is sorted in place).
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
