package sidecar

import (
	"io"
	"net/http"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/report"
)

// The calibration inside the sidecar: the measurement of `slogate calibrate`, run
// against the engine directly (it must offer rates past the knee, which admission would
// refuse), planned from the tiers in force, and applied through admission's reload path
// or only reported for review.

// calibrationJitter spreads scheduled calibrations of replicas that started together.
const calibrationJitter = 0.1

// newCalibrator schedules calibrations when Config.Calibrate is set (check has vetted
// its settings): against the engine directly, planned from the tiers in force, applied
// through admission's reload path with Config.CalibrateApply.
func (s *Sidecar) newCalibrator() {
	if !s.cfg.Calibrate {
		return
	}
	var apply func(admission.Config) error
	if s.cfg.CalibrateApply {
		apply = func(cfg admission.Config) error {
			if err := s.admission.Reload(cfg); err != nil {
				return err
			}
			s.log.Info("calibrated limits in force; a reload of the tiers file replaces them")
			return nil
		}
	}
	s.calibration = calibrate.NewSchedule(calibrate.ScheduleConfig{
		Target: s.cfg.Endpoint.Target(),
		Tiers:  s.admission.Config,
		SLO:    s.cfg.Objective(),
		Output: s.cfg.CalibrateOutput, Round: s.cfg.CalibrateRound,
		Engine: func() string { return s.scraper.Latest().Kind.String() },
		Apply:  apply, Interval: s.cfg.CalibrateInterval, Jitter: calibrationJitter,
		Guard: s.work.guard("calibration", true), Logger: s.log,
	})
}

// Calibration implements exporter.CalibrationSource.
func (s *Sidecar) Calibration() exporter.CalibrationSnapshot {
	st := s.calibration.Status()
	c := exporter.CalibrationSnapshot{
		Running: st.Running, Runs: st.Runs, Held: st.Held, LastStart: st.LastStart, LastOK: st.LastErr == "",
	}
	o, ok := s.calibration.Latest()
	if !ok {
		return c
	}
	c.Finished, c.Applied = o.Result.Finished, o.Applied
	knees := map[string]float64{}
	for _, t := range o.Result.Tiers {
		knees[t.Tier] = t.KneeRate
	}
	for _, t := range o.Calibrated() {
		change, _ := o.KneeChange(t.Name)
		c.Tiers = append(c.Tiers, exporter.CalibrationTier{
			Name: t.Name, Knee: knees[t.Name], KneeChange: change, Rate: t.Rate, Burst: t.Burst,
			MaxInFlight: t.MaxInFlight, MaxQueue: t.MaxQueue, MaxQueueWait: time.Duration(t.MaxQueueWait),
		})
	}
	return c
}

// calibrationRoutes adds the calibration's admin endpoints: POST /-/calibrate to
// calibrate now, the tiers file of the latest calibration, and each tier's curve in
// the prober's three report forms.
func (s *Sidecar) calibrationRoutes(mux *http.ServeMux) {
	const off = "the sidecar does not calibrate (--calibrate is not set)"
	mux.HandleFunc("POST /-/calibrate", s.mutating(func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case s.calibration == nil:
			http.Error(w, off, http.StatusBadRequest)
		case !s.calibration.Trigger():
			http.Error(w, "a calibration is already running or about to", http.StatusConflict)
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, "calibration started\n")
		}
	}))
	latest := func(w http.ResponseWriter) (calibrate.Outcome, bool) {
		if s.calibration == nil {
			http.Error(w, off, http.StatusNotFound)
			return calibrate.Outcome{}, false
		}
		o, ok := s.calibration.Latest()
		if !ok {
			http.Error(w, "no calibration has finished yet", http.StatusNotFound)
		}
		return o, ok
	}
	mux.HandleFunc("GET /calibration/tiers.yaml", func(w http.ResponseWriter, _ *http.Request) {
		o, ok := latest(w)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		if err := calibrate.WriteConfig(w, o.Config, o.Result); err != nil {
			s.log.Error("writing the calibrated tiers", "err", err)
		}
	})
	mux.HandleFunc("GET /calibration/{tier}/{file}", func(w http.ResponseWriter, r *http.Request) {
		form, known := report.FormOf(r.PathValue("file"))
		if !known {
			http.Error(w, "want report.json, report.md or report.html", http.StatusNotFound)
			return
		}
		o, ok := latest(w)
		if !ok {
			return
		}
		for _, rep := range o.Result.Reports() {
			if rep.Workload.Name == "calibration-"+r.PathValue("tier") {
				w.Header().Set("Content-Type", form.ContentType)
				if err := form.Write(w, rep); err != nil {
					s.log.Error("writing the calibration report", "err", err)
				}
				return
			}
		}
		http.Error(w, "the latest calibration has no tier "+r.PathValue("tier"), http.StatusNotFound)
	})
}

// Sustainable returns each tier's calibrated sustainable rate λ* (requests/s) in force,
// by tier name: from the latest calibration the sidecar ran when it calibrates, else
// from the calibration the tiers in force record (slogate calibrate writes it). Tiers
// without a measured knee are absent; the map is empty without admission or without a
// calibration. Safe for concurrent use.
func (s *Sidecar) Sustainable() map[string]float64 {
	if s.calibration != nil {
		if o, ok := s.calibration.Latest(); ok {
			return o.Result.Knees()
		}
	}
	if s.admission == nil {
		return map[string]float64{}
	}
	if o, ok := calibrate.FromConfig(s.admission.Config()); ok {
		return o.Result.Knees()
	}
	return map[string]float64{}
}
