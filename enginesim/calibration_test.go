package enginesim

import (
	"testing"
	"time"
)

// The calibration tests hold each profile to the published figures it is fitted to
// (docs/simulator.md, "Published figures"). They run the scheduler in virtual time, so
// they are exact and fast.

// TestH200PrefillMatchesPublished checks single-request TTFT against the prefill column
// of the H200 context matrix (SGLang, one H200 NVL): within ±15% at every measured
// context.
func TestH200PrefillMatchesPublished(t *testing.T) {
	p := mustProfile(t, "h200-9b")
	cases := []struct {
		name    string
		context int
		ttft    time.Duration // published
	}{
		{"8K", 8192, 524 * time.Millisecond},
		{"16K", 16384, 1053 * time.Millisecond},
		{"32K", 32768, 1565 * time.Millisecond},
		{"64K", 65536, 2604 * time.Millisecond},
		{"128K", 131072, 5741 * time.Millisecond},
		{"251K", 257024, 14932 * time.Millisecond},
		{"256K", 262144 - 16, 14968 * time.Millisecond}, // leave room for the output tokens
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := openLoop(p, tc.context, 16, []time.Duration{0})
			if len(fs) != 1 || fs[0].Reason != "length" {
				t.Fatalf("request did not finish: %+v", fs)
			}
			got := fs[0].TTFT
			if ratio := got.Seconds() / tc.ttft.Seconds(); ratio < 0.85 || ratio > 1.15 {
				t.Errorf("TTFT at %s = %v, published %v (ratio %.3f, want 0.85..1.15)", tc.name, got, tc.ttft, ratio)
			}
		})
	}
}

// TestH200CapacityMatchesPublished checks the KV cache against the decode matrix: every
// cell the matrix ran fits, every cell it marked over capacity does not, counting each
// stream as context + 4096 output tokens.
func TestH200CapacityMatchesPublished(t *testing.T) {
	p := mustProfile(t, "h200-9b")
	overFrom := map[int]int{8192: 0, 16384: 128, 32768: 64, 65536: 32, 131072: 16, 257024: 8}
	for ctx, first := range overFrom {
		for _, c := range []int{1, 2, 4, 8, 16, 32, 64, 128} {
			fits := c*(ctx+4096) <= p.KVCapacity()
			over := first != 0 && c >= first
			if fits == over {
				t.Errorf("context %d x %d streams: fits=%v, published over capacity=%v (capacity %d tokens)", ctx, c, fits, over, p.KVCapacity())
			}
		}
	}
}

// TestH200OverCapacityPreempts runs one run cell and one over-capacity cell of the matrix
// to completion: the first never preempts, the second must, as a real engine would.
func TestH200OverCapacityPreempts(t *testing.T) {
	p := mustProfile(t, "h200-9b")
	cases := []struct {
		name           string
		context, conc  int
		wantPreemption bool
	}{
		{"8K x 128 fits", 8192, 128, false},
		{"64K x 32 over capacity", 65536, 32, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			offsets := make([]time.Duration, tc.conc)
			fs, _ := openLoop(p, tc.context, 4096, offsets)
			preempted := 0
			for _, f := range fs {
				preempted += f.Preemptions
				if f.OutputTokens != 4096 {
					t.Fatalf("a request ended with %d tokens, want 4096", f.OutputTokens)
				}
			}
			if (preempted > 0) != tc.wantPreemption {
				t.Errorf("preemptions = %d, want any: %v", preempted, tc.wantPreemption)
			}
		})
	}
}

// TestH20KneeMatchesPublished checks the H20-3e arrival-rate scan (SGLang, eight H20-3e,
// 8K input / 128 output): closed-loop throughput at 32 concurrent is about 1.75 req/s;
// over a three-minute run at 0.8x that rate p95 TTFT stays in single seconds, and at 1.1x
// it climbs past 20 s, for both constant and Poisson arrivals.
func TestH20KneeMatchesPublished(t *testing.T) {
	p := mustProfile(t, "h20x8-flash")
	const calibrated = 1.7499 // req/s, the scan's published calibration point
	rate, _ := closedLoop(p, 8192, 128, 32, 10*time.Minute)
	if rate < 0.95*calibrated || rate > 1.05*calibrated {
		t.Errorf("closed-loop throughput at 32 concurrent = %.3f req/s, published %.4f (want within 5%%)", rate, calibrated)
	}
	cases := []struct {
		name     string
		multiple float64
		poisson  bool
		minP95   time.Duration
		maxP95   time.Duration
	}{
		{"0.8x constant", 0.8, false, 0, 10 * time.Second},
		{"0.8x poisson", 0.8, true, 0, 10 * time.Second},
		{"1.1x constant", 1.1, false, 20 * time.Second, time.Hour},
		{"1.1x poisson", 1.1, true, 20 * time.Second, time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			offsets := constantArrivals(calibrated*tc.multiple, 3*time.Minute)
			if tc.poisson {
				offsets = poissonArrivals(calibrated*tc.multiple, 3*time.Minute, 7)
			}
			fs, _ := openLoop(p, 8192, 128, offsets)
			if len(fs) != len(offsets) {
				t.Fatalf("%d of %d requests finished", len(fs), len(offsets))
			}
			p95 := time.Duration(quantile(ttfts(fs), 0.95) * float64(time.Second))
			if p95 < tc.minP95 || p95 > tc.maxP95 {
				t.Errorf("p95 TTFT = %v, want in [%v, %v]", p95, tc.minP95, tc.maxP95)
			}
		})
	}
}

func mustProfile(t *testing.T, name string) Profile {
	t.Helper()
	p, err := LookupProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
