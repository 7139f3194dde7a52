package sidecar

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/history"
	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/report"
)

// slowableEngine serves the tiny simulator (5 ms a token) and returns its URL and a
// switch: while it is on, every request the engine serves waits 60 ms before its first
// byte (the simulator's delay fault), as an engine that became slower would.
func slowableEngine(t *testing.T) (string, *atomic.Bool) {
	t.Helper()
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	p.Timing = enginesim.Timing{StepBase: 0.005}
	var slow atomic.Bool
	up := simtest.WrappedEngine(t, enginesim.Config{Profile: p}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow.Load() && r.Method == http.MethodPost {
				r.Header.Set(enginesim.FaultHeader, "delay=60ms")
			}
			h.ServeHTTP(w, r)
		})
	})
	return up.URL, &slow
}

// TestProbeHistoryRegression: two scheduled probes, the second against a slower engine,
// are stored in --probe-history-dir; the second's TTFT regression is exported as
// slogate_probe_regression 1 and listed by GET /probe/history. A sidecar started again on
// the same directory keeps the history, the regression and the last report.
func TestProbeHistoryRegression(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(file, []byte(simtest.ProbeWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	url, slow := slowableEngine(t)
	cfg := testConfig(url)
	cfg.ProbeWorkload, cfg.ProbeInterval, cfg.ProbeHistoryDir = file, 0, dir
	ts := runTestSidecar(t, cfg, Options{})

	// The first run has nothing to be compared with.
	trigger(t, ts.admin)
	waitFor(t, "the first probe", func() bool { return ts.sc.prober.Status().Runs == 1 })
	if m := simtest.Get(t, ts.admin+"/metrics"); strings.Contains(m, "slogate_probe_regression{") {
		t.Errorf("a regression after the first run:\n%s", grepLines(m, "slogate_probe_regression"))
	}

	slow.Store(true)
	trigger(t, ts.admin)
	waitFor(t, "the second probe", func() bool { return ts.sc.prober.Status().Runs == 2 })
	regressed := []string{
		`slogate_probe_regression{figure="ttft_p95_s",load="1",row="S",workload="tiny-shapes"} 1`,
		`slogate_probe_regression{figure="ttft_p95_s",load="2",row="S",workload="tiny-shapes"} 1`,
	}
	metrics := simtest.Get(t, ts.admin+"/metrics")
	for _, want := range regressed {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "slogate_probe_regression"))
		}
	}
	if n := strings.Count(metrics, "\nslogate_probe_regression{"); n != 6 {
		t.Errorf("%d slogate_probe_regression series, want 2 cells × 3 figures", n)
	}
	runs := storedRuns(t, ts.admin)
	if len(runs) != 2 || runs[0].Previous != runs[1].ID || len(runs[0].Regressions()) < 2 {
		t.Fatalf("GET /probe/history: %+v", runs)
	}
	old := simtest.Get(t, ts.admin+"/probe/history/"+runs[1].ID+"/report.json")
	if rep, err := report.ReadJSON(strings.NewReader(old)); err != nil || !rep.Started.Equal(runs[1].Started) || len(rep.Cells) != 2 {
		t.Errorf("the first run's stored report: %v", err)
	}
	if code := simtest.Status(ts.admin + "/probe/history/..%2F..%2Fetc%2Fpasswd/report.json"); code != http.StatusNotFound {
		t.Errorf("a run id outside the history: %d, want 404", code)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 2 {
		t.Errorf("%d files in the history directory, want 2", len(files))
	}

	// Restart: the same directory, a new sidecar that has not probed.
	ts.stop()
	if err := <-ts.done; err != nil {
		t.Fatal(err)
	}
	ts.done <- nil // for the cleanup
	again := runTestSidecar(t, cfg, Options{})
	if got := storedRuns(t, again.admin); len(got) != 2 || got[0].ID != runs[0].ID || len(got[0].Regressions()) != len(runs[0].Regressions()) {
		t.Errorf("after the restart, GET /probe/history: %+v", got)
	}
	metrics = simtest.Get(t, again.admin+"/metrics")
	for _, want := range append(regressed, `slogate_probe_runs_total{workload="tiny-shapes"} 0`,
		`slogate_probe_cell_state{load="1",row="S",state="valid",workload="tiny-shapes"} 1`) {
		if !strings.Contains(metrics, want) {
			t.Errorf("after the restart, /metrics lacks %s", want)
		}
	}
	latest := simtest.Get(t, again.admin+"/probe/report.json")
	if rep, err := report.ReadJSON(strings.NewReader(latest)); err != nil || !rep.Started.Equal(runs[0].Started) {
		t.Errorf("after the restart, /probe/report.json is not the last stored run: %v", err)
	}
	page := simtest.Get(t, again.admin+"/")
	if strings.Count(page, "data-run=") != 2 || !strings.Contains(page, `class="regressed"`) {
		t.Errorf("the status page does not list the two stored runs with the regression marked")
	}
}

// storedRuns returns GET /probe/history's runs.
func storedRuns(t *testing.T, admin string) []history.Run {
	t.Helper()
	var body struct{ Runs []history.Run }
	if err := json.Unmarshal([]byte(simtest.Get(t, admin+"/probe/history")), &body); err != nil {
		t.Fatal(err)
	}
	return body.Runs
}

// TestProbeHistorySettings: bad history settings stop the sidecar at start, naming the
// flag; a history directory that cannot be made does too.
func TestProbeHistorySettings(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*Config)
	}{
		{"one run", "--probe-history-runs", func(c *Config) { c.ProbeHistoryRuns = 1 }},
		{"no bytes", "--probe-history-bytes", func(c *Config) { c.ProbeHistoryBytes = 0 }},
		{"a file for a directory", "--probe-history-dir", func(c *Config) { c.ProbeHistoryDir = filepath.Join(blocker, "history") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("http://127.0.0.1:1")
			tc.edit(&cfg)
			if sc, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				if sc != nil {
					sc.Close()
				}
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
