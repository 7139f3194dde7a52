package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// The end-to-end test of the dashboards and the rules against a real Prometheus, the
// Debian package's, which `make test` installs. Two demos and a slogate serve are scraped
// every second with the target labels a Kubernetes PodMonitor adds (namespace, pod), and
// alerts/slogate.rules.yml is loaded with an evaluation every second:
//
//   - the healthy demo impersonates vLLM and runs the demo's load, probe and
//     calibrations; the test asks for a second calibration, the first one with a knee to
//     compare against;
//   - the breach demo impersonates SGLang (the only engine reporting retracted
//     requests) and serves only the alert test's requests;
//   - the tenants target is slogate serve in enforce mode with the tenants section of
//     testdata/tenants.yaml, in front of a simulator, with clients of three tenants, one
//     of which is over its budget all along.
//
// Every query of every dashboard panel must return data, every recording rule a series,
// and every metric a dashboard names must exist. The alert test sends the breach demo
// healthy requests, checks that the TTFT burn-rate page is not pending, then makes the
// simulator wait past the TTFT SLO before every answer and waits for the page to go
// pending. The tenant alert test waits for SlogateTenantThrottled to go pending for the
// tenant over its budget, and only for it.

const (
	prometheusBin  = "/usr/bin/prometheus"
	rulesFile      = "../../alerts/slogate.rules.yml"
	dashboardsGlob = "../../dashboards/json/*.json"
	tenantsFile    = "testdata/tenants.yaml"
	// rateInterval stands for Grafana's $__rate_interval: fifteen scrapes.
	rateInterval = "15s"
)

// promTarget is a demo Prometheus scrapes, with its target labels.
type promTarget struct {
	data, admin    string // host:port of its listeners
	namespace, pod string
}

// e2e is a Prometheus scraping two demos and a slogate serve with tenants.
type e2e struct {
	prom    string     // Prometheus's base URL
	healthy promTarget // load, probes, calibrations
	breach  promTarget // the alert test's
	tenants promTarget // tenants, one of them throttled
}

func TestPrometheusEndToEnd(t *testing.T) {
	if _, err := os.Stat(prometheusBin); err != nil {
		t.Fatalf("%s is missing; it is the Debian package prometheus, which make test installs: %v", prometheusBin, err)
	}
	p, _ := enginesim.LookupProfile("tiny")
	engine := simtest.Engine(t, enginesim.Config{Profile: p})
	e := &e2e{
		healthy: startSlogate(t, "slogate-demo", "demo-vllm-0", "demo", "--load"),
		breach:  startSlogate(t, "slogate-breach", "demo-sglang-0", "demo", "--flavor", "sglang", "--probe=false", "--calibrate=false"),
		tenants: startSlogate(t, "slogate-tenants", "serve-0", "serve", "--upstream", engine.URL, "--tiers-file", tenantsFile,
			"--admission", "enforce", "--dcgm", "off", "--log-format", "text"),
	}
	tenantLoad(t, e.tenants)
	e.prom = startPrometheus(t, e.healthy, e.breach, e.tenants)
	t.Run("TTFTBurnAlert", func(t *testing.T) { t.Parallel(); e.checkBurnAlert(t) })
	t.Run("TenantThrottledAlert", func(t *testing.T) { t.Parallel(); e.checkTenantAlert(t) })
	t.Run("Dashboards", func(t *testing.T) { t.Parallel(); e.checkDashboards(t) })
}

// startSlogate runs a slogate command (demo or serve) on free loopback ports until the
// test ends; when the test fails, it logs what the command's schedules did.
func startSlogate(t *testing.T, namespace, pod, command string, args ...string) promTarget {
	t.Helper()
	d := promTarget{data: simtest.FreeAddr(t), admin: simtest.FreeAddr(t), namespace: namespace, pod: pod}
	ctx, cancel := context.WithCancel(context.Background())
	out := &simtest.Buffer{}
	done := make(chan int, 1)
	args = append([]string{command, "--listen", d.data, "--admin-listen", d.admin, "--log-level", "info"}, args...)
	go func() { done <- run(ctx, args, out, out) }()
	t.Cleanup(func() {
		cancel()
		code := <-done
		if code != 0 || t.Failed() {
			var lines []string
			for l := range strings.Lines(out.String()) {
				if !strings.Contains(l, "msg=request") {
					lines = append(lines, l)
				}
			}
			t.Logf("%s %s exited %d:\n%s", command, pod, code, strings.Join(lines, ""))
		}
		if code != 0 {
			t.Errorf("%s %s exited %d", command, pod, code)
		}
	})
	awaitProm(t, command+" "+pod+" to be ready", 30*time.Second, func() (bool, error) {
		return simtest.Status("http://"+d.admin+"/readyz") == http.StatusOK, nil
	})
	return d
}

