package enginesim

import (
	"math"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
)

// The virtual-time harness (virtual.go) is what the calibration tests and SustainableRate
// stand on: these tests check that it keeps the model's time and counts what it should.

// One request on an idle engine: TTFT is the API latency plus the prefill steps, E2E adds
// one decode step per further token, and the run ends when it does.
func TestOpenLoopSingleRequest(t *testing.T) {
	p := mustProfile(t, "h20x8-flash")
	fs, span := openLoop(p, 4096, 8, []time.Duration{0})
	if len(fs) != 1 {
		t.Fatalf("%d finished, want 1", len(fs))
	}
	f := fs[0]
	if f.TTFT <= p.APILatency || f.E2E <= f.TTFT || f.OutputTokens != 8 || f.Reason != "length" {
		t.Errorf("finished %+v", f)
	}
	if span != f.E2E {
		t.Errorf("span %v, want the request's E2E %v", span, f.E2E)
	}
	if f.TTFT != f.Queue+f.Prefill+p.APILatency || f.E2E != f.TTFT+f.Decode {
		t.Errorf("TTFT %v != queue %v + prefill %v + API %v, or E2E %v != TTFT + decode %v", f.TTFT, f.Queue, f.Prefill, p.APILatency, f.E2E, f.Decode)
	}
}

// openLoopUntil leaves out what had not finished by its limit.
func TestOpenLoopUntilCuts(t *testing.T) {
	p := mustProfile(t, "h20x8-flash")
	offsets := []time.Duration{0, time.Second, time.Hour}
	fs, _ := openLoopUntil(p, 1024, 16, offsets, time.Minute)
	if len(fs) != 2 {
		t.Errorf("%d finished by the limit, want the first 2", len(fs))
	}
}

func TestArrivals(t *testing.T) {
	cases := []struct {
		name    string
		offsets []time.Duration
		want    int // requests, ± 5% for Poisson
	}{
		{"constant", constantArrivals(2, 10*time.Second), 20},
		{"poisson", poissonArrivals(2, time.Hour, 1), 7200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if n := len(tc.offsets); math.Abs(float64(n-tc.want)) > 0.05*float64(tc.want) {
				t.Errorf("%d arrivals, want about %d", n, tc.want)
			}
			for i := 1; i < len(tc.offsets); i++ {
				if tc.offsets[i] < tc.offsets[i-1] {
					t.Fatalf("offsets out of order at %d", i)
				}
			}
		})
	}
	// The same seed at twice the rate is the same process in half the time.
	slow, fast := poissonArrivals(1, time.Minute, 9), poissonArrivals(2, 30*time.Second, 9)
	if len(slow) != len(fast) {
		t.Fatalf("%d and %d arrivals", len(slow), len(fast))
	}
	for i := range slow {
		if d := slow[i] - 2*fast[i]; d < -2 || d > 2 {
			t.Fatalf("arrival %d: %v at rate 1, %v at rate 2", i, slow[i], fast[i])
		}
	}
}

func TestQuantile(t *testing.T) {
	cases := []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"one", []float64{3}, 0.95, 3},
		{"interpolated", []float64{4, 1, 3, 2}, 0.5, 2.5},
		{"p95 of 1..21", seq21(), 0.95, 20},
		{"max", []float64{1, 2, 3}, 1, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.xs, tc.q); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("quantile = %v, want %v", got, tc.want)
			}
		})
	}
	if !math.IsNaN(quantile(nil, 0.5)) {
		t.Error("quantile of nothing is not NaN")
	}
}

func seq21() []float64 {
	xs := make([]float64, 21)
	for i := range xs {
		xs[i] = float64(21 - i)
	}
	return xs
}

// SustainableRate is the truth the calibration is held to: the rate it returns passes
// for the seed it searched with, a rate just above fails, a looser SLO sustains more,
// and an SLO no idle engine meets sustains nothing.
func TestSustainableRate(t *testing.T) {
	p := mustProfile(t, "h20x8-flash")
	slo := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	o := Search{Seeds: []uint64{7}, Window: 5 * time.Minute}
	r, err := SustainableRate(p, 8192, 128, slo, o)
	if err != nil || r <= 0 {
		t.Fatalf("SustainableRate = %v, %v", r, err)
	}
	o = o.withDefaults()
	at, _ := OfferPoisson(p, 8192, 128, r, o.Window, o.Drain, 7)
	above, _ := OfferPoisson(p, 8192, 128, r*(1+2*o.Precision), o.Window, o.Drain, 7)
	if !at.Meets(slo) || above.Meets(slo) {
		t.Errorf("at %.3f req/s: %+v meets %v; %.1f%% above: %+v meets %v", r, at, at.Meets(slo), 200*o.Precision, above, above.Meets(slo))
	}
	loose, err := SustainableRate(p, 8192, 128, measure.NewSLO(20*time.Second, 200*time.Millisecond), o)
	if err != nil || loose <= r {
		t.Errorf("a looser SLO sustains %.3f req/s (%v), not more than %.3f", loose, err, r)
	}
	none, err := SustainableRate(p, 8192, 128, measure.NewSLO(time.Millisecond, 0), o)
	if err != nil || none != 0 {
		t.Errorf("a 1 ms TTFT SLO sustains %v (%v), want 0", none, err)
	}
	if _, err := SustainableRate(p, p.MaxModelLen, 128, slo, o); err == nil {
		t.Error("a shape longer than the context is not an error")
	}
}
