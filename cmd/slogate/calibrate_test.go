package main

import (
	"strings"
	"testing"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/synth"
)

// TestPrintCalibrationLongPrefill: a calibration whose tiers span short and very long
// prompts prints vLLM's --long-prefill-token-threshold with its reason; one of similar
// lengths does not.
func TestPrintCalibrationLongPrefill(t *testing.T) {
	tier := func(name string, bound, in int) calibrate.TierResult {
		return calibrate.TierResult{Tier: name, Shape: synth.Shape{Input: in, Output: 64}, Knee: 0,
			Points: []calibrate.Point{{Offered: 1, Throughput: 1}}, KneeRate: 1, Limits: &admission.TierConfig{Name: name, MaxInputTokens: bound, MaxInFlight: 1}}
	}
	for _, tc := range []struct {
		tiers []calibrate.TierResult
		want  string
	}{
		{[]calibrate.TierResult{tier("short", 2048, 1536), tier("xlong", 0, 98304)}, "vllm serve ... --long-prefill-token-threshold 2048\n  tier xlong's 98304-token prompts are 48 times tier short's bound of 2048"},
		{[]calibrate.TierResult{tier("8k", 10923, 8192), tier("16k", 0, 16384)}, ""},
	} {
		var b strings.Builder
		printCalibration(&b, calibrate.Result{Tiers: tc.tiers}, "tiers.yaml")
		if got := b.String(); tc.want != "" && !strings.Contains(got, tc.want) || tc.want == "" && strings.Contains(got, "long-prefill") {
			t.Errorf("printed:\n%s\nwant %q", got, tc.want)
		}
	}
}
