package main

import (
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/measure"
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

// The summary shows each tier's bound on prompts in prefill and the prefill rate it
// comes from; a tier whose rate is unknown has none.
func TestPrintCalibrationPrefill(t *testing.T) {
	slo := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	res := calibrate.Result{Tiers: []calibrate.TierResult{
		{Tier: "8k", Shape: synth.Shape{Input: 8192, Output: 128}, SLO: slo, Prefill: 15745, KneeRate: 1.3,
			Limits: &admission.TierConfig{Name: "8k", MaxInFlight: 20, MaxPrefillTokens: 70852}},
		{Tier: "long", Shape: synth.Shape{Input: 16384, Output: 128}, SLO: slo, KneeRate: 0.6,
			Limits: &admission.TierConfig{Name: "long", MaxInFlight: 4}},
	}}
	var b strings.Builder
	printCalibration(&b, res, "tiers.yaml")
	got := b.String()
	for _, want := range []string{
		"prefill  rule",
		"8k: the engine prefills its prompts at 15745 tokens/s; max_prefill_tokens 70852 is 0.9 × its TTFT SLO 5s of them",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("printed:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "long: the engine prefills") {
		t.Errorf("printed a prefill rate for tier long, which has none:\n%s", got)
	}
	if rows := strings.Fields(strings.Split(got, "\n")[3]); len(rows) < 8 || rows[0] != "long" || rows[7] != "-" {
		t.Errorf("tier long's row %q: want - in the prefill column", rows)
	}
}
