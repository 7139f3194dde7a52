package calibrate

import (
	"maps"
	"testing"
	"testing/synctest"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simnet"
	"github.com/slogate/slogate/synth"
)

// TestRecordsEngine: a calibration records how the engine ran, and each tier's report
// carries it. The plan has no tier: only the engine is read. On virtual time.
func TestRecordsEngine(t *testing.T) {
	for _, flavor := range []enginesim.Flavor{enginesim.FlavorVLLM, enginesim.FlavorSGLang} {
		t.Run(string(flavor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := enginesim.LookupProfile("tiny")
				if err != nil {
					t.Fatal(err)
				}
				_, hs := simnet.Start(t, enginesim.Config{Profile: p, Flavor: flavor}, nil)
				tg := &synth.Target{BaseURL: hs.URL, Model: p.Model, Client: hs.Client}
				res, err := Run(t.Context(), tg, Plan{}, string(flavor), nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.EngineVersion != "enginesim" || len(res.EngineFlags) == 0 {
					t.Errorf("engine version %q, %d flags; want enginesim and the flags it reports", res.EngineVersion, len(res.EngineFlags))
				}
			})
		})
	}
	res := calibrated(3)
	res.EngineVersion, res.EngineFlags = "0.11.0", map[string]string{"block_size": "16"}
	for _, rep := range res.Reports() {
		if rep.EngineVersion != "0.11.0" || !maps.Equal(rep.EngineFlags, res.EngineFlags) {
			t.Errorf("report %s: engine %q %v, want the calibration's", rep.Workload.Name, rep.EngineVersion, rep.EngineFlags)
		}
	}
}
