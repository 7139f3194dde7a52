// Package synth is slogate's synthetic prober: it runs the benchmark matrix (context
// length × concurrency, workload shapes, arrival-rate scans) against an engine with the
// measurement rules of the published benchmarks listed in docs/simulator.md ("Published
// figures"), and returns the results as a Report (package report writes it as JSON,
// Markdown and HTML).
//
// The prober is a client of the engine: it measures with package measure, exactly as the
// proxy does, and knows nothing of the proxy or of admission control.
package synth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/measure"
)

// ErrInvalidWorkload wraps every problem found in a workload definition.
var ErrInvalidWorkload = errors.New("synth: invalid workload")

// Kind is what a workload measures.
type Kind string

// The workload kinds.
const (
	// Matrix runs every context length at every concurrency: the prefill speed of one
	// request per context (on the warm-up) and the sustained decode throughput of each
	// cell, as the published H200 context matrix does (docs/simulator.md).
	Matrix Kind = "matrix"
	// Shapes runs each input/output shape at each concurrency, as the published H200
	// workload shapes do (docs/simulator.md).
	Shapes Kind = "shapes"
	// Scan offers open-loop arrivals at multiples of a reference rate, as the published
	// H20-3e rate scan does (docs/simulator.md), to find where completions stop growing
	// while TTFT explodes.
	Scan Kind = "scan"
)

// Shape is a request shape: exact input and output lengths in tokens.
type Shape struct {
	Name   string `yaml:"name" json:"name"`
	Input  int    `yaml:"input" json:"input"`
	Output int    `yaml:"output" json:"output"`
}

