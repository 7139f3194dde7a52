package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/enginesim"
)

// The end-to-end test of the dashboards and the rules against a real Prometheus, the
// Debian package's, which `make test` installs. Two demos are scraped every second with
// the target labels a Kubernetes PodMonitor adds (namespace, pod), and
// alerts/slogate.rules.yml is loaded with an evaluation every second:
//
//   - the healthy demo impersonates vLLM and runs the demo's load, probe and
//     calibrations; the test asks for a second calibration, the first one with a knee to
//     compare against;
//   - the breach demo impersonates SGLang (the only engine reporting retracted
//     requests) and serves only the alert test's requests.
//
// Every query of every dashboard panel must return data, every recording rule a series,
// and every metric a dashboard names must exist. The alert test sends the breach demo
// healthy requests, checks that the TTFT burn-rate page is not pending, then makes the
// simulator wait past the TTFT SLO before every answer and waits for the page to go
// pending.

const (
	prometheusBin  = "/usr/bin/prometheus"
	rulesFile      = "../../alerts/slogate.rules.yml"
	dashboardsGlob = "../../dashboards/json/*.json"
	// rateInterval stands for Grafana's $__rate_interval: fifteen scrapes.
	rateInterval = "15s"
)

// promTarget is a demo Prometheus scrapes, with its target labels.
type promTarget struct {
	data, admin    string // host:port of its listeners
	namespace, pod string
}

// e2e is a Prometheus scraping two demos.
type e2e struct {
	prom    string     // Prometheus's base URL
	healthy promTarget // load, probes, calibrations
	breach  promTarget // the alert test's
}

func TestPrometheusEndToEnd(t *testing.T) {
	if _, err := os.Stat(prometheusBin); err != nil {
		t.Fatalf("%s is missing; it is the Debian package prometheus, which make test installs: %v", prometheusBin, err)
	}
	e := &e2e{
		healthy: startDemo(t, "slogate-demo", "demo-vllm-0", "--load"),
		breach:  startDemo(t, "slogate-breach", "demo-sglang-0", "--flavor", "sglang", "--probe=false", "--calibrate=false"),
	}
	e.prom = startPrometheus(t, e.healthy, e.breach)
	t.Run("TTFTBurnAlert", func(t *testing.T) { t.Parallel(); e.checkBurnAlert(t) })
	t.Run("Dashboards", func(t *testing.T) { t.Parallel(); e.checkDashboards(t) })
}

