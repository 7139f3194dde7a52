package report

import (
	"io"
	"testing"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
)

// FuzzCalibrationReports feeds arbitrary tiers files to the path by which a recorded
// calibration reaches the sidecar's views of it (admission.ParseConfig,
// calibrate.FromConfig, Result.Reports, then the report writers, as /calibration/ and
// the status page serve them): every writer renders every tier's report without error
// (WriteJSON excepted, which fails on a non-finite figure, as it should), and a report
// marks a knee exactly where the calibration chose one.
func FuzzCalibrationReports(f *testing.F) {
	const tiers = "tiers: [{name: a, max_in_flight: 1}]\n"
	for _, s := range []string{
		// A knee at 2 req/s between a sustained and an overloaded rate.
		"calibration: {finished: 2024-01-02T03:04:05Z, tiers: [{tier: a, shape: {name: a, input: 8, output: 4}, slo: {ttft: 2s}, reference_rps: 2.5, " +
			"knee: 1, knee_rps: 2, rule: r, points: [{offered_rps: 1, throughput_rps: 1, completion: 1, ttft_p95: 500ms}, " +
			"{offered_rps: 2, throughput_rps: 1.9, completion: 1, ttft_p95: 1s}, {offered_rps: 3, throughput_rps: 2, completion: 0.9, ttft_p95: 9s}]}]}\n",
		// No rate sustained: the report must mark none.
		"calibration: {finished: 2024-01-02T03:04:05Z, tiers: [{tier: a, knee: 0, knee_rps: 1}, {tier: a, knee: -1, rule: none, " +
			"points: [{offered_rps: 1, throughput_rps: 0.5, completion: 0.5}]}]}\n",
		// Figures no measurement gives.
		"calibration: {finished: 2024-01-02T03:04:05Z, tiers: [{tier: a, knee: 0, knee_rps: 1}, {tier: a, knee: 0, knee_rps: .nan, " +
			"points: [{offered_rps: .inf, throughput_rps: .nan, ttft_p95: -1s}]}]}\n",
	} {
		f.Add([]byte(tiers + s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := admission.ParseConfig(data)
		if err != nil {
			return
		}
		o, ok := calibrate.FromConfig(cfg)
		if !ok {
			return
		}
		for i, rep := range o.Result.Reports() {
			_ = WriteJSON(io.Discard, rep)
			renderAll(t, rep)
			tier := o.Result.Tiers[i]
			chose := tier.Knee >= 0 && tier.KneeRate > 0 && len(rep.Cells) > 0
			if k, sentence := scanKnee(rep); (k >= 0) != chose {
				t.Fatalf("tier %q (knee %d at %v req/s, %d points): the report marks cell %d (%q)", tier.Tier, tier.Knee, tier.KneeRate, len(tier.Points), k, sentence)
			}
		}
	})
}
