package calibrate

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/synth"
)

// The prefill rounds measure the simulated engine's prefill rate, which its timing
// model fixes: a chunked prefill of MaxBatchedTokens a step, each step StepBase plus
// PerPrefillToken a token (plus an attention term too small to matter here). Between
// prompts that span several steps the difference counts the extra steps' overheads,
// and the rate is the chunked one, a step's tokens over its time; between prompts that
// both fit in one step (2048 and 512 tokens) only the tokens differ, and the rate is the
// per-token one, 10% above. A rate taken from one prompt's TTFT alone would count the
// API server's latency and the first token's step as prefill and come out lower, more so
// the shorter the prompt; the difference of two lengths does not. On virtual time.
func TestPrefillRate(t *testing.T) {
	p, err := enginesim.LookupProfile("h20x8-flash")
	if err != nil {
		t.Fatal(err)
	}
	chunk := float64(p.MaxBatchedTokens)
	for _, input := range []int{2048, 8192, 16384} {
		model := chunk / (p.Timing.StepBase + chunk*p.Timing.PerPrefillToken) // tokens/s
		if input <= p.MaxBatchedTokens {
			model = 1 / p.Timing.PerPrefillToken
		}
		synctest.Test(t, func(t *testing.T) {
			c := &run{t: startSim(t, p), plan: Plan{PrefillRound: 20 * time.Second}.withDefaults()}
			got := c.prefillRate(t.Context(), synth.Shape{Name: "x", Input: input, Output: 128})
			if math.Abs(got/model-1) > 0.05 {
				t.Errorf("%d-token prompts: prefill rate %.0f tokens/s, the model's %.0f", input, got, model)
			}
			// What one length's TTFT alone would say, for comparison.
			r := c.t.ClosedRound(t.Context(), synth.Shape{Name: "x", Input: input, Output: 1}, 1, 20*time.Second)
			t.Logf("%d tokens: measured %.0f tokens/s (model %.0f); from its TTFT alone %.0f", input, got, model, float64(input)/r.TTFTp50)
		})
	}
	t.Run("too short to tell", func(t *testing.T) {
		c := &run{plan: Plan{}.withDefaults()}
		if got := c.prefillRate(t.Context(), synth.Shape{Input: 4, Output: 1}); got != 0 {
			t.Errorf("a 4-token prompt: %v, want 0 (unknown)", got)
		}
	})
}
