package calibrate

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

func TestEngineCaps(t *testing.T) {
	slo := measure.SLO{TTFT: measure.Duration(5 * time.Second), TPOT: measure.Duration(100 * time.Millisecond)}
	// tier builds a calibrated tier whose knee point completed thr req/s with the
	// given mean E2E and p95 TTFT, at the knee rate rate.
	tier := func(name string, in int, rate, thr float64, e2e, ttft time.Duration) TierResult {
		return TierResult{
			Tier: name, Shape: synth.Shape{Input: in, Output: 128}, SLO: slo, KneeRate: rate, Knee: 1,
			Points: []Point{{Offered: rate / 2}, {Offered: rate, Throughput: thr, MeanE2E: e2e, TTFTp95: ttft}},
		}
	}
	k8 := tier("8k", 8192, 1.344, 1.332, 7103*time.Millisecond, 2287*time.Millisecond)
	short := tier("short", 1536, 12.5, 12.4, 1600*time.Millisecond, 900*time.Millisecond)
	none := TierResult{Tier: "long", Knee: -1, Points: []Point{{Offered: 1}}}
	tests := []struct {
		name  string
		tiers []TierResult
		want  [3]int
		basis [3]string // the tier each flag names
	}{
		// ⌈1.344 × 7.103⌉ = ⌈9.55⌉; ⌈5 × 1.332 × 8192⌉ = ⌈54558.7⌉; ⌈1.344 × 2.713⌉ = ⌈3.65⌉.
		{"one tier", []TierResult{k8}, [3]int{10, 54559, 4}, [3]string{"8k", "8k", "8k"}},
		// short: ⌈12.5 × 1.6⌉ = 20 in flight, ⌈5 × 12.4 × 1536⌉ = 95232 tokens, ⌈12.5 × 4.1⌉ = 52 queued: larger in every flag.
		{"the largest tier's", []TierResult{k8, short, none}, [3]int{20, 95232, 52}, [3]string{"short", "short", "short"}},
		{"no knee", []TierResult{none}, [3]int{}, [3]string{}},
		{"nothing", nil, [3]int{}, [3]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Result{Tiers: tt.tiers}.EngineCaps()
			if got := [3]int{f.MaxNumQueuedReqs, f.MaxNumQueuedTokens, f.MaxQueuedRequests}; got != tt.want {
				t.Errorf("caps %v, want %v (%q)", got, tt.want, f.Basis)
			}
			for i, b := range f.Basis {
				if tt.basis[i] == "" && b != "" || tt.basis[i] != "" && !strings.Contains(b, "tier "+tt.basis[i]+"'s") {
					t.Errorf("flag %d: basis %q, want tier %q's", i, b, tt.basis[i])
				}
			}
			if tt.want[0] == 0 {
				if f.VLLM() != nil || f.SGLang() != nil {
					t.Errorf("flags %v %v without a calibrated tier", f.VLLM(), f.SGLang())
				}
				return
			}
			wantV := []string{"--max-num-queued-reqs", itoa(tt.want[0]), "--max-num-queued-tokens", itoa(tt.want[1])}
			if !reflect.DeepEqual(f.VLLM(), wantV) || !reflect.DeepEqual(f.SGLang(), []string{"--max-queued-requests", itoa(tt.want[2])}) {
				t.Errorf("flags %v, %v", f.VLLM(), f.SGLang())
			}
		})
	}
}

// TestEngineCapsBounds: every cap is at least 1, also where the knee leaves no time to
// queue or the measurement is degenerate, and none overflows.
func TestEngineCapsBounds(t *testing.T) {
	slo := measure.SLO{TTFT: measure.Duration(time.Second)}
	for _, p := range []Point{
		{Throughput: 0.01, MeanE2E: time.Millisecond, TTFTp95: 3 * time.Second}, // TTFT over the SLO: no room to queue
		{Throughput: math.NaN(), MeanE2E: 0},
		{Throughput: 1e300, MeanE2E: time.Hour},
	} {
		f := Result{Tiers: []TierResult{{Tier: "t", Shape: synth.Shape{Input: 1 << 20}, SLO: slo, KneeRate: 1e300, Points: []Point{p}}}}.EngineCaps()
		for i, v := range []int{f.MaxNumQueuedReqs, f.MaxNumQueuedTokens, f.MaxQueuedRequests} {
			if v < 1 || v > math.MaxInt32 {
				t.Errorf("%+v: flag %d is %d", p, i, v)
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestLongPrefillThreshold: the flag is advised at the shortest tier's bound once a
// tier's prompts are four times that, and not for tiers of similar lengths or without a
// knee.
func TestLongPrefillThreshold(t *testing.T) {
	tier := func(name string, bound, in int, knee int) TierResult {
		lim := &admission.TierConfig{Name: name, MaxInputTokens: bound}
		if knee < 0 {
			lim = nil
		}
		return TierResult{Tier: name, Shape: synth.Shape{Input: in, Output: 128}, Knee: knee, Limits: lim}
	}
	mix := []TierResult{tier("short", 2048, 2048, 0), tier("medium", 8192, 4096, 0), tier("xlong", 0, 98304, 0)}
	tests := []struct {
		name  string
		tiers []TierResult
		want  int
	}{
		{"the seven-shape mix", mix, 2048},
		{"one tier", []TierResult{tier("8k", 10923, 8192, 0)}, 0},
		{"similar lengths", []TierResult{tier("8k", 8192, 6144, 0), tier("16k", 0, 16384, 0)}, 0},
		{"the long tier without a knee", []TierResult{mix[0], tier("xlong", 0, 98304, -1)}, 0},
		{"an unbounded shortest tier takes its shape", []TierResult{tier("all", 0, 1024, 0), tier("xlong", 0, 8192, 0)}, 1024},
	}
	for _, tt := range tests {
		n, why := Result{Tiers: tt.tiers}.LongPrefillThreshold()
		if n != tt.want || (n == 0) != (why == "") {
			t.Errorf("%s: %d (%q), want %d", tt.name, n, why, tt.want)
		}
	}
}
