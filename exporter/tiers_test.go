package exporter

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// TestLatencyIncludesQueueWait checks in the exposition where a queued request's TTFT
// and E2E land: a 1 s wait plus a 0.5 s TTFT is a 1.5 s TTFT, above the 1 s bucket and
// inside the 2 s SLO bucket; plus a 0.6 s E2E it is 1.6 s, between 1.5 and 2.
func TestLatencyIncludesQueueWait(t *testing.T) {
	m, reg := newMetrics(t, Options{ServedModels: served("llama"), TTFT: 2 * time.Second})
	m.Observe(wire.Request{Model: "llama", Stream: true}, measure.Result{Stream: true, Status: 200, Outcome: measure.OK,
		TTFT: 500 * time.Millisecond, E2E: 600 * time.Millisecond, OutputChunks: 1, Tier: "short", QueueWait: time.Second})
	fams := scrapeText(t, reg)
	tests := []struct {
		family string
		le     string
		want   uint64 // cumulative count
	}{
		{"slogate_time_to_first_token_seconds", "1", 0},
		{"slogate_time_to_first_token_seconds", "2", 1},
		{"slogate_e2e_request_duration_seconds", "1.5", 0},
		{"slogate_e2e_request_duration_seconds", "2", 1},
		{"slogate_queue_wait_seconds", "0.5", 0},
		{"slogate_queue_wait_seconds", "1", 1},
	}
	for _, tc := range tests {
		t.Run(tc.family+"/le="+tc.le, func(t *testing.T) {
			got, ok := bucketCount(fams[tc.family], "short", tc.le)
			if !ok {
				t.Fatalf("no tier=short bucket le=%s", tc.le)
			}
			if got != tc.want {
				t.Errorf("cumulative count %d, want %d", got, tc.want)
			}
		})
	}
}

// bucketCount returns the cumulative count at le of f's series of tier.
func bucketCount(f *dto.MetricFamily, tier, le string) (uint64, bool) {
	for _, m := range f.GetMetric() {
		if !strings.Contains(labelString(m), `tier="`+tier+`"`) {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			if strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64) == le {
				return b.GetCumulativeCount(), true
			}
		}
	}
	return 0, false
}

func TestTierLabelBounded(t *testing.T) {
	m, reg := newMetrics(t, Options{ServedModels: served("llama")})
	res := measure.Result{Route: wire.RouteCompletions, Status: 200, Outcome: measure.OK, E2E: time.Second}
	const tiers = MaxTierLabels + 8
	res.Tier = OtherTier // a tier named "other" is OtherTier: it takes none of the MaxTierLabels
	m.Observe(wire.Request{Route: wire.RouteCompletions, Model: "llama"}, res)
	for i := range tiers {
		res.Tier = fmt.Sprintf("tier-%d", i)
		for range 2 {
			m.Observe(wire.Request{Route: wire.RouteCompletions, Model: "llama"}, res)
		}
	}
	got := samples(t, reg, "slogate_requests_total")
	if len(got) != MaxTierLabels+1 {
		t.Errorf("%d request series, want %d", len(got), MaxTierLabels+1)
	}
	for k, want := range map[string]float64{
		`slogate_requests_total{code="200",model="llama",outcome="ok",route="completions",tier="tier-0"}`:  2,
		`slogate_requests_total{code="200",model="llama",outcome="ok",route="completions",tier="tier-31"}`: 2,
		`slogate_requests_total{code="200",model="llama",outcome="ok",route="completions",tier="other"}`:   17,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "slogate_queue_wait_seconds"); err != nil || n != MaxTierLabels+1 {
		t.Errorf("slogate_queue_wait_seconds: %d series (err %v), want %d", n, err, MaxTierLabels+1)
	}
	if got := m.tiers.lookup("tier-99").name; got != OtherTier {
		t.Errorf("tier past the limit labelled %q, want %q", got, OtherTier)
	}
}
