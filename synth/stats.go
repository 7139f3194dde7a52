package synth

import (
	"math"
	"slices"
	"time"
)

// Round is one measured round of a cell, reduced to the figures the reports carry. Rates
// are per second; latencies in seconds (0 when nothing was measured).
type Round struct {
	Sent       int            `json:"sent"`
	Succeeded  int            `json:"succeeded"`
	Cut        int            `json:"cut"`
	Failures   map[string]int `json:"failures,omitempty"`
	Looped     int            `json:"looped"`
	Seconds    float64        `json:"seconds"`
	OutputToks int            `json:"output_tokens"`

	Offered       float64 `json:"offered_rate,omitempty"` // open loop: requests sent / arrival window
	Throughput    float64 `json:"output_tok_per_s"`       // output tokens / round time
	PerRequestTPS float64 `json:"per_request_tok_per_s"`  // median decode speed of one stream, 1/TPOT
	TTFTp50       float64 `json:"ttft_p50_s"`
	TTFTp95       float64 `json:"ttft_p95_s"`
	TPOTp95       float64 `json:"tpot_p95_s"` // P95 of per-request TPOT
	ITLp50        float64 `json:"itl_p50_s"`  // median time between output chunks
	E2Ep50        float64 `json:"e2e_p50_s"`
	E2Emean       float64 `json:"e2e_mean_s"`
	ActiveAvg     float64 `json:"active_avg"` // average requests in flight
	Completed     int     `json:"completed"`  // successful requests
}

// Valid reports whether the round enters the performance medians: no request failed
// (requests cut by the round's window are not failures).
func (r Round) Valid() bool { return len(r.Failures) == 0 && r.Sent > 0 }

// summarize reduces a batch to a Round. A duration-bounded round's throughput counts
// every token received inside its window (streams still running included); a
// count-bounded round's counts the output of successful requests over the round's time,
// as the published H20-3e rate scan defines it (docs/simulator.md).
func summarize(b batch) Round {
	r := Round{Sent: len(b.samples), Seconds: b.span.Seconds()}
	var ttft, tpot, itl, e2e []float64
	var busy time.Duration
	windowTokens := 0
	for _, s := range b.samples {
		windowTokens += s.WindowTokens
		busy += s.Res.E2E
		if s.Looped {
			r.Looped++
		}
		switch s.Failure {
		case NoFailure:
		case Cut:
			r.Cut++
			continue
		default:
			if r.Failures == nil {
				r.Failures = map[string]int{}
			}
			r.Failures[s.Failure.String()]++
			continue
		}
		r.Succeeded++
		r.OutputToks += s.Res.OutputTokens
		ttft = append(ttft, s.Res.TTFT.Seconds())
		e2e = append(e2e, s.Res.E2E.Seconds())
		if s.Res.TPOT > 0 {
			tpot = append(tpot, s.Res.TPOT.Seconds())
		}
		for _, g := range s.Res.Gaps {
			itl = append(itl, g.Seconds())
		}
	}
	r.Completed = r.Succeeded
	if b.arrival > 0 {
		r.Offered = float64(r.Sent) / b.arrival.Seconds()
	}
	if r.Seconds > 0 {
		tokens := r.OutputToks
		if b.windowed {
			tokens = windowTokens
		}
		r.Throughput = float64(tokens) / r.Seconds
		r.ActiveAvg = busy.Seconds() / r.Seconds
	}
	r.TTFTp50, r.TTFTp95 = percentile(ttft, 50), percentile(ttft, 95)
	r.E2Emean = mean(e2e)
	r.TPOTp95, r.ITLp50, r.E2Ep50 = percentile(tpot, 95), percentile(itl, 50), percentile(e2e, 50)
	if p50 := percentile(tpot, 50); p50 > 0 {
		r.PerRequestTPS = 1 / p50
	}
	return r
}

// percentile returns the p-th percentile of xs by linear interpolation between closest
// ranks (as numpy does, and the benchmark tools with it); 0 for no data. xs is sorted
// in place.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	pos := p / 100 * float64(len(xs)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[lo] + (pos-float64(lo))*(xs[lo+1]-xs[lo])
}

// mean returns the mean of xs, or 0 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// median returns the median of the values f takes on rounds; 0 for none.
func median(rounds []Round, f func(Round) float64) float64 {
	xs := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		xs = append(xs, f(r))
	}
	return percentile(xs, 50)
}

// spread returns (max - min) / median of the values, or 0.
func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := percentile(slices.Clone(xs), 50)
	if m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m
}
