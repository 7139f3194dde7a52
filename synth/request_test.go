package synth

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/slogate/slogate/wire"
)

// body is a probe request body as the engine decodes it.
type body struct {
	Model         string  `json:"model"`
	Prompt        []int   `json:"prompt"`
	MaxTokens     int     `json:"max_tokens"`
	Temperature   float64 `json:"temperature"`
	IgnoreEOS     bool    `json:"ignore_eos"`
	Stream        bool    `json:"stream"`
	StreamOptions struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

// decodeBody decodes p's body strictly: a field the engines do not know is an error.
func decodeBody(t *testing.T, p prompt) body {
	t.Helper()
	raw := p.appendBody(nil, []byte(`"the \"model\""`))
	if !json.Valid(raw) {
		t.Fatalf("body is not valid JSON: %.200s", raw)
	}
	var b body
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("decode: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["temperature"]; !ok {
		t.Error("no temperature field: engines would sample at their default temperature")
	}
	return b
}

func TestPromptBody(t *testing.T) {
	tests := []struct {
		name string
		p    prompt
	}{
		{"one token", prompt{input: 1, output: 1, seed: 7}},
		{"short", prompt{input: 32, output: 16, seed: 1}},
		{"8K/128", prompt{input: 8192, output: 128, seed: 42}},
		{"shared prefix", prompt{input: 300, output: 10, seed: 3, sharedPrefix: 100}},
		{"all shared", prompt{input: 64, output: 8, seed: 3, sharedPrefix: 64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decodeBody(t, tc.p)
			if b.Model != `the "model"` {
				t.Errorf("model %q", b.Model)
			}
			if len(b.Prompt) != tc.p.input {
				t.Errorf("%d prompt tokens, want %d", len(b.Prompt), tc.p.input)
			}
			for i, id := range b.Prompt {
				if id < idLow || id >= idHigh {
					t.Fatalf("token %d is id %d, outside [%d, %d)", i, id, idLow, idHigh)
				}
			}
			if b.MaxTokens != tc.p.output || !b.IgnoreEOS || b.Temperature != 0 || !b.Stream {
				t.Errorf("max_tokens %d ignore_eos %v temperature %v stream %v; want %d true 0 true",
					b.MaxTokens, b.IgnoreEOS, b.Temperature, b.Stream, tc.p.output)
			}
			if !b.StreamOptions.IncludeUsage || !b.StreamOptions.ContinuousUsageStats {
				t.Errorf("stream_options %+v, want include_usage and continuous_usage_stats", b.StreamOptions)
			}
			// The same body as the engines' request inspection reads it.
			req, err := wire.Inspect(wire.RouteCompletions, tc.p.appendBody(nil, []byte(`"m"`)))
			if err != nil {
				t.Fatalf("wire.Inspect: %v", err)
			}
			if req.Model != "m" || !req.Stream || !req.IncludeUsage || !req.ContinuousUsage || req.MaxTokens != tc.p.output || !req.HasMaxTokens {
				t.Errorf("wire.Inspect = %+v", req)
			}
		})
	}
}

func TestPromptSeeds(t *testing.T) {
	const input = 512
	a := decodeBody(t, prompt{input: input, output: 1, seed: 1}).Prompt
	if again := decodeBody(t, prompt{input: input, output: 1, seed: 1}).Prompt; !slices.Equal(a, again) {
		t.Error("the same seed gave different prompts")
	}
	var sd seeds
	openings := map[[3]int]bool{}
	for range 100 {
		p := decodeBody(t, prompt{input: input, output: 1, seed: sd.next()}).Prompt
		if same := samePositions(a, p); same > input/100 {
			t.Errorf("two seeds' prompts agree at %d of %d positions", same, input)
		}
		open := [3]int{p[0], p[1], p[2]}
		if openings[open] {
			t.Errorf("two seeds' prompts open with %v", open)
		}
		openings[open] = true
	}
}

func TestPromptSharedPrefix(t *testing.T) {
	const input, shared = 400, 150
	var prompts [][]int
	for seed := range uint64(20) {
		prompts = append(prompts, decodeBody(t, prompt{input: input, output: 1, seed: seed*7919 + 1, sharedPrefix: shared}).Prompt)
	}
	for i, p := range prompts[1:] {
		if !slices.Equal(p[:shared], prompts[0][:shared]) {
			t.Errorf("prompt %d: the shared prefix differs", i+1)
		}
		if same := samePositions(p[shared:], prompts[0][shared:]); same > 3 {
			t.Errorf("prompt %d: the rest agrees with prompt 0 at %d of %d positions", i+1, same, input-shared)
		}
	}
	// Without a shared prefix even the first tokens differ.
	a := decodeBody(t, prompt{input: 8, output: 1, seed: 1}).Prompt
	b := decodeBody(t, prompt{input: 8, output: 1, seed: 2}).Prompt
	if a[0] == b[0] && a[1] == b[1] {
		t.Errorf("prompts of seeds 1 and 2 open alike: %v, %v", a, b)
	}
}

// samePositions counts the positions at which a and b hold the same token.
func samePositions(a, b []int) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			n++
		}
	}
	return n
}

func TestSeedsAreUnique(t *testing.T) {
	var sd seeds
	seen := map[uint64]bool{}
	for range 10000 {
		s := sd.next()
		if seen[s] {
			t.Fatalf("seed %d handed out twice", s)
		}
		seen[s] = true
	}
}