// startPrometheus runs Prometheus on a free loopback port until the test ends, scraping
// the targets and evaluating the repository's rules every second.
func startPrometheus(t *testing.T, targets ...promTarget) string {
	t.Helper()
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"+
		"rule_files: [%q]\nscrape_configs:\n  - job_name: slogate\n    static_configs:\n", rules)
	for _, tg := range targets {
		fmt.Fprintf(&cfg, "      - targets: [%q]\n        labels: {namespace: %q, pod: %q}\n", tg.admin, tg.namespace, tg.pod)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := simtest.FreeAddr(t)
	log := &simtest.Buffer{}
	cmd := exec.Command(prometheusBin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	base := "http://" + addr
	awaitProm(t, "Prometheus to be ready", 30*time.Second, func() (bool, error) {
		if simtest.Status(base+"/-/ready") == http.StatusOK {
			return true, nil
		}
		return false, fmt.Errorf("log:\n%s", log.String())
	})
	return base
}

// checkDashboards waits for the probe and two calibrations, then runs every dashboard
// query, every recording rule and the metric-name check.
func (e *e2e) checkDashboards(t *testing.T) {
	e.awaitExercise(t)
	queries, err := dashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	records := recordNames(t)
	var failures []string
	for _, q := range queries {
		samples, err := promQuery(e.prom, q.expr)
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s: %v\n      %s", q, err, q.expr))
		case !slices.ContainsFunc(samples, func(s promSample) bool { return !math.IsNaN(s.value()) }):
			failures = append(failures, fmt.Sprintf("%s: no data (%d samples, all NaN)\n      %s", q, len(samples), q.expr))
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d dashboard queries returned no data:\n  %s", len(failures), len(queries), strings.Join(failures, "\n  "))
	}
	for _, r := range records {
		if samples, err := promQuery(e.prom, r); err != nil || len(samples) == 0 {
			t.Errorf("recording rule %s produced no series (%v)", r, err)
		}
	}
	e.checkMetricNames(t, queries, records)
	if alerts, err := burnAlerts(e.prom, e.healthy.namespace); err != nil || len(alerts) > 0 {
		t.Errorf("the healthy demo's TTFT burn alerts: %+v (%v), want none", alerts, err)
	}
}

// awaitExercise waits until Prometheus has the healthy demo's probe results and two
// calibrations, the second of which reports the knee change from the first.
func (e *e2e) awaitExercise(t *testing.T) {
	start := time.Now()
	awaitProm(t, "the demo's probe results", time.Minute, func() (bool, error) {
		s, err := promQuery(e.prom, "slogate_probe_cell_state")
		return len(s) > 0, err
	})
	t.Logf("probe results after %s", time.Since(start).Round(time.Second))
	for n := 1; n <= 2; n++ {
		e.calibrated(t, n)
		t.Logf("calibration %d after %s", n, time.Since(start).Round(time.Second))
	}
	awaitProm(t, "the knee change of the second calibration", 10*time.Second, func() (bool, error) {
		s, err := promQuery(e.prom, "slogate_calibration_knee_change_ratio")
		return len(s) > 0, err
	})
	e.probedAgain(t)
	t.Logf("second probe compared after %s", time.Since(start).Round(time.Second))
}

// probedAgain asks the healthy demo for a second probe (POST /-/probe, again while the
// arbiter holds it back) and waits until its history has compared it with the first:
// slogate_probe_regression has a series per compared cell and figure.
func (e *e2e) probedAgain(t *testing.T) {
	var asked time.Time
	awaitProm(t, "the second probe's comparison", 2*time.Minute, func() (bool, error) {
		s, err := promQuery(e.prom, fmt.Sprintf("slogate_probe_regression{namespace=%q}", e.healthy.namespace))
		if err != nil || len(s) > 0 {
			return len(s) > 0, err
		}
		if time.Since(asked) > 5*time.Second {
			asked = time.Now()
			simtest.Post(t, "http://"+e.healthy.admin+"/-/probe") // 409 while one runs or is about to
		}
		return false, errors.New("no slogate_probe_regression series yet")
	})
}

// calibrated waits until the healthy demo has completed n calibrations, asking for one
// (POST /-/calibrate) whenever none runs: the demo asks for the first itself, and a
// calibration held back by live traffic would otherwise wait a minute to try again.
func (e *e2e) calibrated(t *testing.T, n int) {
	var asked time.Time
	value := func(expr string) (float64, error) {
		s, err := promQuery(e.prom, fmt.Sprintf("max(%s{namespace=%q})", expr, e.healthy.namespace))
		if err != nil || len(s) == 0 {
			return math.NaN(), err
		}
		return s[0].value(), nil
	}
	awaitProm(t, fmt.Sprintf("calibration %d", n), 2*time.Minute, func() (bool, error) {
		runs, err := value("slogate_calibration_runs_total")
		if err != nil || runs >= float64(n) {
			return runs >= float64(n), err
		}
		if running, err := value("slogate_calibration_running"); err == nil && running == 0 && time.Since(asked) > 2*time.Second {
			asked = time.Now()
			simtest.Post(t, "http://"+e.healthy.admin+"/-/calibrate") // 409 while one is about to run
		}
		return false, fmt.Errorf("%v calibrations completed", runs)
	})
}

// checkMetricNames checks that every metric a dashboard query names exists in
// Prometheus, recording rules aside.
func (e *e2e) checkMetricNames(t *testing.T, queries []panelQuery, records []string) {
	var names []string
	if err := promGet(e.prom+"/api/v1/label/__name__/values", &names); err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		for _, n := range metricNames(q.expr) {
			if !slices.Contains(names, n) && !slices.Contains(records, n) {
				t.Errorf("%s names %s, which slogate does not export", q, n)
			}
		}
	}
}

