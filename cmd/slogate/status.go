package main

import (
	"net/http"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	statuspage "github.com/slogate/slogate/status" // serve_test.go has a func status
)

// The status page on the admin listener (GET /): the sidecar's parts behind the status
// package's interfaces. Admission and the engine scraper fit them as they are; the
// prober and the calibrator are read through the adapters below, at each request, since
// their schedules start only when the sidecar runs.

// statusPage returns the sidecar's status page.
func (s *sidecar) statusPage() http.Handler {
	cfg := statuspage.Config{
		Admission: s.admission, Engine: s.scraper, Logger: s.log,
		SLO: admission.SLO{TTFT: admission.Duration(s.cfg.SLOTTFT), TPOT: admission.Duration(s.cfg.SLOTPOT)},
	}
	if s.live != nil {
		cfg.Live = s.live
	}
	if s.probeWorkload != nil {
		cfg.Probe = statusProbe{s}
	}
	if s.calibration != nil {
		cfg.Calibration = statusCalibration{s}
	}
	return statuspage.New(cfg)
}

var (
	_ statuspage.AdmissionSource = (*admission.Controller)(nil)
	_ statuspage.EngineSource    = (*engine.Scraper)(nil)
)

// statusProbe reads the scheduled prober for the status page.
type statusProbe struct{ s *sidecar }

var _ statuspage.ProbeSource = statusProbe{}

func (a statusProbe) Probe() statuspage.Probe {
	p := statuspage.Probe{Workload: a.s.probeWorkload.Name}
	sched := a.s.prober.Load()
	if sched == nil {
		return p // not started yet
	}
	p.Status = sched.Status()
	if rep, ok := sched.Latest(); ok {
		p.Report = &rep
	}
	return p
}

// statusCalibration reads the scheduled calibration for the status page.
type statusCalibration struct{ s *sidecar }

var _ statuspage.CalibrationSource = statusCalibration{}

func (a statusCalibration) Calibration() statuspage.Calibration {
	c := statuspage.Calibration{Status: a.s.calibration.Status()}
	if o, ok := a.s.calibration.Latest(); ok {
		c.Outcome = &o
	}
	return c
}
