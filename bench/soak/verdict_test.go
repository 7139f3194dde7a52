package soak

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// samplesOf returns n samples 10 s apart whose values come from f(i).
func samplesOf(n int, f func(i int) Sample) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = f(i)
		out[i].At = time.Duration(i+1) * 10 * time.Second
	}
	return out
}

func TestJudge(t *testing.T) {
	const mib = 1 << 20
	steady := func(i int) Sample {
		wobble := float64(i%3 - 1) // -1, 0, 1
		return Sample{Goroutines: 2400 + 30*wobble, FDs: 1200 + 10*wobble, Heap: (60 + 3*wobble) * mib, RSS: 100 * mib}
	}
	cases := []struct {
		name     string
		samples  []Sample
		flat     bool
		notFlat  []string // the trends that are not flat
		problem  string
		measured int // trends judged
	}{
		{name: "steady", samples: samplesOf(60, steady), flat: true, measured: 4},
		{name: "a goroutine leak", samples: samplesOf(60, func(i int) Sample {
			s := steady(i)
			s.Goroutines += float64(10 * i) // 100 a minute
			return s
		}), notFlat: []string{"goroutines"}, measured: 4},
		{name: "a heap leak", samples: samplesOf(60, func(i int) Sample {
			s := steady(i)
			s.Heap += float64(i) * 0.25 * mib
			s.RSS += float64(i) * 0.25 * mib
			return s
		}), notFlat: []string{"heap in use", "RSS"}, measured: 4},
		{name: "a small count grows by less than the slack", samples: samplesOf(30, func(i int) Sample {
			return Sample{Goroutines: 20 + float64(i/3), FDs: 10, Heap: mib, RSS: mib}
		}), flat: true, measured: 4},
		{name: "the warm-up is left out", samples: samplesOf(60, func(i int) Sample {
			s := steady(i)
			if i < 11 {
				s.Goroutines, s.Heap = 100, mib
			}
			return s
		}), flat: true, measured: 4},
		{name: "shrinking is flat", samples: samplesOf(30, func(i int) Sample {
			return Sample{Goroutines: 3000 - 10*float64(i), FDs: 10, Heap: mib, RSS: mib}
		}), flat: true, measured: 4},
		{name: "unmeasured series are left out", samples: samplesOf(30, func(i int) Sample {
			s := steady(i)
			s.RSS, s.FDs = -1, -1
			return s
		}), flat: true, measured: 2},
		{name: "too few samples", samples: samplesOf(6, steady), problem: "5 samples after the warm-up"},
		{name: "none", samples: nil, problem: "no samples"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.samples, DefaultRule)
			if v.Flat != tc.flat {
				t.Errorf("flat = %v, want %v: %+v", v.Flat, tc.flat, v)
			}
			if !strings.Contains(v.Problem, tc.problem) || (tc.problem == "") != (v.Problem == "") {
				t.Errorf("problem %q, want %q", v.Problem, tc.problem)
			}
			if tc.problem != "" {
				return
			}
			if len(v.Trends) != tc.measured {
				t.Errorf("%d trends judged, want %d", len(v.Trends), tc.measured)
			}
			var notFlat []string
			for _, tr := range v.Trends {
				if !tr.Flat {
					notFlat = append(notFlat, tr.Name)
				}
			}
			if strings.Join(notFlat, ",") != strings.Join(tc.notFlat, ",") {
				t.Errorf("not flat: %v, want %v", notFlat, tc.notFlat)
			}
			var b bytes.Buffer
			v.WriteMarkdown(&b)
			want := "Verdict: **flat**."
			if !tc.flat {
				want = "Verdict: **not flat**."
			}
			if !strings.Contains(b.String(), want) {
				t.Errorf("the Markdown lacks %q:\n%s", want, b.String())
			}
		})
	}
}

func TestTrendFigures(t *testing.T) {
	// 60 samples, one a second: goroutines rise by 1 a sample, i.e. 60 a minute.
	samples := make([]Sample, 60)
	for i := range samples {
		samples[i] = Sample{At: time.Duration(i+1) * time.Second, Goroutines: float64(1000 + i), FDs: 7, Heap: 1, RSS: 1}
	}
	v := Judge(samples, Rule{WarmUp: 0.5, CountGrowth: 0.1, CountSlack: 20, HeapGrowth: 0.1, RSSGrowth: 0.05})
	g := v.Trends[0]
	// After the warm-up (30 s): samples 30..60 are values 1029..1059; 31 samples, thirds of 10.
	if v.Analysed != 31 || g.First != 1033.5 || g.Last != 1054.5 {
		t.Errorf("analysed %d, medians %v and %v; want 31, 1033.5 and 1054.5", v.Analysed, g.First, g.Last)
	}
	if g.SlopePerMin < 59.999 || g.SlopePerMin > 60.001 {
		t.Errorf("slope %v a minute, want 60", g.SlopePerMin)
	}
	if g.Limit != 1033.5+103.35 || !g.Flat {
		t.Errorf("limit %v (flat %v), want 1136.85 (flat)", g.Limit, g.Flat)
	}
}

func TestFaultPhase(t *testing.T) {
	cases := []struct {
		cycle, at time.Duration
		want      bool
	}{
		{time.Minute, 0, false},
		{time.Minute, 29 * time.Second, false},
		{time.Minute, 30 * time.Second, true},
		{time.Minute, 44 * time.Second, true},
		{time.Minute, 45 * time.Second, false},
		{time.Minute, 95 * time.Second, true},
		{0, 30 * time.Second, false},
	}
	for _, tc := range cases {
		if got := FaultPhase(tc.cycle, tc.at); got != tc.want {
			t.Errorf("FaultPhase(%s, %s) = %v, want %v", tc.cycle, tc.at, got, tc.want)
		}
	}
}
