package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// A small workload the tiny simulator serves in a second or two.
const testProbeWorkload = `name: tiny-shapes
kind: shapes
shapes:
  - {name: S, input: 64, output: 16}
concurrency: [1, 2]
duration: 300ms
`

// TestScheduledProbeBacksOff: the prober inside serve holds back while live traffic
// holds more than its share of the engine, and probes once the traffic is gone; its
// results reach /metrics and the admin report endpoints.
func TestScheduledProbeBacksOff(t *testing.T) {
	file := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(file, []byte(testProbeWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startTestSidecarWith(t, func(cfg *serveSettings) {
		cfg.ProbeWorkload, cfg.ProbeInterval = file, 0 // probe on request only
		cfg.ProbeMaxLoad = 0.0001                      // ~200 of the tiny engine's 2M KV tokens
	})
	waitFor(t, "the prober to be scheduled", func() bool { return ts.sc.prober.Load() != nil })
	sched := ts.sc.prober.Load()

	// Live traffic: a long stream holds more KV than the probe may share.
	live := openStream(t, ts.data, 600) // 3 s of tokens at 5 ms each
	waitFor(t, "the live stream to hold its share", func() bool { busy, _ := ts.sc.Busy(); return busy })
	trigger(t, ts.admin)
	waitFor(t, "the probe to be held back", func() bool { return sched.Status().Held >= 1 })
	if st := sched.Status(); st.Runs != 0 || !strings.Contains(st.LastErr, "live") {
		t.Fatalf("while live traffic is high: %+v, want no run and a held probe", st)
	}

	// The live stream ends: the next probe runs to the end.
	if _, err := rest(live); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "live load to drop", func() bool { busy, _ := ts.sc.Busy(); return !busy })
	trigger(t, ts.admin)
	waitFor(t, "the probe to run", func() bool { return sched.Status().Runs == 1 })
	rep, ok := sched.Latest()
	if !ok || len(rep.Cells) != 2 || rep.Cells[0].State != synth.Valid {
		t.Fatalf("latest report: ok=%v cells=%+v", ok, rep.Cells)
	}
	metrics := get(t, ts.admin+"/metrics")
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
	if html := get(t, ts.admin+"/probe/report.html"); !strings.Contains(html, `id="heatmap"`) {
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

// TestProbeCommand runs `slogate probe` against the simulator and finds the three
// reports it promises, and its metrics pushed once to a receiver with the extra labels.
func TestProbeCommand(t *testing.T) {
	base := startCommand(t, "sim", "--profile", "tiny")
	file := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(file, []byte(testProbeWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	pushed := make(chan string, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		pushed <- r.Method + " " + r.URL.Path + "\n" + string(b)
	}))
	defer receiver.Close()
	out := filepath.Join(t.TempDir(), "reports")
	var stdout, stderr bytes.Buffer
	args := []string{"probe", "--target", base, "--workload", file, "--out", out,
		"--push-url", receiver.URL + "/api/v1/import/prometheus", "--push-labels", `job="slogate-probe"`}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("probe exited %d: %s", code, stderr.String())
	}
	select {
	case got := <-pushed:
		for _, want := range []string{"POST /api/v1/import/prometheus\n", `slogate_probe_last_success{job="slogate-probe",workload=`, "slogate_probe_cell_state{", `state="valid"`} {
			if !strings.Contains(got, want) {
				t.Errorf("the push lacks %q:\n%s", want, got)
			}
		}
	default:
		t.Error("slogate probe --push-url pushed nothing")
	}
	for _, name := range []string{"report.json", "report.md", "report.html"} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	f, err := os.Open(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := report.ReadJSON(f)
	if err != nil || rep.Model != "sim-tiny" || len(rep.Cells) != 2 || !synth.GatePassed(rep.Gate) {
		t.Errorf("report: err=%v model=%q cells=%d gate=%+v", err, rep.Model, len(rep.Cells), rep.Gate)
	}
	if !strings.Contains(stderr.String(), "[2/2]") {
		t.Errorf("no progress lines on stderr:\n%s", stderr.String())
	}
}
