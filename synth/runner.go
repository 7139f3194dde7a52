package synth

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// batch is the raw outcome of one round: every sample and the round's span.
type batch struct {
	samples  []Sample
	start    time.Time
	span     time.Duration // the window (duration-bounded) or first send to last finish
	windowed bool          // duration-bounded: throughput counts tokens received in the window
	arrival  time.Duration // open loop: the window arrivals were drawn over
}

// failureBackoff is how long a closed-loop stream waits after a failed request.
const failureBackoff = 250 * time.Millisecond

// seeds hands out request seeds, unique across a run, so that prompts never repeat.
type seeds struct{ n atomic.Uint64 }

func (s *seeds) next() uint64 { return s.n.Add(1)*0x9e3779b97f4a7c15 + 1 }

// closedLoop keeps conc streams busy: each sends its next request as soon as the last
// one ended. With dur > 0 the round is a window of dur: requests start only inside it
// and those still running when it closes are cut. Otherwise each stream sends perStream
// requests and the round lasts until the last one ends.
func (t *Target) closedLoop(ctx context.Context, conc int, mk func(seed uint64) prompt, sd *seeds, dur time.Duration, perStream int) batch {
	b := batch{start: t.now(), windowed: dur > 0}
	windowEnd := b.start.Add(dur)
	roundCtx := ctx
	if dur > 0 {
		var cancel context.CancelFunc
		roundCtx, cancel = context.WithDeadline(ctx, windowEnd)
		defer cancel()
	} else {
		windowEnd = farFuture
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := 0; roundCtx.Err() == nil && (dur > 0 || i < perStream); i++ {
				s := t.send(roundCtx, mk(sd.next()), windowEnd)
				mu.Lock()
				b.samples = append(b.samples, s)
				mu.Unlock()
				if s.Failure != NoFailure && s.Failure != Cut {
					// An engine that refuses at once would otherwise get a storm of
					// requests for the whole window.
					sleepUntil(roundCtx, t.now().Add(failureBackoff))
				}
			}
		})
	}
	wg.Wait()
	b.span = dur
	if dur == 0 {
		b.span = t.now().Sub(b.start)
	}
	return b
}

// openLoop sends one request at each offset from the start, whatever is in flight, and
// waits for all of them (at most drain after the last send).
func (t *Target) openLoop(ctx context.Context, offsets []time.Duration, window time.Duration, mk func(seed uint64) prompt, sd *seeds, drain time.Duration) batch {
	b := batch{start: t.now(), arrival: window}
	last := time.Duration(0)
	if len(offsets) > 0 {
		last = offsets[len(offsets)-1]
	}
	roundCtx, cancel := context.WithDeadline(ctx, b.start.Add(last+drain))
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, off := range offsets {
		if !sleepUntil(roundCtx, b.start.Add(off)) {
			break
		}
		wg.Go(func() {
			s := t.send(roundCtx, mk(sd.next()), farFuture)
			mu.Lock()
			b.samples = append(b.samples, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.span = t.now().Sub(b.start)
	return b
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// arrivals returns the send offsets of requests at rate per second over dur: evenly
// spaced, or a Poisson process drawn from seed.
func arrivals(rate float64, dur time.Duration, poisson bool, seed uint64) []time.Duration {
	if rate <= 0 {
		return nil
	}
	var out []time.Duration
	rng := rand.New(rand.NewPCG(seed, seed^0x5106a7e))
	for t := 0.0; ; {
		if poisson {
			t += rng.ExpFloat64() / rate
		} else {
			// The n-th send is at n/rate, not a sum of n steps of 1/rate, whose rounding
			// error let a window of exactly n/rate seconds hold n+1 sends.
			t = float64(len(out)) / rate
		}
		if t >= dur.Seconds() {
			return out
		}
		out = append(out, time.Duration(t*float64(time.Second)))
	}
}
