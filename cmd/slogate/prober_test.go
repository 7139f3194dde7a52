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

	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// TestProbeCommand runs `slogate probe` against the simulator and finds the three
// reports it promises, and its metrics pushed once to a receiver with the extra labels.
func TestProbeCommand(t *testing.T) {
	base := startCommand(t, "sim", "--profile", "tiny")
	file := filepath.Join(t.TempDir(), "probe.yaml")
	if err := os.WriteFile(file, []byte(simtest.ProbeWorkload), 0o644); err != nil {
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
	args := []string{"probe", "--upstream", base, "--workload", file, "--out", out,
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
