package synth

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
)

// ok is a successful sample of out tokens: first token after ttft, the rest one gap apart.
func ok(out int, ttft, gap time.Duration) Sample {
	gaps := make([]time.Duration, out-1)
	for i := range gaps {
		gaps[i] = gap
	}
	e2e := ttft + time.Duration(out-1)*gap
	s := Sample{Status: 200, WindowTokens: out, Res: measure.Result{
		TTFT: ttft, E2E: e2e, Gaps: gaps, OutputTokens: out, OutputChunks: out, Ended: true,
	}}
	if out > 1 {
		s.Res.TPOT = (e2e - ttft) / time.Duration(out-1)
	}
	return s
}

func failed(f Failure, e2e time.Duration) Sample {
	return Sample{Failure: f, Res: measure.Result{E2E: e2e}}
}

func cut(windowTokens int, e2e time.Duration) Sample {
	return Sample{Failure: Cut, WindowTokens: windowTokens, Res: measure.Result{E2E: e2e, OutputTokens: windowTokens}}
}

func looped(s Sample) Sample { s.Looped = true; return s }

const msec = time.Millisecond

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		b    batch
		want Round
	}{
		{
			name: "count-bounded: output of successes over the round's time",
			b: batch{span: 2 * time.Second, samples: []Sample{
				ok(11, 100*msec, 10*msec), ok(11, 200*msec, 20*msec), ok(11, 300*msec, 30*msec),
			}},
			want: Round{
				Sent: 3, Succeeded: 3, Completed: 3, Seconds: 2, OutputToks: 33,
				Throughput: 16.5, PerRequestTPS: 50, TTFTp50: 0.2, TTFTp95: 0.29, TPOTp95: 0.029,
				ITLp50: 0.02, E2Ep50: 0.4, ActiveAvg: (0.2 + 0.4 + 0.6) / 2,
			},
		},
		{
			name: "windowed: every token received in the window, cut streams included",
			b: batch{span: time.Second, windowed: true, samples: []Sample{
				ok(5, 100*msec, 10*msec), cut(7, 900*msec), cut(3, 500*msec),
			}},
			want: Round{
				Sent: 3, Succeeded: 1, Completed: 1, Cut: 2, Seconds: 1, OutputToks: 5,
				Throughput: 15, PerRequestTPS: 100, TTFTp50: 0.1, TTFTp95: 0.1, TPOTp95: 0.01,
				ITLp50: 0.01, E2Ep50: 0.14, ActiveAvg: 0.14 + 0.9 + 0.5,
			},
		},
		{
			name: "failures stay in the denominator and out of the latencies",
			b: batch{span: 4 * time.Second, samples: []Sample{
				ok(3, 100*msec, 50*msec), failed(HTTPStatus, 10*msec), failed(HTTPStatus, 10*msec), failed(Transport, 2*time.Second),
			}},
			want: Round{
				Sent: 4, Succeeded: 1, Completed: 1, Seconds: 4, OutputToks: 3,
				Failures:   map[string]int{"http_status": 2, "transport": 1},
				Throughput: 0.75, PerRequestTPS: 20, TTFTp50: 0.1, TTFTp95: 0.1, TPOTp95: 0.05,
				ITLp50: 0.05, E2Ep50: 0.2, ActiveAvg: (0.2 + 0.01 + 0.01 + 2) / 4,
			},
		},
		{
			name: "open loop: offered rate over the arrival window",
			b: batch{span: 5 * time.Second, arrival: 4 * time.Second, samples: []Sample{
				ok(2, 100*msec, 100*msec), ok(2, 100*msec, 100*msec),
			}},
			want: Round{
				Sent: 2, Succeeded: 2, Completed: 2, Seconds: 5, OutputToks: 4, Offered: 0.5,
				Throughput: 0.8, PerRequestTPS: 10, TTFTp50: 0.1, TTFTp95: 0.1, TPOTp95: 0.1,
				ITLp50: 0.1, E2Ep50: 0.2, ActiveAvg: 0.08,
			},
		},
		{
			name: "looped outputs are counted, successful or not",
			b: batch{span: time.Second, samples: []Sample{
				looped(ok(2, 100*msec, 100*msec)), looped(cut(1, time.Second)), ok(2, 100*msec, 100*msec),
			}},
			want: Round{
				Sent: 3, Succeeded: 2, Completed: 2, Cut: 1, Looped: 2, Seconds: 1, OutputToks: 4,
				Throughput: 4, PerRequestTPS: 10, TTFTp50: 0.1, TTFTp95: 0.1, TPOTp95: 0.1,
				ITLp50: 0.1, E2Ep50: 0.2, ActiveAvg: 1.4,
			},
		},
		{
			name: "one-token answers have no TPOT",
			b:    batch{span: time.Second, samples: []Sample{ok(1, 50*msec, 0), ok(1, 150*msec, 0)}},
			want: Round{
				Sent: 2, Succeeded: 2, Completed: 2, Seconds: 1, OutputToks: 2,
				Throughput: 2, TTFTp50: 0.1, TTFTp95: 0.145, E2Ep50: 0.1, ActiveAvg: 0.2,
			},
		},
		{
			name: "nothing sent",
			b:    batch{span: time.Second, windowed: true},
			want: Round{Seconds: 1},
		},
		{
			name: "no time",
			b:    batch{samples: []Sample{ok(2, 100*msec, 100*msec)}},
			want: Round{Sent: 1, Succeeded: 1, Completed: 1, OutputToks: 2, PerRequestTPS: 10, TTFTp50: 0.1, TTFTp95: 0.1, TPOTp95: 0.1, ITLp50: 0.1, E2Ep50: 0.2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(tc.b)
			if tc.want.E2Emean == 0 { // every case has a symmetric E2E sample: mean = median
				tc.want.E2Emean = tc.want.E2Ep50
			}
			if !roundsClose(got, tc.want) {
				t.Errorf("summarize:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// roundsClose compares rounds, their float fields to 1e-9.
func roundsClose(a, b Round) bool {
	fa := []float64{a.Seconds, a.Offered, a.Throughput, a.PerRequestTPS, a.TTFTp50, a.TTFTp95, a.TPOTp95, a.ITLp50, a.E2Ep50, a.E2Emean, a.ActiveAvg}
	fb := []float64{b.Seconds, b.Offered, b.Throughput, b.PerRequestTPS, b.TTFTp50, b.TTFTp95, b.TPOTp95, b.ITLp50, b.E2Ep50, b.E2Emean, b.ActiveAvg}
	for i := range fa {
		if math.Abs(fa[i]-fb[i]) > 1e-9 {
			return false
		}
	}
	a.Seconds, a.Offered, a.Throughput, a.PerRequestTPS, a.TTFTp50, a.TTFTp95, a.TPOTp95, a.ITLp50, a.E2Ep50, a.E2Emean, a.ActiveAvg = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	b.Seconds, b.Offered, b.Throughput, b.PerRequestTPS, b.TTFTp50, b.TTFTp95, b.TPOTp95, b.ITLp50, b.E2Ep50, b.E2Emean, b.ActiveAvg = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	return reflect.DeepEqual(a, b)
}

func TestRoundValid(t *testing.T) {
	tests := []struct {
		r    Round
		want bool
	}{
		{Round{Sent: 3, Succeeded: 3}, true},
		{Round{Sent: 3, Succeeded: 1, Cut: 2}, true},
		{Round{Sent: 3, Succeeded: 2, Failures: map[string]int{"transport": 1}}, false},
		{Round{}, false},
	}
	for _, tc := range tests {
		if got := tc.r.Valid(); got != tc.want {
			t.Errorf("%+v.Valid() = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 95, 7},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{5, 1, 4, 2, 3}, 50, 3},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 95, 9.55}, // numpy.percentile
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9.1},
		{[]float64{3, 1, 2}, 0, 1},
		{[]float64{3, 1, 2}, 100, 3},
	}
	for _, tc := range tests {
		if got := percentile(append([]float64(nil), tc.xs...), tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
}

func TestSpreadAndMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{100}, 0},
		{[]float64{90, 100, 110}, 0.2},
		{[]float64{100, 106}, 0.06 / 1.03},
		{[]float64{0, 0, 5}, 0}, // median 0
	}
	for _, tc := range tests {
		if got := spread(tc.xs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("spread(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	xs := []float64{3, 1, 2}
	spread(xs)
	if xs[0] != 3 {
		t.Error("spread sorted its argument")
	}
	rounds := []Round{{Throughput: 30}, {Throughput: 10}, {Throughput: 20}}
	if got := median(rounds, func(r Round) float64 { return r.Throughput }); got != 20 {
		t.Errorf("median = %v, want 20", got)
	}
	if got := median(nil, func(r Round) float64 { return r.Throughput }); got != 0 {
		t.Errorf("median of nothing = %v", got)
	}
}
