package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// writeReport writes a shapes report of one cell, labelled label and measuring tput
// output tok/s, with report.WriteFiles into dir/label, and returns that directory.
func writeReport(t *testing.T, dir, label, workload string, tput float64, flags map[string]string) string {
	t.Helper()
	w := synth.Presets["shapes"]
	w.Name = workload
	cell := synth.Cell{Row: "API-S", Input: 2048, Output: 256, Concurrency: 16, State: synth.Valid, Throughput: tput, TTFTp95: 0.2, TPOTp95: 0.02,
		SuccessRate: 1, Agreed: true, Rounds: []synth.Round{{Sent: 20, Succeeded: 20, Seconds: 30, Throughput: tput, TTFTp95: 0.2, TPOTp95: 0.02, Completed: 20}}}
	rep := synth.Report{Schema: synth.SchemaVersion, Workload: w, Label: label, Engine: "vllm", EngineVersion: "0.11.0", EngineFlags: flags,
		Model: "m", Started: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC), Cells: []synth.Cell{cell}}
	out := filepath.Join(dir, label)
	if err := report.WriteFiles(out, rep); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	tp1 := writeReport(t, dir, "tp1", "shapes", 1000, map[string]string{"tensor_parallel_size": "1"})
	tp2 := writeReport(t, dir, "tp2", "shapes", 1480, map[string]string{"tensor_parallel_size": "2"})
	other := writeReport(t, dir, "other", "my-shapes", 1000, nil)
	out := filepath.Join(dir, "cmp")
	runCommandCases(t, []commandCase{
		{name: "against the first", args: []string{"compare", "--out", out, tp1, filepath.Join(tp2, "report.json")}, code: 0,
			stdout: []string{"wrote " + filepath.Join(out, "comparison.{json,md,html}"), "tp2 against tp1: output tok/s 1 better, 0 worse, 0 within noise"}},
		{name: "a chosen baseline, flags after the reports", args: []string{"compare", tp1, tp2, "--out", out, "--baseline", "tp2"}, code: 0,
			stdout: []string{"tp1 against tp2: output tok/s 0 better, 1 worse"}},
		{name: "a baseline by position", args: []string{"compare", "--baseline", "2", "--out", out, tp1, tp2}, code: 0,
			stdout: []string{"tp1 against tp2"}},
		{name: "one report", args: []string{"compare", tp1}, code: 2, stderr: []string{"want at least two reports, got 1"}},
		{name: "different workloads", args: []string{"compare", "--out", out, tp1, other}, code: 1,
			stderr: []string{"different workloads", filepath.Join(tp1, "report.json") + ` is "shapes"`, filepath.Join(other, "report.json") + ` is "my-shapes"`}},
		{name: "no such baseline", args: []string{"compare", "--out", out, "--baseline", "tp3", tp1, tp2}, code: 1,
			stderr: []string{`no run is "tp3"`, `1 "tp1", 2 "tp2"`}},
		{name: "no such report", args: []string{"compare", "--out", out, tp1, filepath.Join(dir, "nope")}, code: 1, stderr: []string{"nope"}},
		{name: "help", args: []string{"help", "compare"}, code: 0, stderr: []string{"Usage: slogate compare", "--baseline", "SLOGATE_BASELINE"}},
	})
	// The last comparison written is against tp2.
	data, err := os.ReadFile(filepath.Join(out, "comparison.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema      string `json:"schema"`
		Baseline    int    `json:"baseline"`
		Differences []struct {
			What   string   `json:"what"`
			Values []string `json:"values"`
		} `json:"differences"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != report.CompareSchema || doc.Baseline != 1 || len(doc.Differences) != 1 || doc.Differences[0].What != "flag tensor_parallel_size" {
		t.Errorf("comparison.json: %+v", doc)
	}
	md, err := os.ReadFile(filepath.Join(out, "comparison.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "| tp1 | −32% ✗ |"; !strings.Contains(string(md), want) {
		t.Errorf("comparison.md lacks %q:\n%s", want, md)
	}
}

// TestProbeThenCompare probes the simulator twice under two labels, as a person trying
// two recipes would, and compares the two reports slogate probe wrote.
func TestProbeThenCompare(t *testing.T) {
	base := startCommand(t, "sim", "--profile", "tiny")
	dir := t.TempDir()
	file := filepath.Join(dir, "probe.yaml")
	if err := os.WriteFile(file, []byte(simtest.ProbeWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"first try", "second try"} {
		var stdout, stderr bytes.Buffer
		args := []string{"probe", "--upstream", base, "--workload", file, "--label", label, "--out", filepath.Join(dir, label)}
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("probe --label %q exited %d: %s", label, code, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	out := filepath.Join(dir, "cmp")
	args := []string{"compare", filepath.Join(dir, "first try"), filepath.Join(dir, "second try"), "--out", out}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("compare exited %d: %s", code, stderr.String())
	}
	if want := "second try against first try: output tok/s "; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	c, err := report.ReadComparison(filepath.Join(dir, "first try"), filepath.Join(dir, "second try"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Runs[0].Name != "first try" || c.Runs[1].Report.Label != "second try" || len(c.Cells) != 2 || len(c.Runs[0].Report.Cells) != 2 {
		t.Fatalf("runs %q, %q with %d cells", c.Runs[0].Name, c.Runs[1].Report.Label, len(c.Cells))
	}
	md, err := os.ReadFile(filepath.Join(out, "comparison.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range c.Cells {
		if want := "| " + k.Row + " c=" + k.Load + " |"; strings.Count(string(md), want) != 2*len(synth.Headline) {
			t.Errorf("comparison.md has %d rows %q, want one in each table of each figure:\n%s", strings.Count(string(md), want), want, md)
		}
	}
}
