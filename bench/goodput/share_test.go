package main

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

func TestJain(t *testing.T) {
	cases := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"all equal", []float64{0.3, 0.3, 0.3}, 1},
		{"one has everything", []float64{1, 0, 0}, 1.0 / 3},
		{"two of four", []float64{1, 1, 0, 0}, 0.5},
		{"1 and 2", []float64{1, 2}, 9.0 / 10},
		{"scale does not matter", []float64{10, 20}, 9.0 / 10},
		{"one value", []float64{7}, 1},
		{"none", nil, math.NaN()},
		{"all zero", []float64{0, 0, 0}, math.NaN()},
		{"a NaN", []float64{1, math.NaN()}, math.NaN()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := jain(tc.xs)
			if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("jain(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}

func TestMaxMinShares(t *testing.T) {
	cases := []struct {
		name     string
		demand   []float64
		capacity float64
		want     []float64
	}{
		{"the small get what they ask, the big one the rest", []float64{10, 10, 10, 100}, 100, []float64{10, 10, 10, 70}},
		{"the order does not matter", []float64{100, 10, 10, 10}, 100, []float64{70, 10, 10, 10}},
		{"too little for anyone: equal parts", []float64{10, 10, 10, 100}, 20, []float64{5, 5, 5, 5}},
		{"what one leaves goes to the others equally", []float64{2, 50, 100}, 62, []float64{2, 30, 30}},
		{"enough for all", []float64{1, 2, 3}, 100, []float64{1, 2, 3}},
		{"nothing to share", []float64{1, 2}, 0, []float64{0, 0}},
		{"nobody asks", []float64{0, 0}, 5, []float64{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := maxMinShares(tc.demand, tc.capacity)
			sum, want := 0.0, 0.0
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("maxMinShares(%v, %v) = %v, want %v", tc.demand, tc.capacity, got, tc.want)
				}
				sum += got[i]
				want += tc.demand[i]
			}
			if math.Abs(sum-min(want, tc.capacity)) > 1e-9 {
				t.Errorf("the shares sum to %v, want min(demand %v, capacity %v)", sum, want, tc.capacity)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, math.NaN(), 1}, 3},
		{[]float64{math.NaN()}, math.NaN()},
		{nil, math.NaN()},
	}
	for _, tc := range cases {
		in := append([]float64(nil), tc.xs...)
		got := median(tc.xs)
		if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.xs[i] && !math.IsNaN(in[i]) {
				t.Fatalf("median modified its input")
			}
		}
	}
}

