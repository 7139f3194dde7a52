package sidecar

import (
	"net/http"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	statuspage "github.com/slogate/slogate/status"
)

// The status page on the admin listener (GET /): the sidecar's parts behind the status
// package's interfaces. Admission, the engine scraper and the sidecar's own Sustainable
// (each tier's λ* in force) fit them as they are; the prober and the calibrator are read
// through the adapters below, at each request.

// statusPage returns the sidecar's status page.
func (s *Sidecar) statusPage() http.Handler {
	cfg := statuspage.Config{
		Admission: s.admission, Engine: s.scraper, Sustainable: s, Logger: s.log, Clock: s.clock,
		SLO: s.cfg.Objective(),
	}
	if s.live != nil {
		cfg.Live = s.live
	}
	if s.prober != nil {
		cfg.Probe = statusProbe{s}
	}
	if s.calibration != nil {
		cfg.Calibration = statusCalibration{s}
	}
	if s.history != nil {
		cfg.History = s.history
	}
	return statuspage.New(cfg)
}

var (
	_ statuspage.AdmissionSource   = (*admission.Controller)(nil)
	_ statuspage.EngineSource      = (*engine.Scraper)(nil)
	_ statuspage.SustainableSource = (*Sidecar)(nil)
)

// statusProbe reads the scheduled prober for the status page.
type statusProbe struct{ s *Sidecar }

var _ statuspage.ProbeSource = statusProbe{}

func (a statusProbe) Probe() statuspage.Probe {
	sched := a.s.prober
	p := statuspage.Probe{Workload: sched.Workload().Name, Status: sched.Status()}
	if rep, _, ok := a.s.latestProbe(); ok {
		p.Report = &rep
	}
	return p
}

// statusCalibration reads the scheduled calibration for the status page.
type statusCalibration struct{ s *Sidecar }

var _ statuspage.CalibrationSource = statusCalibration{}

func (a statusCalibration) Calibration() statuspage.Calibration {
	c := statuspage.Calibration{Status: a.s.calibration.Status()}
	if o, ok := a.s.calibration.Latest(); ok {
		c.Outcome = &o
	}
	return c
}
