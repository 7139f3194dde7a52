package exporter

import (
	"testing"
	"time"
)

// calibrationSnapshot is a fixed CalibrationSource.
type calibrationSnapshot CalibrationSnapshot

func (c calibrationSnapshot) Calibration() CalibrationSnapshot { return CalibrationSnapshot(c) }

func TestCalibrationGauges(t *testing.T) {
	tests := []struct {
		name   string
		src    calibrationSnapshot
		want   map[string]float64
		absent []string
	}{{
		name: "never calibrated",
		src:  calibrationSnapshot{},
		want: map[string]float64{
			`slogate_calibration_running`:    0,
			`slogate_calibration_runs_total`: 0,
			`slogate_calibration_held_total`: 0,
		},
		absent: []string{`slogate_calibration_timestamp_seconds`, `slogate_calibration_last_success`, `slogate_calibration_applied`},
	}, {
		name: "recorded in the tiers file, running now",
		src: calibrationSnapshot{
			Running: true, LastStart: time.Unix(1700000100, 0), Finished: time.Unix(1700000000, 0), Applied: true,
			Tiers: []CalibrationTier{{Name: "short", Knee: 2.5, Rate: 2.25, Burst: 3, MaxInFlight: 12, MaxQueue: 4, MaxQueueWait: 1500 * time.Millisecond}},
		},
		want: map[string]float64{
			`slogate_calibration_running`:                                            1,
			`slogate_calibration_last_start_timestamp_seconds`:                       1700000100,
			`slogate_calibration_last_success`:                                       0,
			`slogate_calibration_timestamp_seconds`:                                  1700000000,
			`slogate_calibration_applied`:                                            1,
			`slogate_calibration_knee_requests_per_second{tier="short"}`:             2.5,
			`slogate_calibration_limit{limit="rate",tier="short"}`:                   2.25,
			`slogate_calibration_limit{limit="burst",tier="short"}`:                  3,
			`slogate_calibration_limit{limit="max_in_flight",tier="short"}`:          12,
			`slogate_calibration_limit{limit="max_queue",tier="short"}`:              4,
			`slogate_calibration_limit{limit="max_queue_wait_seconds",tier="short"}`: 1.5,
		},
		absent: []string{`slogate_calibration_knee_change_ratio{tier="short"}`},
	}, {
		name: "reported only, knee moved",
		src: calibrationSnapshot{
			Runs: 2, Held: 1, LastStart: time.Unix(1700000100, 0), LastOK: true, Finished: time.Unix(1700000500, 0),
			Tiers: []CalibrationTier{{Name: "long", Knee: 0.4, KneeChange: 0.8, Rate: 0.36, Burst: 1, MaxInFlight: 2, MaxQueue: 1, MaxQueueWait: time.Second}},
		},
		want: map[string]float64{
			`slogate_calibration_runs_total`:                            2,
			`slogate_calibration_held_total`:                            1,
			`slogate_calibration_last_success`:                          1,
			`slogate_calibration_applied`:                               0,
			`slogate_calibration_knee_change_ratio{tier="long"}`:        0.8,
			`slogate_calibration_knee_requests_per_second{tier="long"}`: 0.4,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, reg := newMetrics(t, Options{Calibration: tt.src})
			got := samples(t, reg, "slogate_calibration_")
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
				}
			}
			for _, k := range tt.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s is exported, want it absent", k)
				}
			}
			checkLint(t, reg)
		})
	}
}
