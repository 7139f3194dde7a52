package sidecar

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/synth"
)

// TestScheduledProbeBacksOff: the prober inside serve holds back while live traffic
// holds more than its share of the engine, and probes once the traffic is gone; its
// results reach /metrics and the admin report endpoints.
func TestScheduledProbeBacksOff(t *testing.T) {
	file := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(file, []byte(simtest.ProbeWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startTestSidecarWith(t, func(cfg *Config) {
		cfg.ProbeWorkload, cfg.ProbeInterval = file, 0 // probe on request only
		cfg.ProbeMaxLoad = 0.0001                      // ~200 of the tiny engine's 2M KV tokens
	})
	sched := ts.sc.prober

	// Live traffic: a long stream holds more KV than the probe may share.
	live := simtest.OpenStream(t, ts.data, 600) // 3 s of tokens at 5 ms each
	waitFor(t, "the live stream to hold its share", func() bool { busy, _ := ts.sc.liveBusy(true); return busy })
	trigger(t, ts.admin)
	waitFor(t, "the probe to be held back", func() bool { return sched.Status().Held >= 1 })
	if st := sched.Status(); st.Runs != 0 || !strings.Contains(st.LastErr, "live") {
		t.Fatalf("while live traffic is high: %+v, want no run and a held probe", st)
	}

	// The live stream ends: the next probe runs to the end.
	if _, err := simtest.Rest(live); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "live load to drop", func() bool { busy, _ := ts.sc.liveBusy(true); return !busy })
	trigger(t, ts.admin)
	waitFor(t, "the probe to run", func() bool { return sched.Status().Runs == 1 })
	rep, ok := sched.Latest()
	if !ok || len(rep.Cells) != 2 || rep.Cells[0].State != synth.Valid {
		t.Fatalf("latest report: ok=%v cells=%+v", ok, rep.Cells)
	}
	metrics := simtest.Get(t, ts.admin+"/metrics")
	for _, want := range []string{`slogate_probe_runs_total{workload="tiny-shapes"} 1`, `slogate_probe_held_total{workload="tiny-shapes"} 1`,
		`slogate_probe_cell_state{load="1",row="S",state="valid",workload="tiny-shapes"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The live stream is the only request the live metrics count: probes stay out.
	if !strings.Contains(metrics, `slogate_requests_total{code="200",model="sim-tiny",outcome="ok",route="completions",tier="short"} 1`) {
		t.Errorf("live request count is not 1:\n%s", grepLines(metrics, "slogate_requests_total"))
	}
	if html := simtest.Get(t, ts.admin+"/probe/report.html"); !strings.Contains(html, `id="heatmap"`) {
		t.Errorf("the admin listener does not serve the HTML report")
	}
}

func trigger(t *testing.T, admin string) {
	t.Helper()
	resp, err := http.Post(admin+"/-/probe", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /-/probe: %s", resp.Status)
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
