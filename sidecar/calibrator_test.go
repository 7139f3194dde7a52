package sidecar

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// TestSidecarCalibration: POST /-/calibrate measures the tier's knee against the engine
// and publishes the tiers file it derives, the per-tier report and the metrics; with
// --calibrate-apply the limits are in force afterwards, without it the guessed ones stay.
func TestSidecarCalibration(t *testing.T) {
	// An engine of four sequences at 20 ms a token: 8-token requests take ~0.2 s, so it
	// completes about 20 requests/s, and its knee is within reach of one-second rounds.
	p, _ := enginesim.LookupProfile("tiny")
	p.MaxNumSeqs, p.Timing = 4, enginesim.Timing{StepBase: 0.02}
	for _, apply := range []bool{true, false} {
		name := map[bool]string{true: "apply", false: "report only"}[apply]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "tiers.yaml")
			if err := os.WriteFile(file, []byte(simtest.GuessedTiers), 0o644); err != nil {
				t.Fatal(err)
			}
			ts := startTestSidecarOn(t, p, func(cfg *Config) {
				cfg.TiersFile, cfg.Admission = file, "enforce"
				cfg.Calibrate, cfg.CalibrateApply = true, apply
				cfg.CalibrateRound, cfg.CalibrateOutput = time.Second, 8
				cfg.SLOTTFT = 400 * time.Millisecond
			})
			if code := simtest.Status(ts.admin + "/calibration/tiers.yaml"); code != http.StatusNotFound {
				t.Fatalf("tiers.yaml before any calibration: %d, want 404", code)
			}
			if code := simtest.Post(t, ts.admin+"/-/calibrate"); code != http.StatusAccepted {
				t.Fatalf("POST /-/calibrate: %d, want 202", code)
			}
			waitFor(t, "the calibration to start", func() bool { return ts.sc.calibration.Status().Running })
			if code := simtest.Post(t, ts.admin+"/-/calibrate"); code != http.StatusConflict {
				t.Errorf("POST /-/calibrate while one runs: %d, want 409", code)
			}
			simtest.WaitFor(t, "the calibration to finish", 2*time.Minute, func() bool { return !ts.sc.calibration.Status().Running })
			if st := ts.sc.calibration.Status(); st.Runs != 1 || st.LastErr != "" {
				t.Fatalf("calibration status %+v, want one run without error", st)
			}
			o, _ := ts.sc.calibration.Latest()
			tier := o.Result.Tiers[0]
			if tier.Knee < 0 || tier.KneeRate <= 0 || tier.KneeRate > 2*tier.Reference {
				t.Fatalf("knee %v req/s (reference %v req/s, rule %q), want a sustainable rate near the reference", tier.KneeRate, tier.Reference, tier.Rule)
			}

			yamlText := simtest.Get(t, ts.admin+"/calibration/tiers.yaml")
			t.Logf("published tiers file:\n%s", yamlText)
			published, err := admission.ParseConfig([]byte(yamlText))
			if err != nil {
				t.Fatalf("the published tiers file does not load: %v", err)
			}
			calibrated := published.Tiers[0]
			if calibrated.Rate <= 0 || calibrated.Rate >= tier.KneeRate || calibrated.MaxInFlight < 1 || calibrated.MaxInFlight == 64 {
				t.Errorf("published limits %+v, want a rate below the knee %v and a measured in-flight cap", calibrated, tier.KneeRate)
			}
			inForce := ts.sc.admission.Config().Tiers[0]
			if apply && inForce != calibrated {
				t.Errorf("in force %+v, want the calibrated %+v", inForce, calibrated)
			}
			if !apply && (inForce.MaxInFlight != 64 || inForce.Rate != 0) {
				t.Errorf("report only, yet in force %+v, want the guessed limits", inForce)
			}

			metrics := simtest.Get(t, ts.admin+"/metrics")
			for _, want := range []string{
				"slogate_calibration_runs_total 1", "slogate_calibration_last_success 1",
				"slogate_calibration_applied " + map[bool]string{true: "1", false: "0"}[apply],
				`slogate_calibration_knee_requests_per_second{tier="all"}`, `slogate_calibration_limit{limit="max_in_flight",tier="all"}`,
				"slogate_calibration_timestamp_seconds",
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if html := simtest.Get(t, ts.admin+"/calibration/all/report.html"); !strings.Contains(html, "knee") {
				t.Errorf("the tier's HTML report does not mark the knee")
			}
			for path, code := range map[string]int{"/calibration/none/report.html": 404, "/calibration/all/report.pdf": 404, "/calibration/all/report.md": 200} {
				if got := simtest.Status(ts.admin + path); got != code {
					t.Errorf("GET %s: %d, want %d", path, got, code)
				}
			}
		})
	}
}

// TestCalibrationOff: without --calibrate, the endpoints say so and no metrics appear.
func TestCalibrationOff(t *testing.T) {
	ts := startTestSidecarWith(t, func(*Config) {})
	if code := simtest.Post(t, ts.admin+"/-/calibrate"); code != http.StatusBadRequest {
		t.Errorf("POST /-/calibrate: %d, want 400", code)
	}
	if code := simtest.Status(ts.admin + "/calibration/tiers.yaml"); code != http.StatusNotFound {
		t.Errorf("GET /calibration/tiers.yaml: %d, want 404", code)
	}
	if strings.Contains(simtest.Get(t, ts.admin+"/metrics"), "slogate_calibration_") {
		t.Errorf("/metrics has calibration series without --calibrate")
	}
}
