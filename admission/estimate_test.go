package admission

import (
	"fmt"
	"math"
	"testing"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		p    wire.PromptSize
		want int
	}{
		{name: "empty", p: wire.PromptSize{}, want: 0},
		{name: "token ids: exact", p: wire.PromptSize{TokenIDs: 12345, Prompts: 1}, want: 12345},
		{name: "text at 4 bytes per token", p: wire.PromptSize{TextBytes: 4000}, want: 1000},
		{name: "text rounds up", p: wire.PromptSize{TextBytes: 4001}, want: 1001},
		{name: "one byte is a token", p: wire.PromptSize{TextBytes: 1}, want: 1},
		{name: "token ids and text", p: wire.PromptSize{TokenIDs: 10, TextBytes: 40}, want: 20},
		{name: "non-text parts are not counted", p: wire.PromptSize{TextBytes: 8, Parts: 3}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e estimator
			if got := e.tokens("m", tt.p); got != tt.want {
				t.Fatalf("tokens = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestEstimateLearn(t *testing.T) {
	text := func(n int) wire.PromptSize { return wire.PromptSize{TextBytes: n, Prompts: 1} }
	type obs struct {
		p     wire.PromptSize
		usage int
	}
	tests := []struct {
		name string
		obs  []obs
		want float64 // bytes per token of model "m" afterwards
	}{
		{name: "nothing learned: default", want: 4},
		{name: "the first observation sets the ratio", obs: []obs{{text(3000), 1000}}, want: 3},
		{name: "then an EWMA of weight 0.1", obs: []obs{{text(3000), 1000}, {text(5000), 1000}}, want: 0.9*3 + 0.1*5},
		{name: "repeated observations converge", obs: repeat(obs{text(2000), 1000}, 50), want: 2},
		{name: "token ids are subtracted from the usage", obs: []obs{{wire.PromptSize{TokenIDs: 500, TextBytes: 1500}, 1000}}, want: 3},
		{name: "ratio clamped to 1", obs: []obs{{text(10), 1000}}, want: 1},
		{name: "ratio clamped to 16", obs: []obs{{text(100000), 10}}, want: 16},
		{name: "no text: ignored", obs: []obs{{wire.PromptSize{TokenIDs: 10}, 10}}, want: 4},
		{name: "usage at or below the token ids: ignored", obs: []obs{{wire.PromptSize{TokenIDs: 10, TextBytes: 100}, 10}}, want: 4},
		{name: "no usage: ignored", obs: []obs{{text(100), 0}}, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e estimator
			for _, o := range tt.obs {
				e.learn("m", o.p, o.usage)
			}
			if got := e.bytesPerToken("m"); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("bytes per token %v, want %v", got, tt.want)
			}
			if got := e.bytesPerToken("other"); got != defaultBytesPerToken {
				t.Fatalf("another model's ratio is %v", got)
			}
		})
	}
}

func repeat[T any](x T, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = x
	}
	return s
}

func TestEstimateBoundedModels(t *testing.T) {
	var e estimator
	for i := range maxLearnedModels + 10 {
		e.learn(fmt.Sprint("model-", i), wire.PromptSize{TextBytes: 200}, 100)
	}
	if len(e.bpt) != maxLearnedModels {
		t.Fatalf("%d models learned, want at most %d", len(e.bpt), maxLearnedModels)
	}
	if got := e.bytesPerToken(fmt.Sprint("model-", maxLearnedModels)); got != defaultBytesPerToken {
		t.Fatalf("a model past the bound learned %v", got)
	}
	e.learn("model-0", wire.PromptSize{TextBytes: 1200}, 100) // known models keep learning
	if got := e.bytesPerToken("model-0"); math.Abs(got-(0.9*2+0.1*12)) > 1e-9 {
		t.Fatalf("model-0: %v", got)
	}
}

// Done teaches the estimator the usage the engine reported, which moves later requests
// of the model between tiers.
func TestDoneLearnsEstimate(t *testing.T) {
	cfg := Config{Tiers: []TierConfig{
		{Name: "small", MaxInputTokens: 100, MaxInFlight: 10},
		{Name: "big", MaxInFlight: 10},
	}}
	h := newHarness(t, Enforce, cfg)
	r := Request{Model: "m", Prompt: wire.PromptSize{TextBytes: 600, Prompts: 1}}
	tk := h.admitNow(r)
	if tk.Tier() != "big" || tk.EstimatedTokens() != 150 {
		t.Fatalf("first: %d tokens in %q, want 150 in big", tk.EstimatedTokens(), tk.Tier())
	}
	tk.Done(measure.Result{Outcome: measure.OK, InputTokens: 100}) // 6 bytes per token
	tk = h.admitNow(r)
	defer tk.Done(ok)
	if tk.Tier() != "small" || tk.EstimatedTokens() != 100 {
		t.Fatalf("after learning: %d tokens in %q, want 100 in small", tk.EstimatedTokens(), tk.Tier())
	}
}
