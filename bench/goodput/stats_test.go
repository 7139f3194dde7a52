package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 .. 1, unsorted
	}
	cases := []struct {
		name string
		xs   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.95, 0},
		{"one", ms(7), 0.95, 7 * time.Millisecond},
		{"p95 of 1..100 is the 95th", ms(hundred...), 0.95, 95 * time.Millisecond},
		{"p50 of 1..100 is the 50th", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p95 of 10 values is the largest (rank ceil 9.5 = 10)", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.95, 10 * time.Millisecond},
		{"p95 of 20 values is the 19th", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.95, 19 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]time.Duration(nil), tc.xs...)
			if got := percentile(tc.xs, tc.q); got != tc.want {
				t.Errorf("percentile = %v, want %v", got, tc.want)
			}
			for i := range before {
				if tc.xs[i] != before[i] {
					t.Fatal("percentile modified its input")
				}
			}
		})
	}
}

func TestOutcomeClassification(t *testing.T) {
	s := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	ok := outcome{Status: 200, Done: true, FirstTok: true, Tokens: 128, TTFT: 2 * time.Second, E2E: 2*time.Second + 127*90*time.Millisecond}
	cases := []struct {
		name                      string
		o                         outcome
		rejected, completed, good bool
		tpot                      time.Duration
	}{
		{"good", ok, false, true, true, 90 * time.Millisecond},
		{"TTFT exactly at the SLO is good", with(ok, func(o *outcome) { o.TTFT, o.E2E = 5*time.Second, 5*time.Second+127*90*time.Millisecond }), false, true, true, 90 * time.Millisecond},
		{"slow first token", with(ok, func(o *outcome) { o.TTFT, o.E2E = 5*time.Second+1, 5*time.Second+1+127*90*time.Millisecond }), false, true, false, 90 * time.Millisecond},
		{"slow tokens", with(ok, func(o *outcome) { o.E2E = 2*time.Second + 127*101*time.Millisecond }), false, true, false, 101 * time.Millisecond},
		{"short stream", with(ok, func(o *outcome) { o.Tokens = 127 }), false, false, false, (127 * 90 * time.Millisecond) / 126},
		{"no end marker", with(ok, func(o *outcome) { o.Done = false }), false, false, false, 90 * time.Millisecond},
		{"cut", with(ok, func(o *outcome) { o.Cut = true }), false, false, false, 90 * time.Millisecond},
		{"429", outcome{Status: http.StatusTooManyRequests}, true, false, false, 0},
		{"503", outcome{Status: http.StatusServiceUnavailable}, true, false, false, 0},
		{"502 is a failure, not a rejection", outcome{Status: http.StatusBadGateway}, false, false, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.rejected(); got != tc.rejected {
				t.Errorf("rejected = %v, want %v", got, tc.rejected)
			}
			if got := tc.o.completed(128); got != tc.completed {
				t.Errorf("completed = %v, want %v", got, tc.completed)
			}
			if got := tc.o.good(128, s); got != tc.good {
				t.Errorf("good = %v, want %v", got, tc.good)
			}
			if got := tc.o.tpot(); got != tc.tpot {
				t.Errorf("tpot = %v, want %v", got, tc.tpot)
			}
		})
	}
}

func with(o outcome, f func(*outcome)) outcome { f(&o); return o }

func TestSummarize(t *testing.T) {
	s := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	good := func(at float64) outcome {
		return outcome{Arrival: sec(at), Status: 200, Done: true, FirstTok: true, Tokens: 11, TTFT: sec(1), E2E: sec(1.5)}
	}
	os := []outcome{
		good(5),  // before the window: not counted
		good(10), // good
		good(11), // good
		with(good(12), func(o *outcome) { o.TTFT, o.E2E = sec(6), sec(6.5) }), // completed, TTFT missed
		with(good(13), func(o *outcome) { o.E2E = sec(3.1) }),                 // completed, TPOT 210 ms missed
		{Arrival: sec(14), Status: 429, Reason: "predicted-late"},             // rejected
		{Arrival: sec(15), Status: 429, Reason: "queue-timeout"},              // rejected
		{Arrival: sec(16), Cut: true, E2E: sec(20)},                           // cut before its first token
		{Arrival: sec(17), Status: 502},                                       // failed
		with(good(18), func(o *outcome) { o.Class = 1 }),                      // another class
		good(30), // after the window
		with(good(19), func(o *outcome) { o.Cut, o.Done, o.Tokens = true, false, 3 }), // cut after its first token
	}
	got := summarize(os, 0, 11, s, sec(10), sec(10))
	want := summary{Offered: 9, Good: 2, Completed: 4, Rejected: 2, Failed: 1, Unfinished: 2, Window: sec(10),
		Goodput: 0.2, RejectRate: 2.0 / 9}
	if got.Offered != want.Offered || got.Good != want.Good || got.Completed != want.Completed ||
		got.Rejected != want.Rejected || got.Failed != want.Failed || got.Unfinished != want.Unfinished {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if got.Goodput != want.Goodput || got.RejectRate != want.RejectRate {
		t.Errorf("goodput %v, reject rate %v; want %v, %v", got.Goodput, got.RejectRate, want.Goodput, want.RejectRate)
	}
	if got.Reasons["predicted-late"] != 1 || got.Reasons["queue-timeout"] != 1 {
		t.Errorf("reasons = %v", got.Reasons)
	}
	// TTFTs of the admitted: 1, 1, 6, 1 (completed), 20 (cut, a lower bound), 1 (cut
	// after its first token): the p95 is the censored 20 s.
	if got.P95TTFT != sec(20) || !got.TTFTCensored {
		t.Errorf("p95 TTFT = %v censored %v, want 20s censored", got.P95TTFT, got.TTFTCensored)
	}
	// TPOTs of the completed: 50, 50, 50, 210 ms.
	if got.P95TPOT != sec(0.21) {
		t.Errorf("p95 TPOT = %v, want 210ms", got.P95TPOT)
	}
	if got.MeanE2E != sec((1.5+1.5+6.5+3.1)/4) {
		t.Errorf("mean E2E = %v", got.MeanE2E)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	got := summarize(nil, 0, 128, measure.SLO{}, 0, time.Minute)
	if got.Offered != 0 || got.Goodput != 0 || got.RejectRate != 0 || got.P95TTFT != 0 || got.TTFTCensored {
		t.Errorf("summary of nothing = %+v", got)
	}
}
