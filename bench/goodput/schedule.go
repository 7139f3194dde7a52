package main

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// class is one kind of request in a workload: its prompt and output lengths (in tokens),
// its Poisson arrival rate and, in the fairness phase, the tenant that sends it.
type class struct {
	Name   string
	Input  int     // prompt length in token ids, exact
	Output int     // max_tokens, with ignore_eos: exactly this many tokens
	Rate   float64 // arrivals per second
	Tenant string  // the value of the tenant header (tenantHeader) its requests carry; "": none
}

// arrival is one request of a schedule: when it is sent, counted from the start of the
// run, and which class it belongs to.
type arrival struct {
	At    time.Duration
	Class int // index into the workload's classes
}

// poisson returns the arrival offsets of a Poisson process of the given rate over
// [0, dur). The inter-arrival times are unit-rate exponentials from a generator seeded
// with seed, divided by rate: the same seed at two rates gives the same sequence, scaled
// in time (common random numbers across the rates compared).
func poisson(rate float64, dur time.Duration, seed uint64) []time.Duration {
	if rate <= 0 || dur <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []time.Duration
	for t := 0.0; ; {
		t += rng.ExpFloat64() / rate
		at := time.Duration(t * float64(time.Second))
		if at >= dur {
			return out
		}
		out = append(out, at)
	}
}

// schedule merges independent Poisson arrivals of every class over [0, dur) into one
// schedule ordered by time. Class i draws from seed+i, so adding a class does not change
// the arrivals of the others.
func schedule(classes []class, dur time.Duration, seed uint64) []arrival {
	var out []arrival
	for i, c := range classes {
		for _, at := range poisson(c.Rate, dur, seed+uint64(i)) {
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
