package exporter

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// served returns a ServedModels function for a fixed list.
func served(names ...string) func() []string {
	return func() []string { return names }
}

// newMetrics returns Metrics on a fresh registry.
func newMetrics(t testing.TB, opts Options) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return New(reg, opts), reg
}

// samples gathers g and returns every sample of the families whose name has prefix,
// keyed by `name{k="v",...}` (labels sorted). Counters and gauges give their value;
// histograms give name_count and name_sum.
func samples(t testing.TB, g prometheus.Gatherer, prefix string) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			ls := labelString(m)
			switch {
			case m.Histogram != nil:
				out[f.GetName()+"_count"+ls] = float64(m.Histogram.GetSampleCount())
				out[f.GetName()+"_sum"+ls] = m.Histogram.GetSampleSum()
			case m.Counter != nil:
				out[f.GetName()+ls] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[f.GetName()+ls] = m.Gauge.GetValue()
			}
		}
	}
	return out
}

// checkLint fails t with every problem the Prometheus linter finds in what g gathers.
func checkLint(t testing.TB, g prometheus.Gatherer) {
	t.Helper()
	problems, err := testutil.GatherAndLint(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// diffSamples reports the keys of want whose value in got differs (within 1e-9).
func diffSamples(got, want map[string]float64) []string {
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %v", k, w))
			continue
		}
		if d := g - w; d > 1e-9 || d < -1e-9 {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, g, w))
		}
	}
	slices.Sort(diffs)
	return diffs
}
