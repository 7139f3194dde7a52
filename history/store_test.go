package history

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

var epoch = time.Date(2031, 3, 4, 5, 0, 0, 0, time.UTC)

// shapes is a two-cell workload as a probe report records it (defaults filled in).
func shapes(name string) synth.Workload {
	return synth.Workload{
		Name: name, Kind: synth.Shapes, Shapes: []synth.Shape{{Name: "S", Input: 64, Output: 16}},
		Concurrency: []int{1, 2}, Duration: measure.Duration(time.Second), Rounds: 1, Agreement: 0.06, Arrival: "poisson",
	}
}

// run is the i-th run of workload w: every cell valid, with throughput tput and TTFT
// p95 ttft.
func run(w synth.Workload, i int, tput, ttft float64) synth.Report {
	start := epoch.Add(time.Duration(i) * 6 * time.Hour)
	rep := synth.Report{
		Workload: w, Model: "sim-tiny", Target: "http://user:secret@127.0.0.1:8080", Label: fmt.Sprintf("run %d", i),
		Started: start, Finished: start.Add(time.Minute),
		Gate: []synth.Check{{Name: "arithmetic", Verdict: synth.Pass}},
	}
	for _, c := range w.Concurrency {
		rep.Cells = append(rep.Cells, synth.Cell{
			Row: "S", Concurrency: c, State: synth.Valid, Throughput: tput * float64(c), TTFTp95: ttft, TPOTp95: 0.01,
			Rounds: []synth.Round{{Throughput: tput * float64(c), TTFTp95: ttft, TPOTp95: 0.01}},
		})
	}
	return rep
}

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func appendRun(t *testing.T, s *Store, rep synth.Report) Run {
	t.Helper()
	r, err := s.Append(rep)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// files returns the names of the run files in dir, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

func ids(runs []Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// TestReopen: a store opened again on the same directory, as after a restart, holds
// the same runs in the same order with the same comparisons, and serves their reports.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Runs: 5, Bytes: 1 << 20}
	s := open(t, cfg)
	a, b := shapes("tiny-shapes"), shapes("other")
	appendRun(t, s, run(a, 0, 100, 0.1))
	appendRun(t, s, run(b, 1, 100, 0.1))
	appendRun(t, s, run(a, 2, 50, 0.1)) // half the throughput: a regression
	before := s.Runs()

	again := open(t, cfg)
	after := again.Runs()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("after reopening:\n%+v\nwant\n%+v", after, before)
	}
	if got := ids(after); !reflect.DeepEqual(got, []string{"000003-tiny-shapes", "000002-other", "000001-tiny-shapes"}) {
		t.Errorf("runs %v, want newest first", got)
	}
	newest, rep, ok := again.Latest("tiny-shapes")
	if !ok || newest.ID != "000003-tiny-shapes" || rep.Label != "run 2" || len(rep.Cells) != 2 {
		t.Fatalf("Latest after reopening: %v %+v", ok, newest)
	}
	if newest.Previous != "000001-tiny-shapes" || len(newest.Regressions()) != 2 {
		t.Errorf("the newest run after reopening: previous %q, regressions %+v; want both cells' throughput against run 0", newest.Previous, newest.Regressions())
	}
	if strings.Contains(rep.Target, "secret") {
		t.Errorf("a stored report keeps the target's password: %s", rep.Target)
	}
	old, err := again.Report("000001-tiny-shapes")
	if err != nil || old.Label != "run 0" || old.Cells[1].Throughput != 200 {
		t.Errorf("Report of the oldest run: %v, label %q", err, old.Label)
	}
	// The next run continues the sequence: no file is overwritten.
	if r := appendRun(t, again, run(b, 3, 100, 0.1)); r.ID != "000004-other" || r.Previous != "000002-other" {
		t.Errorf("a run appended after reopening: %+v", r)
	}
}

// TestBoundByCount: each workload keeps its last Runs runs, files and all.
func TestBoundByCount(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Config{Dir: dir, Runs: 3, Bytes: 1 << 30})
	for i := range 5 {
		appendRun(t, s, run(shapes("a"), i, 100, 0.1))
	}
	appendRun(t, s, run(shapes("b"), 5, 100, 0.1))
	want := []string{"000006-b", "000005-a", "000004-a", "000003-a"}
	if got := ids(s.Runs()); !reflect.DeepEqual(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	if got := files(t, dir); !reflect.DeepEqual(got, []string{"000003-a.json", "000004-a.json", "000005-a.json", "000006-b.json"}) {
		t.Errorf("files %v", got)
	}
	if _, err := s.Report("000001-a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the report of a pruned run: %v, want ErrNotFound", err)
	}
	// A lower bound takes effect when the store is opened.
	s = open(t, Config{Dir: dir, Runs: 1, Bytes: 1 << 30})
	if got := ids(s.Runs()); !reflect.DeepEqual(got, []string{"000006-b", "000005-a"}) {
		t.Errorf("reopened with 1 run per workload: %v", got)
	}
}

