package exporter

import (
	"testing"
	"time"
)

// probeSnapshot is a fixed ProbeSource.
type probeSnapshot ProbeSnapshot

func (p probeSnapshot) Probe() ProbeSnapshot { return ProbeSnapshot(p) }

func TestProbeGauges(t *testing.T) {
	src := probeSnapshot{
		Workload: "context-matrix", Runs: 3, Held: 1, LastStart: time.Unix(1700000000, 0), LastOK: true,
		Cells: []ProbeCell{
			{Row: "8K", Load: "1", State: "valid", Throughput: 150, TTFTp50: 0.5, TTFTp95: 0.6, TPOTp95: 0.007, SuccessRate: 1},
			{Row: "251K", Load: "8", State: "over_capacity"},
		},
		Gate: []ProbeCheck{{Name: "arithmetic", Verdict: "pass"}},
		Compared: []ProbeComparison{
			{Row: "8K", Load: "1", Figure: "output_tok_per_s"},
			{Row: "8K", Load: "1", Figure: "ttft_p95_s", Regressed: true},
		},
	}
	_, reg := newMetrics(t, Options{Probe: src})
	got := samples(t, reg, "slogate_probe_")
	want := map[string]float64{
		`slogate_probe_output_tokens_per_second{load="1",row="8K",workload="context-matrix"}`:             150,
		`slogate_probe_ttft_p95_seconds{load="1",row="8K",workload="context-matrix"}`:                     0.6,
		`slogate_probe_ttft_p50_seconds{load="1",row="8K",workload="context-matrix"}`:                     0.5,
		`slogate_probe_tpot_p95_seconds{load="1",row="8K",workload="context-matrix"}`:                     0.007,
		`slogate_probe_cell_state{load="8",row="251K",state="over_capacity",workload="context-matrix"}`:   1,
		`slogate_probe_cell_state{load="8",row="251K",state="valid",workload="context-matrix"}`:           0,
		`slogate_probe_gate_check{check="arithmetic",verdict="pass",workload="context-matrix"}`:           1,
		`slogate_probe_gate_check{check="arithmetic",verdict="fail",workload="context-matrix"}`:           0,
		`slogate_probe_runs_total{workload="context-matrix"}`:                                             3,
		`slogate_probe_held_total{workload="context-matrix"}`:                                             1,
		`slogate_probe_last_start_timestamp_seconds{workload="context-matrix"}`:                           1700000000,
		`slogate_probe_last_success{workload="context-matrix"}`:                                           1,
		`slogate_probe_running{workload="context-matrix"}`:                                                0,
		`slogate_probe_regression{figure="output_tok_per_s",load="1",row="8K",workload="context-matrix"}`: 0,
		`slogate_probe_regression{figure="ttft_p95_s",load="1",row="8K",workload="context-matrix"}`:       1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got[`slogate_probe_output_tokens_per_second{load="8",row="251K",workload="context-matrix"}`]; ok {
		t.Errorf("a cell that did not run exports a throughput")
	}
	if _, ok := got[`slogate_probe_regression{figure="tpot_p95_s",load="1",row="8K",workload="context-matrix"}`]; ok {
		t.Errorf("a figure that was not compared exports a regression")
	}
	checkLint(t, reg)
}
