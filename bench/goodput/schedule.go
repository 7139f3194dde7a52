package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/slogate/slogate/measure"
)

// class is one kind of request in a workload: its prompt and output lengths (in tokens),
// its Poisson arrival rate and, in the fairness phase, the tenant that sends it.
type class struct {
	Name   string
	Input  int     // prompt length in token ids, exact
	Output int     // max_tokens, with ignore_eos: exactly this many tokens
	Rate   float64 // arrivals per second
	Tenant string  // the value of the tenant header (tenantHeader) its requests carry; "": none
	// SLO judges the class's requests; zero fields take the experiment's.
	SLO measure.SLO
}

// arrival is one request of a schedule: when it is sent, counted from the start of the
// run, and which class it belongs to.
type arrival struct {
	At    time.Duration
	Class int // index into the workload's classes
}

// renewal returns the arrival offsets over [0, dur) of a renewal process of the given
// rate whose inter-arrival times have coefficient of variation cv: exponential for cv 1
// (a Poisson process), gamma with shape 1/cv² otherwise (cv 3: long quiet spells broken
// by bursts, the traffic a batch job or a retry storm sends). The gaps are drawn with
// mean 1 from a generator seeded with seed, then divided by rate: the same seed at two
// rates gives the same sequence, scaled in time (common random numbers across the rates
// compared), whatever cv.
func renewal(rate float64, dur time.Duration, seed uint64, cv float64) []time.Duration {
	if rate <= 0 || dur <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	gap := rng.ExpFloat64
	if cv != 1 {
		k := 1 / (cv * cv)
		gap = func() float64 { return gamma(rng, k) / k }
	}
	var out []time.Duration
	for t := 0.0; ; {
		t += gap() / rate
		at := time.Duration(t * float64(time.Second))
		if at >= dur {
			return out
		}
		out = append(out, at)
	}
}

// poisson returns the arrival offsets of a Poisson process: renewal with cv 1.
func poisson(rate float64, dur time.Duration, seed uint64) []time.Duration {
	return renewal(rate, dur, seed, 1)
}

// gamma draws from the gamma distribution of shape k > 0 and scale 1 by Marsaglia and
// Tsang's method (ACM TOMS 26(3), 2000), boosted for k < 1: Gamma(k) = Gamma(k+1) × U^(1/k).
func gamma(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		return gamma(rng, k+1) * math.Pow(1-rng.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64() // in (0, 1]
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// schedule merges independent arrivals of every class over [0, dur), each a renewal
// process of the class's rate with coefficient of variation cv (1: Poisson), into one
// schedule ordered by time. Class i draws from seed+i, so adding a class does not change
// the arrivals of the others.
func schedule(classes []class, dur time.Duration, seed uint64, cv float64) []arrival {
	var out []arrival
	for i, c := range classes {
		for _, at := range renewal(c.Rate, dur, seed+uint64(i), cv) {
			out = append(out, arrival{At: at, Class: i})
		}
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return int(a.At - b.At) })
	return out
}

// completionBody returns a streaming /v1/completions request whose prompt is exactly
// input token ids drawn uniformly from [0, vocab), asking for exactly output tokens
// (ignore_eos) and a usage report at the end of the stream.
func completionBody(model string, input, output, vocab int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x601d9))
	b := make([]byte, 0, 64+7*input)
	b = append(b, `{"model":"`...)
	b = append(b, model...)
	b = append(b, `","prompt":[`...)
	for i := range input {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(rng.IntN(vocab)), 10)
	}
	b = append(b, `],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	b = append(b, `,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`...)
	return b
}