// TestBoundByBytes: the oldest runs go while the total is over Bytes, but never the
// newest of a workload, even when that one alone is over.
func TestBoundByBytes(t *testing.T) {
	dir := t.TempDir()
	probe := open(t, Config{Dir: t.TempDir(), Runs: 1, Bytes: 1 << 30})
	size := appendRun(t, probe, run(shapes("a"), 0, 100, 0.1)).Bytes

	s := open(t, Config{Dir: dir, Runs: 100, Bytes: 2*size + size/2})
	for i := range 4 {
		appendRun(t, s, run(shapes("a"), i, 100, 0.1))
	}
	runs := s.Runs()
	var total int64
	for _, r := range runs {
		total += r.Bytes
	}
	if got := ids(runs); !reflect.DeepEqual(got, []string{"000004-a", "000003-a"}) || total > 2*size+size/2 {
		t.Errorf("runs %v of %d bytes; want the last two, within %d", got, total, 2*size+size/2)
	}
	if n := len(files(t, dir)); n != 2 {
		t.Errorf("%d files, want 2", n)
	}

	// A bound smaller than one run keeps the newest of each workload.
	tiny := open(t, Config{Dir: t.TempDir(), Runs: 100, Bytes: 1})
	for i := range 3 {
		appendRun(t, tiny, run(shapes("a"), i, 100, 0.1))
		appendRun(t, tiny, run(shapes("b"), i, 100, 0.1))
	}
	if got := ids(tiny.Runs()); !reflect.DeepEqual(got, []string{"000006-b", "000005-a"}) {
		t.Errorf("with a bound of 1 byte: %v, want the newest of each workload", got)
	}
}

// TestRegressions: each run is compared with the last one of its workload and
// definition that measured cells, by synth's rule.
func TestRegressions(t *testing.T) {
	s := open(t, Config{Dir: t.TempDir(), Runs: 20, Bytes: 1 << 30})
	w := shapes("a")

	first := appendRun(t, s, run(w, 0, 100, 0.1))
	if first.Previous != "" || first.Changes != nil {
		t.Errorf("the first run was compared: %+v", first)
	}
	same := appendRun(t, s, run(w, 1, 98, 0.102)) // within the 6% agreement
	if same.Previous != first.ID || len(same.Changes) != 2*len(synth.Headline) || len(same.Regressions()) != 0 {
		t.Errorf("a run within noise: previous %q, %d changes, regressions %+v", same.Previous, len(same.Changes), same.Regressions())
	}
	for _, c := range same.Changes {
		if c.Moved != synth.WithinNoise || c.Noise != 0.06 {
			t.Errorf("change %+v, want within the workload's agreement", c)
		}
	}

	slower := appendRun(t, s, run(w, 2, 98, 0.2)) // TTFT doubled
	var got []string
	for _, c := range slower.Regressions() {
		got = append(got, c.Row+"/"+c.Load+"/"+c.Figure)
	}
	if want := []string{"S/1/ttft_p95_s", "S/2/ttft_p95_s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("regressions %v, want %v", got, want)
	}

	// A run whose gate failed measured no cells: it is held, and the next run is compared
	// with the last one that measured.
	gated := run(w, 3, 0, 0)
	gated.Cells, gated.Gate = nil, []synth.Check{{Name: "arithmetic", Verdict: synth.Fail}}
	if r := appendRun(t, s, gated); r.Gate != "failed" || r.Previous != "" {
		t.Errorf("a gate-failed run: %+v", r)
	}
	broken := run(w, 4, 98, 0.2)
	broken.Cells[1].State, broken.Cells[1].Throughput = synth.Failed, 0
	r := appendRun(t, s, broken)
	if r.Previous != slower.ID {
		t.Errorf("compared with %q, want the last run that measured, %q", r.Previous, slower.ID)
	}
	got = got[:0]
	for _, c := range r.Regressions() {
		got = append(got, c.Load+"/"+c.Figure+"/"+string(c.Moved))
	}
	if want := []string{"2/output_tok_per_s/state_changed", "2/ttft_p95_s/state_changed", "2/tpot_p95_s/state_changed"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a cell that failed: regressions %v, want %v", got, want)
	}

	// A changed definition (here --probe-quick's shorter rounds) starts a new series.
	quick := w
	quick.Duration = measure.Duration(300 * time.Millisecond)
	if r := appendRun(t, s, run(quick, 5, 10, 1)); r.Previous != "" || r.Changes != nil {
		t.Errorf("a run of another definition was compared: previous %q", r.Previous)
	}
}

