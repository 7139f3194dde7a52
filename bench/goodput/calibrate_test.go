package main

import (
	"slices"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
)

func TestBracket(t *testing.T) {
	tr := func(rate float64, ok bool) trial { return trial{Rate: rate, OK: ok} }
	cases := []struct {
		name   string
		ts     []trial
		lo, hi float64
	}{
		{"monotone", []trial{tr(0.6, true), tr(0.8, true), tr(1.0, false), tr(1.2, false)}, 0.8, 1.0},
		{"a pass above a failure is ignored", []trial{tr(0.6, true), tr(0.8, false), tr(1.0, true), tr(1.2, false)}, 0.6, 0.8},
		{"refined points join the scan", []trial{tr(0.8, true), tr(1.0, false), tr(0.85, true), tr(0.9, true), tr(0.95, false)}, 0.9, 0.95},
		{"nothing fails", []trial{tr(0.6, true), tr(0.8, true)}, 0.8, 0},
		{"everything fails", []trial{tr(0.6, false), tr(0.8, false)}, 0, 0.6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := bracket(tc.ts)
			if lo != tc.lo || hi != tc.hi {
				t.Errorf("bracket = (%v, %v), want (%v, %v)", lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

func TestProbes(t *testing.T) {
	if got, want := probes(1.0, 1.2, 3), []float64{1.05, 1.1, 1.15}; !slices.Equal(got, want) {
		t.Errorf("probes = %v, want %v", got, want)
	}
	if got := probes(1.0, 1.001, 3); len(got) > 2 {
		t.Errorf("probes in a tiny bracket should not repeat: %v", got)
	}
}

func TestSustainable(t *testing.T) {
	o := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	ok := summary{Offered: 100, Completed: 100, P95TTFT: 5 * time.Second, P95TPOT: 100 * time.Millisecond}
	cases := []struct {
		name string
		s    summary
		want bool
	}{
		{"at the SLOs", ok, true},
		{"one request short", with2(ok, func(s *summary) { s.Completed = 99 }), false},
		{"TTFT over", with2(ok, func(s *summary) { s.P95TTFT += time.Millisecond }), false},
		{"TPOT over", with2(ok, func(s *summary) { s.P95TPOT += time.Millisecond }), false},
		{"censored TTFT", with2(ok, func(s *summary) { s.TTFTCensored = true }), false},
		{"nothing offered", summary{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sustainable(tc.s, o); got != tc.want {
				t.Errorf("sustainable = %v, want %v", got, tc.want)
			}
		})
	}
}

func with2(s summary, f func(*summary)) summary { f(&s); return s }

func TestGrace(t *testing.T) {
	if got := grace(measure.NewSLO(5*time.Second, 100*time.Millisecond), 128); got != 18700*time.Millisecond {
		t.Errorf("grace = %v, want 18.7s (5 s + 127 x 100 ms + 1 s)", got)
	}
}
