package sidecar

import (
	"fmt"
	"io"
	"net/http"

	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// The scheduled prober: it probes through the sidecar's own data listener with the probe
// priority class, so admission admits it only from headroom and the live metrics never
// count it, and the arbiter holds it back while live traffic or a calibration needs the
// engine.

// probeWorkload returns the workload to schedule: w when given, else the one cfg names
// (its quick variant with Config.ProbeQuick), or nil for none.
func probeWorkload(cfg Config, w *synth.Workload) (*synth.Workload, error) {
	if w != nil || cfg.ProbeWorkload == "" {
		return w, nil
	}
	named, err := synth.FindWorkload(cfg.ProbeWorkload)
	if err != nil {
		return nil, fmt.Errorf("--probe-workload: %w", err)
	}
	if cfg.ProbeQuick {
		named = named.Quick()
	}
	return &named, nil
}

// newProber schedules w against the sidecar's own data listener, with the engine's API
// key (the proxy forwards it, as it does a client's); none for a nil w.
func (s *Sidecar) newProber(w *synth.Workload) {
	if w == nil {
		return
	}
	s.prober = synth.NewSchedule(synth.ScheduleConfig{
		Target: &synth.Target{ // the model is read from /v1/models
			BaseURL: "http://" + s.Addr().String(), APIKey: s.cfg.UpstreamAPIKey, Header: http.Header{proxy.ProbeKeyHeader: {s.probeKey}},
		},
		Workload: *w, Interval: s.cfg.ProbeInterval, Jitter: s.cfg.ProbeJitter,
		Guard: s.work.guard("probe", false), Logger: s.log, Clock: s.clock,
		OnReport: s.storeProbe,
	})
}

// probeSource reads the prober for the exporter.
type probeSource struct{ s *Sidecar }

// Probe implements exporter.ProbeSource.
func (ps probeSource) Probe() exporter.ProbeSnapshot {
	sched := ps.s.prober
	st := sched.Status()
	p := exporter.ProbeSnapshot{
		Workload: sched.Workload().Name, Running: st.Running, Runs: st.Runs, Held: st.Held,
		LastStart: st.LastStart, LastEnd: st.LastEnd, LastOK: st.LastErr == "",
	}
	rep, run, ok := ps.s.latestProbe()
	if ok {
		AddReport(&p, rep)
	}
	if run != nil {
		for _, c := range run.Changes {
			p.Compared = append(p.Compared, exporter.ProbeComparison{Row: c.Row, Load: c.Load, Figure: c.Figure, Regressed: c.Regressed})
		}
	}
	return p
}

// AddReport adds the cells and gate checks of rep to p.
func AddReport(p *exporter.ProbeSnapshot, rep synth.Report) {
	for _, c := range rep.Cells {
		p.Cells = append(p.Cells, exporter.ProbeCell{
			Row: c.Row, Load: c.Load(), State: string(c.State), Throughput: c.Throughput,
			TTFTp50: c.TTFTp50, TTFTp95: c.TTFTp95, TPOTp95: c.TPOTp95, SuccessRate: c.SuccessRate,
		})
	}
	for _, g := range rep.Gate {
		p.Gate = append(p.Gate, exporter.ProbeCheck{Name: g.Name, Verdict: string(g.Verdict)})
	}
}

// probeRoutes adds the prober's admin endpoints: the latest report in its three forms,
// POST /-/probe to probe now, and the probe history's (history.go).
func (s *Sidecar) probeRoutes(mux *http.ServeMux) {
	s.historyRoutes(mux)
	for _, form := range report.Forms {
		mux.HandleFunc("GET /probe/report."+form.Ext, func(w http.ResponseWriter, _ *http.Request) {
			sched := s.prober
			if sched == nil {
				http.Error(w, "no probe is scheduled (--probe-workload is not set)", http.StatusNotFound)
				return
			}
			rep, _, ok := s.latestProbe()
			if !ok {
				http.Error(w, "no probe has finished yet", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", form.ContentType)
			if err := form.Write(w, rep); err != nil {
				s.log.Error("writing the probe report", "err", err)
			}
		})
	}
	mux.HandleFunc("POST /-/probe", s.mutating(func(w http.ResponseWriter, _ *http.Request) {
		sched := s.prober
		switch {
		case sched == nil:
			http.Error(w, "no probe is scheduled (--probe-workload is not set)", http.StatusBadRequest)
		case !sched.Trigger():
			http.Error(w, "a probe is already running or about to", http.StatusConflict)
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, "probe started\n")
		}
	}))
}
