package sidecar

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/measure"
)

// TestStatusCapacity: the status page shows each tier's λ* from the calibration the
// tiers file records, says which tier has none, and counts live requests as load offered
// to their tier.
func TestStatusCapacity(t *testing.T) {
	base, err := admission.ParseConfig([]byte("tiers:\n  - name: short\n    max_input_tokens: 2048\n    max_in_flight: 64\n    max_queue: 16\n  - name: long\n    max_in_flight: 8\n    max_queue: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	res := calibrate.Result{Started: time.Unix(1700000000, 0).UTC(), Finished: time.Unix(1700000600, 0).UTC(), Target: "http://engine:8000", Model: "m",
		Tiers: []calibrate.TierResult{
			{Tier: "short", SLO: measure.NewSLO(2*time.Second, 100*time.Millisecond), Points: []calibrate.Point{{Offered: 12.5, Throughput: 12.5, Completion: 1}},
				Knee: 0, KneeRate: 12.5, Rule: "only point"},
			{Tier: "long", Knee: -1, Err: "no measured rate was sustainable"},
		}}
	cfg, err := res.Config(base)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := calibrate.WriteConfig(&text, cfg, res); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tiers.yaml")
	if err := os.WriteFile(file, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startTestSidecarWith(t, func(c *Config) { c.TiersFile = file })
	if done, err := simtest.Rest(simtest.OpenStream(t, ts.data, 4)); !done || err != nil {
		t.Fatalf("a stream through the sidecar: done %v, %v", done, err)
	}

	page := simtest.Get(t, ts.admin+"/")
	// field returns a cell of the capacity table, whose rows start with the load offered.
	field := func(tier, name string) string {
		t.Helper()
		row := regexp.MustCompile(`<tr data-tier="` + tier + `"><th>[^<]*</th><td class="num" data-field="offered">.*?</tr>`).FindString(page)
		m := regexp.MustCompile(`data-field="` + name + `">([^<]*)<`).FindStringSubmatch(row)
		if m == nil {
			t.Fatalf("the capacity table has no %s of tier %s", name, tier)
		}
		return m[1]
	}
	if got := field("short", "knee"); got != "12.5" {
		t.Errorf("short's λ* on the page is %q, want the calibration's 12.5", got)
	}
	if got := field("long", "knee"); got != "unknown" {
		t.Errorf("long's λ* on the page is %q, want unknown", got)
	}
	if !strings.Contains(page, `id="capacity-unknown"`) || !strings.Contains(page, `<span data-field="tiers">long</span>`) {
		t.Error("the page does not say that long has no λ*")
	}
	if offered, err := strconv.ParseFloat(field("short", "offered"), 64); err != nil || offered <= 0 {
		t.Errorf("short's load offered %q after a request, want a rate above 0 (%v)", field("short", "offered"), err)
	}

	// /metrics carries the same: λ* of short, the demand on it (one request in the last
	// minute: 1/60 req/s against 12.5), nothing of the kind for long; and the stream,
	// judged against short's SLO.
	metrics := simtest.Get(t, ts.admin+"/metrics")
	sample := func(series string) (float64, bool) {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(metrics)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`slogate_admission_sustainable_rate{tier="short"}`, 12.5},
		{`slogate_admission_offered_rate{tier="short"}`, 1.0 / 60},
		{`slogate_admission_demand_ratio{tier="short"}`, 1.0 / 60 / 12.5},
		{`slogate_admission_offered_rate{tier="long"}`, 0},
		{`slogate_slo_judged_requests_total{tier="short"}`, 1},
		{`slogate_slo_judged_requests_total{tier="long"}`, 0},
	} {
		if v, ok := sample(c.series); !ok || math.Abs(v-c.want) > 1e-9 {
			t.Errorf("%s = %v (exported %v), want %v", c.series, v, ok, c.want)
		}
	}
	for _, series := range []string{`slogate_admission_sustainable_rate{tier="long"}`, `slogate_admission_demand_ratio{tier="long"}`} {
		if _, ok := sample(series); ok {
			t.Errorf("%s is exported for a tier without λ*", series)
		}
	}
}