// TestDamagedFiles: files the store cannot read are logged and left alone, unfinished
// writes are removed, other files are ignored, and new runs never take a damaged
// file's name.
func TestDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Config{Dir: dir, Runs: 5, Bytes: 1 << 20})
	appendRun(t, s, run(shapes("a"), 0, 100, 0.1))
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("000007-a.json", `{"schema":"slogate.probe/v1","cells":[{"row":`) // cut short
	write("000008-a.json", `{"schema":"slogate.probe/v0","cells":[]}`)      // another schema
	write(tempPrefix+"123", `{"schema":`)                                   // an interrupted write
	write("README", "not a run")

	var log bytes.Buffer
	again := open(t, Config{Dir: dir, Runs: 5, Bytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if got := ids(again.Runs()); !reflect.DeepEqual(got, []string{"000001-a"}) {
		t.Errorf("runs %v, want the one readable run", got)
	}
	for _, f := range []string{"000007-a.json", "000008-a.json"} {
		if !strings.Contains(log.String(), "file="+f) {
			t.Errorf("the log does not name %s:\n%s", f, log.String())
		}
	}
	if got := files(t, dir); !reflect.DeepEqual(got, []string{"000001-a.json", "000007-a.json", "000008-a.json", "README"}) {
		t.Errorf("files %v; want the unfinished write gone and the rest in place", got)
	}
	r := appendRun(t, again, run(shapes("a"), 1, 100, 0.1))
	if r.ID != "000009-a" || r.Previous != "000001-a" {
		t.Errorf("the run after damaged files: %+v", r)
	}
}

// TestWorkloadNamesInPaths: a workload's name cannot lead a file out of the directory,
// and IDs are only those the store gave.
func TestWorkloadNamesInPaths(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"tiny-shapes", "tiny-shapes"},
		{"../../etc/passwd", ".._.._etc_passwd"},
		{`C:\temp\x`, "C__temp_x"},
		{"a\x00b", "a_b"},
		{"", "workload"},
		{"Kontext ü", "Kontext___"},
		{strings.Repeat("x", 100), strings.Repeat("x", 64)},
	} {
		if got := safeName(tc.name); got != tc.want || !fileName.MatchString("000001-"+got+".json") {
			t.Errorf("safeName(%q) = %q, want %q, a run's file name", tc.name, got, tc.want)
		}
	}

	root := t.TempDir()
	dir := filepath.Join(root, "history")
	s := open(t, Config{Dir: dir, Runs: 5, Bytes: 1 << 20})
	r := appendRun(t, s, run(shapes("../../escape"), 0, 100, 0.1))
	if got := files(t, root); !reflect.DeepEqual(got, []string{"history"}) {
		t.Errorf("files beside the directory: %v", got)
	}
	if got := files(t, dir); !reflect.DeepEqual(got, []string{r.ID + ".json"}) || r.ID != "000001-.._.._escape" {
		t.Errorf("files %v for run %s", got, r.ID)
	}
	for _, id := range []string{"../history/" + r.ID, r.ID + ".json", "", "000001-..", "/etc/passwd"} {
		if _, err := s.Report(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Report(%q): %v, want ErrNotFound", id, err)
		}
	}
}

// TestWriteFailure: when the file cannot be written, the run is still held (in memory)
// and compared, and Append says why.
func TestWriteFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "history")
	s := open(t, Config{Dir: dir, Runs: 5, Bytes: 1 << 20})
	first := appendRun(t, s, run(shapes("a"), 0, 100, 0.1))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r, err := s.Append(run(shapes("a"), 1, 50, 0.1))
	if err == nil || r.Stored || r.Previous != first.ID || len(r.Regressions()) != 2 {
		t.Fatalf("Append into a removed directory: %v, %+v", err, r)
	}
	if rep, err := s.Report(r.ID); err != nil || rep.Label != "run 1" {
		t.Errorf("the report of a run held in memory: %v", err)
	}
}

// TestConcurrentAppend: appends and reads from many goroutines leave the store and its
// directory in agreement, within the bounds (run it with -race).
func TestConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Config{Dir: dir, Runs: 3, Bytes: 1 << 30})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			w := shapes(fmt.Sprintf("w%d", g%2))
			for i := range 6 {
				if _, err := s.Append(run(w, i, 100, 0.1)); err != nil {
					t.Error(err)
				}
				for _, r := range s.Runs() {
					if _, err := s.Report(r.ID); err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	runs := s.Runs()
	var want []string
	for _, r := range runs {
		want = append(want, r.ID+".json")
	}
	slices.Sort(want)
	if got := files(t, dir); len(runs) != 6 || !reflect.DeepEqual(got, want) {
		t.Errorf("%d runs %v, files %v; want 3 of each workload, each with its file", len(runs), want, got)
	}
}
