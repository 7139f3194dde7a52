package synth

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/measure"
)

func TestPresetsValidate(t *testing.T) {
	if len(Presets) == 0 {
		t.Fatal("no presets")
	}
	for name, w := range Presets {
		t.Run(name, func(t *testing.T) {
			if w.Name != name {
				t.Errorf("preset %q is named %q", name, w.Name)
			}
			if err := w.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if err := w.Quick().Validate(); err != nil {
				t.Errorf("Quick().Validate: %v", err)
			}
		})
	}
}

// The presets are the workloads of the published benchmarks (docs/simulator.md): check
// the figures that tie them to those benchmarks.
func TestPresetsFollowThePublishedBenchmarks(t *testing.T) {
	m := Presets["context-matrix"]
	if got := len(m.Contexts) * len(m.Concurrency); got != 48 || m.Output != 4096 || time.Duration(m.Duration) != 30*time.Second {
		t.Errorf("context-matrix: %d cells, output %d, %v per cell; want 48, 4096, 30s (H200 context matrix)", got, m.Output, time.Duration(m.Duration))
	}
	if s := Presets["shapes"]; len(s.Shapes) != 7 || !reflect.DeepEqual(s.Concurrency, []int{1, 16, 64}) || s.Agreement != 0.06 {
		t.Errorf("shapes: %d shapes at %v, agreement %v; want 7 at [1 16 64], 0.06 (H200 workload shapes)", len(s.Shapes), s.Concurrency, s.Agreement)
	}
	if s := Presets["rate-scan"]; !reflect.DeepEqual(s.Multiples, []float64{0.5, 0.8, 1.1}) || s.Rounds != 3 || s.CalibrationConcurrency != 32 {
		t.Errorf("rate-scan: multiples %v, %d rounds, calibration at %d; want [0.5 0.8 1.1], 3, 32 (H20-3e rate scan)", s.Multiples, s.Rounds, s.CalibrationConcurrency)
	}
}

func TestQuick(t *testing.T) {
	for name, w := range Presets {
		t.Run(name, func(t *testing.T) {
			before := deepCopy(t, w)
			q := w.Quick()
			limit := 3 * time.Second
			if w.Kind == Scan {
				limit = 10 * time.Second
			}
			if got := time.Duration(q.Duration); got != min(time.Duration(w.Duration), limit) {
				t.Errorf("Duration %v, want %v", got, min(time.Duration(w.Duration), limit))
			}
			if q.Rounds != 1 {
				t.Errorf("Rounds %d, want 1", q.Rounds)
			}
			if q.Output != min(w.Output, 256) {
				t.Errorf("Output %d, want %d", q.Output, min(w.Output, 256))
			}
			if !reflect.DeepEqual(q.Contexts, w.Contexts) || !reflect.DeepEqual(q.Concurrency, w.Concurrency) || !reflect.DeepEqual(q.Multiples, w.Multiples) {
				t.Errorf("Quick changed the axes: %+v", q)
			}
			if len(q.Shapes) != len(w.Shapes) {
				t.Fatalf("%d shapes, want %d", len(q.Shapes), len(w.Shapes))
			}
			for i, s := range q.Shapes {
				if s.Input != w.Shapes[i].Input || s.Name != w.Shapes[i].Name || s.Output != min(w.Shapes[i].Output, 256) {
					t.Errorf("shape %d: %+v, want input %d and output min(%d, 256)", i, s, w.Shapes[i].Input, w.Shapes[i].Output)
				}
			}
			if !reflect.DeepEqual(w, before) || !reflect.DeepEqual(Presets[name], before) {
				t.Error("Quick changed the preset it was called on")
			}
		})
	}
}