// Workload is a probe definition. Workloads are data: the presets below, or YAML files
// decoded strictly.
type Workload struct {
	Name string `yaml:"name" json:"name"`
	Kind Kind   `yaml:"kind" json:"kind"`

	// Matrix: context lengths and concurrencies; every request asks for Output tokens.
	Contexts    []int `yaml:"contexts,omitempty" json:"contexts,omitempty"`
	Concurrency []int `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	Output      int   `yaml:"output,omitempty" json:"output,omitempty"`

	// Shapes (and the one shape of a Scan).
	Shapes []Shape `yaml:"shapes,omitempty" json:"shapes,omitempty"`

	// Scan: offered rates are Multiples of ReferenceRate (requests/s); a zero
	// ReferenceRate is measured first as the closed-loop throughput at
	// CalibrationConcurrency. Arrivals are "constant" or "poisson".
	Multiples              []float64 `yaml:"multiples,omitempty" json:"multiples,omitempty"`
	ReferenceRate          float64   `yaml:"reference_rate,omitempty" json:"reference_rate,omitempty"`
	CalibrationConcurrency int       `yaml:"calibration_concurrency,omitempty" json:"calibration_concurrency,omitempty"`
	Arrival                string    `yaml:"arrival,omitempty" json:"arrival,omitempty"`

	// Rounds: each cell runs a warm-up and then Rounds rounds, each bounded by Duration
	// or by Requests (requests per concurrent stream); the rounds must agree within
	// Agreement (relative spread of output throughput) for the cell to be stable.
	Duration  measure.Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	Requests  int              `yaml:"requests,omitempty" json:"requests,omitempty"`
	Rounds    int              `yaml:"rounds,omitempty" json:"rounds,omitempty"`
	Agreement float64          `yaml:"agreement,omitempty" json:"agreement,omitempty"`

	// Route is the generation route every request goes to: "completions" (the default
	// when empty: /v1/completions with token-id prompts), "chat" (/v1/chat/completions,
	// text prompts), "responses" (vLLM's /v1/responses, text input) or "generate"
	// (SGLang's /generate, token ids in input_ids). The success rules are the same on
	// every route: exact output length from the route's usage report (usage, the
	// Responses API's response.completed usage, /generate's meta_info).
	Route string `yaml:"route,omitempty" json:"route,omitempty"`

	// SharedPrefix tokens open every prompt, to measure prefix caching on purpose; 0
	// makes every prompt random from its first token, so caching cannot flatter results.
	SharedPrefix int `yaml:"shared_prefix,omitempty" json:"shared_prefix,omitempty"`
}

// Presets are the named workloads of `slogate probe --workload NAME`.
var Presets = map[string]Workload{
	// The published H200 context matrix (docs/simulator.md): 8K-251K context, 1-128 streams, 30 s per cell,
	// up to 4,096 output tokens.
	"context-matrix": {
		Name: "context-matrix", Kind: Matrix,
		Contexts:    []int{8192, 16384, 32768, 65536, 131072, 257024},
		Concurrency: []int{1, 2, 4, 8, 16, 32, 64, 128},
		Output:      4096, Duration: measure.Duration(30 * time.Second), Rounds: 1, Agreement: 0.06,
	},
	// The seven published H200 workload shapes (docs/simulator.md) at 1, 16 and 64
	// streams, 60 s rounds.
	"shapes": {
		Name: "shapes", Kind: Shapes,
		Shapes: []Shape{
			{"API-S", 2048, 256}, {"CHAT-S", 2048, 512}, {"CODE-I", 16384, 2048}, {"CHAT-L", 32768, 2048},
			{"CODE-A", 65536, 4096}, {"DOC-L", 131072, 2048}, {"BATCH-D", 4096, 8192},
		},
		Concurrency: []int{1, 16, 64}, Duration: measure.Duration(60 * time.Second), Rounds: 2, Agreement: 0.06,
	},
	// The published H20-3e rate scan (docs/simulator.md): 8K in / 128 out, Poisson arrivals at
	// 0.5x, 0.8x and 1.1x of the closed-loop throughput at 32 streams, three 3-minute
	// rounds each.
	"rate-scan": {
		Name: "rate-scan", Kind: Scan,
		Shapes:    []Shape{{"8K/128", 8192, 128}},
		Multiples: []float64{0.5, 0.8, 1.1}, CalibrationConcurrency: 32, Arrival: "poisson",
		Duration: measure.Duration(3 * time.Minute), Rounds: 3, Agreement: 0.06,
	},
}

// Quick returns w shortened so that a whole preset runs in about a minute: short rounds,
// one round per cell, and outputs capped at 256 tokens. Shapes and contexts keep their
// inputs, so prefill and capacity limits are still the real ones.
func (w Workload) Quick() Workload {
	// Open-loop rounds get longer windows than closed-loop ones: at a fraction of the
	// reference rate, a 3 s window would hold only a handful of arrivals.
	limit := 3 * time.Second
	if w.Kind == Scan {
		limit = 10 * time.Second
	}
	w.Duration = measure.Duration(min(time.Duration(w.Duration), limit))
	w.Rounds = 1
	w.Output = min(w.Output, 256)
	shapes := make([]Shape, len(w.Shapes))
	for i, s := range w.Shapes {
		s.Output = min(s.Output, 256)
		shapes[i] = s
	}
	w.Shapes = shapes
	return w
}

// FindWorkload returns the preset of that name, or reads the workload file it names (a
// path, or a name ending in .yaml or .yml).
func FindWorkload(name string) (Workload, error) {
	if w, ok := Presets[name]; ok {
		return w, nil
	}
	if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.Contains(name, "/") {
		return LoadWorkload(name)
	}
	return Workload{}, fmt.Errorf("workload %q: not a preset (context-matrix, shapes, rate-scan) or a YAML file", name)
}

// LoadWorkload reads a workload file (YAML, decoded strictly) and validates it.
func LoadWorkload(path string) (Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("%w: %v", ErrInvalidWorkload, err)
	}
	return ParseWorkload(data)
}

// ParseWorkload decodes a workload (unknown fields are errors) and validates it.
func ParseWorkload(data []byte) (Workload, error) {
	var w Workload
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		return Workload{}, fmt.Errorf("%w: %v", ErrInvalidWorkload, err)
	}
	return w, w.Validate()
}