// checkBurnAlert drives the breach demo's simulator past the TTFT SLO and waits for the
// TTFT burn-rate page to go pending, after checking that it is not while the SLI is 0.
func (e *e2e) checkBurnAlert(t *testing.T) {
	base := "http://" + e.breach.data
	sli := fmt.Sprintf("slogate:ttft_bad:ratio_rate5m{namespace=%q}", e.breach.namespace)
	awaitProm(t, "a TTFT SLI of 0 for healthy requests", time.Minute, func() (bool, error) {
		if err := complete(context.Background(), base, nil); err != nil {
			t.Fatalf("a healthy request: %v", err)
		}
		s, err := promQuery(e.prom, sli)
		return slices.ContainsFunc(s, func(s promSample) bool { return s.value() == 0 }), err
	})
	seen := time.Now()
	awaitProm(t, "the alerts' evaluation after it", time.Minute, func() (bool, error) {
		last, err := groupEvaluated(e.prom, "slogate.slo.alerts")
		return last.After(seen), err
	})
	if alerts, err := burnAlerts(e.prom, e.breach.namespace); err != nil || len(alerts) > 0 {
		t.Fatalf("TTFT burn alerts %+v (%v) before the breach, want none", alerts, err)
	}

	// Every answer now starts after 3 s, past the 2 s SLO.
	slow := http.Header{}
	slow.Set(enginesim.FaultHeader, "delay=3s")
	breach := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if complete(ctx, base, slow) != nil {
					select { // the demo is going away: ask again a little later
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		})
	}
	awaitProm(t, "the TTFT burn-rate page to go pending", 90*time.Second, func() (bool, error) {
		alerts, err := burnAlerts(e.prom, e.breach.namespace)
		return slices.ContainsFunc(alerts, func(a promAlert) bool {
			return a.Labels["severity"] == "page" && (a.State == "pending" || a.State == "firing")
		}), err
	})
	t.Logf("the TTFT burn-rate page went pending %s into the breach", time.Since(breach).Round(time.Second))
}

// complete streams a short completion through slogate at base, with header (the
// simulator's fault directives, a tenant), and reads it to the end.
func complete(ctx context.Context, base string, header http.Header) error {
	body := `{"prompt":"is the SLO met?","max_tokens":4,"stream":true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// tenantLoad sends the tenants target streamed completions until the test ends: alpha's
// two clients, one of an identity no tenant matches (other), and beta's, which asks for
// about ten a second against its budget of 60 a minute and so is turned away for it
// (tenant-requests) all along.
func tenantLoad(t *testing.T, tg promTarget) {
	base := "http://" + tg.data
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	for _, c := range []struct {
		tenant string
		pause  time.Duration
	}{{"alpha", 50 * time.Millisecond}, {"alpha", 100 * time.Millisecond}, {"carol", 100 * time.Millisecond}, {"beta", 100 * time.Millisecond}} {
		h := http.Header{}
		h.Set("X-Tenant", c.tenant)
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = complete(ctx, base, h) // beta's 429s too
				select {
				case <-ctx.Done():
				case <-time.After(c.pause):
				}
			}
		})
	}
}

// checkTenantAlert waits for SlogateTenantThrottled to go pending for beta, the tenant
// over its requests budget, and checks that it is for nobody else: alpha and other stay
// within theirs.
func (e *e2e) checkTenantAlert(t *testing.T) {
	expr := fmt.Sprintf(`ALERTS{alertname="SlogateTenantThrottled", namespace=%q}`, e.tenants.namespace)
	awaitProm(t, "SlogateTenantThrottled to go pending for beta", 90*time.Second, func() (bool, error) {
		s, err := promQuery(e.prom, expr+` == 1`)
		return slices.ContainsFunc(s, func(s promSample) bool {
			return s.Metric["tenant"] == "beta" && s.Metric["reason"] == "tenant-requests"
		}), err
	})
	s, err := promQuery(e.prom, expr)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s {
		if a.Metric["tenant"] != "beta" || a.Metric["reason"] != "tenant-requests" {
			t.Errorf("SlogateTenantThrottled %v, want it only for beta and tenant-requests", a.Metric)
		}
	}
}
