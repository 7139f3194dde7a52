package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// The scheduled prober inside `slogate serve`: it probes through slogate's own listener
// with the probe priority class, so admission admits it only from headroom and the live
// metrics never count it, and it holds back while live traffic needs the engine.

// loadProber reads the probe workload of the settings; the prober starts with run.
func (s *sidecar) loadProber() error {
	if s.cfg.ProbeWorkload == "" {
		return nil
	}
	w, err := loadWorkload(s.cfg.ProbeWorkload)
	if err != nil {
		return err
	}
	if s.cfg.ProbeQuick {
		w = w.Quick()
	}
	if !(s.cfg.ProbeMaxLoad > 0 && s.cfg.ProbeMaxLoad <= 1) || s.cfg.ProbeJitter < 0 || s.cfg.ProbeJitter > 1 {
		return fmt.Errorf("--probe-max-load must be in (0,1] and --probe-jitter in [0,1]")
	}
	s.probeWorkload = &w
	return nil
}

// startProber schedules the probe workload against slogate's own data listener, with
// the engine's API key (the proxy forwards it, as it does a client's).
func (s *sidecar) startProber(ctx context.Context, dataAddr string) {
	if s.probeWorkload == nil {
		return
	}
	sched := synth.NewSchedule(synth.ScheduleConfig{
		Target: &synth.Target{ // the model is read from /v1/models
			BaseURL: "http://" + dataAddr, APIKey: s.cfg.UpstreamAPIKey, Header: http.Header{proxy.ProbeKeyHeader: {s.probeKey}},
		},
		Workload: *s.probeWorkload, Interval: s.cfg.ProbeInterval, Jitter: s.cfg.ProbeJitter,
		Guard: s, Logger: s.log,
	})
	s.prober.Store(sched)
	sched.Run(ctx)
}

// Busy implements synth.Guard: probes hold back while a calibration runs, and while
// live traffic needs the engine (see liveBusy).
func (s *sidecar) Busy() (bool, string) {
	if s.calibration != nil && s.calibration.Status().Running {
		return true, "a calibration is running"
	}
	return s.liveBusy(true)
}

// liveBusy reports whether live traffic needs the engine: when it holds more than
// --probe-max-load of the KV cache, when a tier's p95 TTFT is over its SLO, or (with
// engine set) when admission sees the engine saturated or down.
func (s *sidecar) liveBusy(engineState bool) (bool, string) {
	snap := s.scraper.Latest()
	if _, kv := s.proxy.LiveInFlight(); engine.Known(snap.KVCapacityTokens) && snap.KVCapacityTokens > 0 {
		if share := float64(kv) / snap.KVCapacityTokens; share > s.cfg.ProbeMaxLoad {
			return true, fmt.Sprintf("live requests hold %.0f%% of the KV cache", 100*share)
		}
	}
	st := s.admission.Stats()
	if engineState && st.Engine != admission.NoReason {
		return true, "the engine is " + st.Engine.String()
	}
	for _, t := range st.Tiers {
		if slo := time.Duration(t.SLO.TTFT); t.P95TTFT > 0 && slo > 0 && t.P95TTFT > slo {
			return true, fmt.Sprintf("tier %s: p95 TTFT %s over its SLO %s", t.Name, t.P95TTFT, slo)
		}
	}
	return false, ""
}

// Probe implements exporter.ProbeSource.
func (s *sidecar) Probe() exporter.ProbeSnapshot {
	sched := s.prober.Load()
	if sched == nil {
		return exporter.ProbeSnapshot{Workload: s.probeWorkload.Name}
	}
	st := sched.Status()
	p := exporter.ProbeSnapshot{
		Workload: s.probeWorkload.Name, Running: st.Running, Runs: st.Runs, Held: st.Held,
		LastStart: st.LastStart, LastEnd: st.LastEnd, LastOK: st.LastErr == "",
	}
	if rep, ok := sched.Latest(); ok {
		addReport(&p, rep)
	}
	return p
}

// addReport adds the cells and gate checks of rep to p.
func addReport(p *exporter.ProbeSnapshot, rep synth.Report) {
	for _, c := range rep.Cells {
		load := strconv.Itoa(c.Concurrency)
		if c.Multiple > 0 {
			load = strconv.FormatFloat(c.Multiple, 'f', -1, 64) + "x"
		}
		p.Cells = append(p.Cells, exporter.ProbeCell{
			Row: c.Row, Load: load, State: string(c.State), Throughput: c.Throughput,
			TTFTp50: c.TTFTp50, TTFTp95: c.TTFTp95, TPOTp95: c.TPOTp95, SuccessRate: c.SuccessRate,
		})
	}
	for _, g := range rep.Gate {
		p.Gate = append(p.Gate, exporter.ProbeCheck{Name: g.Name, Verdict: string(g.Verdict)})
	}
}

// probeRoutes adds the prober's admin endpoints: the latest report in its three forms,
// and POST /-/probe to probe now.
func (s *sidecar) probeRoutes(mux *http.ServeMux) {
	for ext, write := range map[string]func(io.Writer, synth.Report) error{
		"json": report.WriteJSON, "md": report.WriteMarkdown, "html": report.WriteHTML,
	} {
		mux.HandleFunc("GET /probe/report."+ext, func(w http.ResponseWriter, _ *http.Request) {
			sched := s.prober.Load()
			if sched == nil {
				http.Error(w, "no probe is scheduled (--probe-workload is not set)", http.StatusNotFound)
				return
			}
			rep, ok := sched.Latest()
			if !ok {
				http.Error(w, "no probe has finished yet", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", map[string]string{"json": "application/json", "md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8"}[ext])
			if err := write(w, rep); err != nil {
				s.log.Error("writing the probe report", "err", err)
			}
		})
	}
	mux.HandleFunc("POST /-/probe", s.mutating(func(w http.ResponseWriter, _ *http.Request) {
		sched := s.prober.Load()
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