// startDemo runs slogate demo on free loopback ports until the test ends; when the
// test fails, it logs what the demo's schedules did.
func startDemo(t *testing.T, namespace, pod string, args ...string) promTarget {
	t.Helper()
	d := promTarget{data: freeAddr(t), admin: freeAddr(t), namespace: namespace, pod: pod}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan int, 1)
	args = append([]string{"demo", "--listen", d.data, "--admin-listen", d.admin, "--log-level", "info"}, args...)
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
			t.Logf("demo %s exited %d:\n%s", pod, code, strings.Join(lines, ""))
		}
		if code != 0 {
			t.Errorf("demo %s exited %d", pod, code)
		}
	})
	awaitProm(t, "demo "+pod+" to be ready", 30*time.Second, func() (bool, error) {
		return status("http://"+d.admin+"/readyz") == http.StatusOK, nil
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
	addr := freeAddr(t)
	log := &syncBuffer{}
	cmd := exec.Command(prometheusBin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	base := "http://" + addr
	awaitProm(t, "Prometheus to be ready", 30*time.Second, func() (bool, error) {
		if status(base+"/-/ready") == http.StatusOK {
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
			post(t, "http://"+e.healthy.admin+"/-/calibrate") // 409 while one is about to run
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
		if err := complete(context.Background(), base, ""); err != nil {
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
	breach := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if complete(ctx, base, "delay=3s") != nil {
					time.Sleep(100 * time.Millisecond) // the demo is going away
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

// complete streams a short completion through slogate at base, with the simulator's
// fault directives, and reads it to the end.
func complete(ctx context.Context, base, faults string) error {
	body := `{"prompt":"is the SLO met?","max_tokens":4,"stream":true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	if faults != "" {
		req.Header.Set(enginesim.FaultHeader, faults)
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

// panelQuery is one query of a dashboard panel, with its variables substituted.
type panelQuery struct{ dashboard, panel, expr string }

func (q panelQuery) String() string { return q.dashboard + " / " + q.panel }

// grafanaVariable matches a use of a Grafana variable: $name, ${name} or [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]`)

// dashboardQueries returns the query of every panel target of every dashboard, walking
// the JSON generically (rows nest panels), with each variable at its "All" value or its
// current one, and $__rate_interval at rateInterval.
func dashboardQueries() ([]panelQuery, error) {
	files, err := filepath.Glob(dashboardsGlob)
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dashboards at %s (%v)", dashboardsGlob, err)
	}
	var out []panelQuery
	for _, f := range files {
		var dash map[string]any
		raw, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(raw, &dash)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		values := templateValues(dash)
		var walk func(v any, title string) error
		walk = func(v any, title string) error {
			switch v := v.(type) {
			case map[string]any:
				if s, ok := v["title"].(string); ok {
					title = s
				}
				targets, _ := v["targets"].([]any)
				for _, tg := range targets {
					if expr, ok := tg.(map[string]any)["expr"].(string); ok {
						q, err := substitute(expr, values)
						if err != nil {
							return fmt.Errorf("%s / %s: %v", filepath.Base(f), title, err)
						}
						out = append(out, panelQuery{filepath.Base(f), title, q})
					}
				}
				for _, k := range slices.Sorted(maps.Keys(v)) {
					if err := walk(v[k], title); err != nil {
						return err
					}
				}
			case []any:
				for _, x := range v {
					if err := walk(x, title); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := walk(dash["panels"], ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// templateValues returns the values of a dashboard's variables: a multi-value variable's
// "All" value, else its current value.
func templateValues(dash map[string]any) map[string]string {
	values := map[string]string{"__rate_interval": rateInterval}
	templating, _ := dash["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, x := range list {
		v, _ := x.(map[string]any)
		name, _ := v["name"].(string)
		current, _ := v["current"].(map[string]any)
		switch c := current["value"].(type) {
		case string:
			values[name] = c
		case []any:
			if len(c) == 1 {
				values[name], _ = c[0].(string)
			}
		}
		if all, _ := v["allValue"].(string); v["includeAll"] == true && all != "" {
			values[name] = all
		}
	}
	return values
}

// substitute replaces the variables in expr; $1 and the like (label_replace's
// replacement) are not variables.
func substitute(expr string, values map[string]string) (string, error) {
	var unknown []string
	expr = grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}[]")
		if v, ok := values[name]; ok {
			return v
		}
		if name[0] < '0' || name[0] > '9' {
			unknown = append(unknown, m)
		}
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v", unknown)
	}
	return expr, nil
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\s*\{`)
	promSlogate  = regexp.MustCompile(`\bslogate[A-Za-z0-9_:]*`)
)

// metricNames returns the metric names a query selects: every name before a label
// matcher, and every slogate name, outside string literals.
func metricNames(expr string) []string {
	expr = promString.ReplaceAllString(expr, `""`)
	var out []string
	for _, m := range promSelector.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	out = append(out, promSlogate.FindAllString(expr, -1)...)
	slices.Sort(out)
	return slices.Compact(out)
}

// recordNames returns the names of the recording rules in alerts/slogate.rules.yml.
func recordNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Record != "" && !slices.Contains(out, r.Record) {
				out = append(out, r.Record)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no recording rules in %s", rulesFile)
	}
	return out
}

// promSample is one sample of an instant query's result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [time, "value"]
}

func (s promSample) value() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// promQuery evaluates expr now; a scalar result is one sample.
func promQuery(base, expr string) ([]promSample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := promGet(base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), &data); err != nil {
		return nil, err
	}
	var out []promSample
	switch data.ResultType {
	case "vector":
		return out, json.Unmarshal(data.Result, &out)
	case "scalar":
		out = append(out, promSample{})
		return out, json.Unmarshal(data.Result, &out[0].Value)
	}
	return nil, fmt.Errorf("result type %q, want a vector or a scalar", data.ResultType)
}

// promGet reads a Prometheus API response into data, or returns its error.
func promGet(u string, data any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %d, %v", u, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", body.ErrorType, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// promAlert is an active alert as /api/v1/alerts lists it.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// burnAlerts returns the active SlogateTTFTBudgetBurn alerts of a namespace.
func burnAlerts(base, namespace string) ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := promGet(base+"/api/v1/alerts", &data)
	return slices.DeleteFunc(data.Alerts, func(a promAlert) bool {
		return a.Labels["alertname"] != "SlogateTTFTBudgetBurn" || a.Labels["namespace"] != namespace
	}), err
}

// groupEvaluated returns when Prometheus last evaluated the rule group.
func groupEvaluated(base, group string) (time.Time, error) {
	var data struct {
		Groups []struct {
			Name           string    `json:"name"`
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	if err := promGet(base+"/api/v1/rules", &data); err != nil {
		return time.Time{}, err
	}
	for _, g := range data.Groups {
		if g.Name == group {
			return g.LastEvaluation, nil
		}
	}
	return time.Time{}, fmt.Errorf("no rule group %s", group)
}

// awaitProm polls cond until it holds, failing the test after patience with cond's
// last error.
func awaitProm(t *testing.T, what string, patience time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", patience, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