// deepCopy copies w through JSON, so that later changes to w's slices cannot show in it.
func deepCopy(t *testing.T, w Workload) Workload {
	t.Helper()
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var c Workload
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseWorkload(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       Workload
		err        string // "" for success; else a fragment of the error
	}{
		{
			name: "matrix",
			yaml: "name: m\nkind: matrix\ncontexts: [1024, 2048]\nconcurrency: [1, 4]\noutput: 64\nduration: 1500ms\nrounds: 3\nagreement: 0.05\nshared_prefix: 32\n",
			want: Workload{Name: "m", Kind: Matrix, Contexts: []int{1024, 2048}, Concurrency: []int{1, 4}, Output: 64,
				Duration: measure.Duration(1500 * time.Millisecond), Rounds: 3, Agreement: 0.05, SharedPrefix: 32},
		},
		{
			name: "scan",
			yaml: "name: s\nkind: scan\nshapes: [{name: a, input: 100, output: 10}]\nmultiples: [0.5, 1.1]\nreference_rate: 1.75\narrival: constant\nrequests: 20\n",
			want: Workload{Name: "s", Kind: Scan, Shapes: []Shape{{"a", 100, 10}}, Multiples: []float64{0.5, 1.1},
				ReferenceRate: 1.75, Arrival: "constant", Requests: 20},
		},
		{name: "unknown field", yaml: "name: m\nkind: matrix\ncontexts: [1]\nconcurrency: [1]\noutput: 1\nrequests: 1\ncontext: [2]\n", err: "field context not found"},
		{name: "unknown shape field", yaml: "name: s\nkind: shapes\nshapes: [{name: a, input: 1, output: 1, extra: 2}]\nconcurrency: [1]\nrequests: 1\n", err: "field extra not found"},
		{name: "bad duration", yaml: "name: m\nkind: matrix\ncontexts: [1]\nconcurrency: [1]\noutput: 1\nduration: soon\n", err: "not a duration"},
		{name: "wrong type", yaml: "name: m\nkind: matrix\ncontexts: one\n", err: "cannot unmarshal"},
		{name: "not yaml", yaml: "{{{", err: "synth: invalid workload"},
		{name: "empty", yaml: "", err: "synth: invalid workload"},
		{name: "valid yaml, invalid workload", yaml: "name: m\nkind: matrix\ncontexts: [1]\nconcurrency: [1]\noutput: 1\n", err: "duration or a number of requests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWorkload([]byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrInvalidWorkload) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrInvalidWorkload mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Every preset survives YAML and JSON: what `slogate probe` prints can be read back.
func TestWorkloadRoundTrips(t *testing.T) {
	for name, w := range Presets {
		t.Run(name, func(t *testing.T) {
			y, err := yaml.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseWorkload(y)
			if err != nil || !reflect.DeepEqual(got, w) {
				t.Errorf("YAML round trip: %v\n%s", err, y)
			}
			j, err := json.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(j), `"duration":"`+time.Duration(w.Duration).String()+`"`) {
				t.Errorf("JSON duration not written as a string: %s", j)
			}
			var back Workload
			if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(back, w) {
				t.Errorf("JSON round trip: %v\n%s", err, j)
			}
		})
	}
}

func TestLoadWorkload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(path, []byte("name: ci\nkind: shapes\nshapes: [{name: s, input: 64, output: 8}]\nconcurrency: [1, 2]\nrequests: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := LoadWorkload(path)
	if err != nil || w.Name != "ci" || len(w.Shapes) != 1 {
		t.Errorf("LoadWorkload = %+v, %v", w, err)
	}
	if _, err := LoadWorkload(filepath.Join(dir, "missing.yaml")); !errors.Is(err, ErrInvalidWorkload) {
		t.Errorf("missing file: err = %v, want ErrInvalidWorkload", err)
	}
}

func TestValidateErrors(t *testing.T) {
	matrix := func(edit func(*Workload)) Workload {
		w := Workload{Name: "m", Kind: Matrix, Contexts: []int{1024}, Concurrency: []int{1}, Output: 16, Requests: 1}
		edit(&w)
		return w
	}
	scan := func(edit func(*Workload)) Workload {
		w := Workload{Name: "s", Kind: Scan, Shapes: []Shape{{"a", 64, 8}}, Multiples: []float64{0.5}, ReferenceRate: 1, Duration: measure.Duration(time.Second)}
		edit(&w)
		return w
	}
	tests := []struct {
		name string
		w    Workload
		err  string // "" when valid
	}{
		{"valid matrix", matrix(func(*Workload) {}), ""},
		{"valid scan with calibration", scan(func(w *Workload) { w.ReferenceRate, w.CalibrationConcurrency = 0, 4 }), ""},
		{"valid shapes", Workload{Name: "x", Kind: Shapes, Shapes: []Shape{{"a", 1, 1}}, Concurrency: []int{1}, Duration: measure.Duration(time.Second)}, ""},
		{"no name", matrix(func(w *Workload) { w.Name = "" }), "needs a name"},
		{"negative duration", matrix(func(w *Workload) { w.Duration = -1 }), "must not be negative"},
		{"negative requests", matrix(func(w *Workload) { w.Requests = -1 }), "must not be negative"},
		{"negative rounds", matrix(func(w *Workload) { w.Rounds = -1 }), "must not be negative"},
		{"negative shared prefix", matrix(func(w *Workload) { w.SharedPrefix = -1 }), "must not be negative"},
		{"no bound", matrix(func(w *Workload) { w.Requests = 0 }), "duration or a number of requests"},
		{"agreement 1", matrix(func(w *Workload) { w.Agreement = 1 }), "agreement"},
		{"agreement negative", matrix(func(w *Workload) { w.Agreement = -0.1 }), "agreement"},
		{"agreement NaN", matrix(func(w *Workload) { w.Agreement = math.NaN() }), "agreement"},
		{"no concurrency", matrix(func(w *Workload) { w.Concurrency = nil }), "concurrency"},
		{"zero concurrency", matrix(func(w *Workload) { w.Concurrency = []int{1, 0} }), "concurrency"},
		{"shape without name", Workload{Name: "x", Kind: Shapes, Shapes: []Shape{{"", 1, 1}}, Concurrency: []int{1}, Requests: 1}, "needs a name"},
		{"shape without input", Workload{Name: "x", Kind: Shapes, Shapes: []Shape{{"a", 0, 1}}, Concurrency: []int{1}, Requests: 1}, "positive input"},
		{"shape without output", Workload{Name: "x", Kind: Shapes, Shapes: []Shape{{"a", 1, 0}}, Concurrency: []int{1}, Requests: 1}, "positive input"},
		{"matrix without contexts", matrix(func(w *Workload) { w.Contexts = nil }), "positive contexts"},
		{"matrix with a zero context", matrix(func(w *Workload) { w.Contexts = []int{0} }), "positive contexts"},
		{"matrix without output", matrix(func(w *Workload) { w.Output = 0 }), "positive contexts and output"},
		{"matrix too big", matrix(func(w *Workload) { w.Contexts, w.Concurrency = make1(33), make1(32) }), "more than 1024 cells"},
		{"shapes without shapes", Workload{Name: "x", Kind: Shapes, Concurrency: []int{1}, Requests: 1}, "1 to 1024 cells"},
		{"shapes too big", Workload{Name: "x", Kind: Shapes, Shapes: shapesOf(1025), Concurrency: []int{1}, Requests: 1}, "1 to 1024 cells"},
		{"scan with two shapes", scan(func(w *Workload) { w.Shapes = append(w.Shapes, Shape{"b", 1, 1}) }), "one shape"},
		{"scan without multiples", scan(func(w *Workload) { w.Multiples = nil }), "one shape and some multiples"},
		{"scan with a zero multiple", scan(func(w *Workload) { w.Multiples = []float64{0.5, 0} }), "multiples must be positive"},
		{"scan with an infinite multiple", scan(func(w *Workload) { w.Multiples = []float64{math.Inf(1)} }), "multiples must be positive"},
		{"scan with a NaN multiple", scan(func(w *Workload) { w.Multiples = []float64{math.NaN()} }), "multiples must be positive"},
		{"scan without rate or calibration", scan(func(w *Workload) { w.ReferenceRate = 0 }), "reference_rate or a calibration_concurrency"},
		{"scan with a negative rate", scan(func(w *Workload) { w.ReferenceRate = -1 }), "reference_rate"},
		{"scan with a NaN rate", scan(func(w *Workload) { w.ReferenceRate = math.NaN() }), "reference_rate"},
		{"scan with an infinite rate", scan(func(w *Workload) { w.ReferenceRate = math.Inf(1) }), "reference_rate"},
		{"scan with an unknown arrival", scan(func(w *Workload) { w.Arrival = "bursty" }), "constant or poisson"},
		{"unknown kind", matrix(func(w *Workload) { w.Kind = "grid" }), `kind "grid"`},
		{"no kind", matrix(func(w *Workload) { w.Kind = "" }), `kind ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidWorkload) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Validate = %v, want ErrInvalidWorkload mentioning %q", err, tc.err)
			}
		})
	}
}

// shapesOf returns n valid shapes.
func shapesOf(n int) []Shape {
	s := make([]Shape, n)
	for i := range s {
		s[i] = Shape{Name: "s", Input: 1, Output: 1}
	}
	return s
}

// make1 returns n ones.
func make1(n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = 1
	}
	return xs
}

func TestWithDefaults(t *testing.T) {
	w := Workload{Name: "x"}.withDefaults()
	if w.Rounds != 1 || w.Agreement != 0.06 || w.Arrival != "poisson" {
		t.Errorf("withDefaults = rounds %d, agreement %v, arrival %q", w.Rounds, w.Agreement, w.Arrival)
	}
	set := Workload{Name: "x", Rounds: 3, Agreement: 0.1, Arrival: "constant"}
	if got := set.withDefaults(); !reflect.DeepEqual(got, set) {
		t.Errorf("withDefaults changed set values: %+v", got)
	}
}

func FuzzParseWorkload(f *testing.F) {
	for _, w := range Presets {
		b, err := yaml.Marshal(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("name: m\nkind: matrix\ncontexts: [1]\nconcurrency: [1]\noutput: 1\nrequests: 1\n"))
	f.Add([]byte("name: s\nkind: scan\nshapes: [{name: a, input: 1, output: 1}]\nmultiples: [1]\nreference_rate: .nan\nduration: 1s\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("duration: -5s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidWorkload) {
				t.Fatalf("error %v does not wrap ErrInvalidWorkload", err)
			}
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("ParseWorkload accepted a workload that Validate rejects: %v", err)
		}
		if err := w.Quick().Validate(); err != nil {
			t.Fatalf("Quick broke a valid workload: %v", err)
		}
	})
}