// TestTenantUses checks one stack's per-tenant figures from hand-made outcomes: what each
// tenant asked for and got in tokens, its shares, attainment and why its requests missed.
func TestTenantUses(t *testing.T) {
	s := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	good := func(cls int, at, queue float64) outcome {
		return outcome{Arrival: sec(at), Class: cls, Status: http.StatusOK, Headers: sec(queue), FirstTok: true, TTFT: sec(queue + 1),
			E2E: sec(queue+1) + 9*50*time.Millisecond, Tokens: 10, Chunks: 10, Done: true}
	}
	with := func(o outcome, f func(*outcome)) outcome { f(&o); return o }
	e := &experiment{
		SLO: s, Warmup: 10 * time.Second, Window: 100 * time.Second,
		Classes: []class{{Name: "calm-1", Input: 100, Output: 10}, {Name: floodTenant, Input: 1000, Output: 10}},
	}
	e.Outcomes = [][]outcome{{
		good(0, 5, 0),  // in the warm-up: not counted
		good(0, 20, 0), // good
		good(0, 30, 2), // good, 2 s in the queue
		with(good(0, 40, 4.5), func(o *outcome) { o.TTFT, o.E2E = sec(6), sec(6)+9*50*time.Millisecond }), // late: 4.5 s queue + 1.5 s engine
		{Arrival: sec(50), Class: 0, Status: http.StatusTooManyRequests, Reason: "predicted-late", Headers: sec(0.01)},
		good(1, 20, 0), // the flooder: one good,
		with(good(1, 30, 0), func(o *outcome) { o.E2E = sec(1) + 9*150*time.Millisecond }),               // one with slow tokens,
		with(good(1, 40, 0), func(o *outcome) { o.Done, o.Cut, o.Tokens, o.Chunks = false, true, 0, 4 }), // one cut after 4 tokens,
		{Arrival: sec(60), Class: 1, E2E: sec(30), Cut: true},                                            // one cut before any response,
		good(1, 110, 0), // and one after the window
	}}
	e.Timeline = [][]sample{{{At: sec(5), Engine: admission.Saturated}, {At: sec(50), Engine: admission.Saturated}, {At: sec(60)}}}
	us := e.tenantUses(0)
	calm, flood := us[0], us[1]
	if calm.Sum.Offered != 4 || calm.Sum.Good != 2 || calm.Admitted != 3 || calm.Sum.Reasons["predicted-late"] != 1 {
		t.Errorf("calm: %+v", calm)
	}
	if calm.Offered != 4*110 || calm.Served != 3*110 {
		t.Errorf("calm asked for %v tokens and got %v; want 440 and 330", calm.Offered, calm.Served)
	}
	if calm.Attainment() != 0.5 || calm.AdmittedAttainment() != 2.0/3 || calm.Got() != 0.75 {
		t.Errorf("calm attainment %v, of admitted %v, got %v; want 0.5, 2/3, 0.75", calm.Attainment(), calm.AdmittedAttainment(), calm.Got())
	}
	if m := calm.Misses; m.TTFT != 1 || m.TPOT != 0 || m.Unfinished != 0 || m.LateQueue != sec(4.5) || m.LateEngine != sec(1.5) ||
		m.QueueP50 != sec(2) || m.QueueMax != sec(4.5) {
		t.Errorf("calm misses %+v", m)
	}
	if want := (0 + 2 + 4.5 + 0.01) / 100; math.Abs(calm.Waiting-want) > 1e-9 {
		t.Errorf("calm waiting %v, want %v", calm.Waiting, want)
	}
	if flood.Sum.Offered != 4 || flood.Sum.Good != 1 || flood.Admitted != 4 || flood.Misses.TPOT != 1 || flood.Misses.Unfinished != 2 {
		t.Errorf("flood: %+v", flood)
	}
	if flood.Offered != 4*1010 || flood.Served != 2*1010+1004 {
		t.Errorf("flood asked for %v tokens and got %v; want 4040 and 3024", flood.Offered, flood.Served)
	}
	if want := 30.0 / 100; math.Abs(flood.Waiting-want) > 1e-9 { // the one without a response waited its 30 s
		t.Errorf("flood waiting %v, want %v", flood.Waiting, want)
	}
	total := calm.Served + flood.Served
	if math.Abs(calm.Share-calm.Served/total) > 1e-12 || math.Abs(calm.Share+flood.Share-1) > 1e-12 {
		t.Errorf("shares %v and %v of %v tokens", calm.Share, flood.Share, total)
	}
	// Max-min: calm asked for less than half of what was served, so its fair share is
	// what it asked for, and the flooder's the rest.
	if math.Abs(calm.Fair-calm.Offered/total) > 1e-12 || math.Abs(flood.Fair-(total-calm.Offered)/total) > 1e-12 {
		t.Errorf("fair shares %v and %v", calm.Fair, flood.Fair)
	}
	r := e.fairResult(0)
	if math.Abs(r.FloodOverFair-flood.Share/flood.Fair) > 1e-12 || r.FloodOverFair <= 1 {
		t.Errorf("flood over fair %v: calm got less than it asked, so the flooder is above its share", r.FloodOverFair)
	}
	if want := 3.0 / 100; math.Abs(r.Goodput-want) > 1e-12 {
		t.Errorf("goodput %v, want %v", r.Goodput, want)
	}
	if r.Saturated != 0.5 {
		t.Errorf("saturated %v of the window's samples, want 0.5 (the warm-up's not counted)", r.Saturated)
	}
}
