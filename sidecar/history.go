package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/slogate/slogate/history"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// The probe history (--probe-history-dir): every report the scheduled prober keeps is
// stored, compared with the run before it, and served on the admin listener; after a
// restart the last stored run stands in for the latest report until the next probe.

// openHistory opens the probe history the settings name; none without a directory.
func (s *Sidecar) openHistory() error {
	if s.cfg.ProbeHistoryDir == "" {
		return nil
	}
	h, err := history.Open(history.Config{
		Dir: s.cfg.ProbeHistoryDir, Runs: s.cfg.ProbeHistoryRuns, Bytes: s.cfg.ProbeHistoryBytes, Logger: s.log,
	})
	if err != nil {
		return fmt.Errorf("--probe-history-dir: %w", err)
	}
	s.history = h
	return nil
}

// storeProbe stores a report the prober kept, logging what it regressed.
func (s *Sidecar) storeProbe(rep synth.Report) {
	if s.history == nil {
		return
	}
	run, err := s.history.Append(rep)
	if err != nil {
		s.log.Error("storing the probe run in the history failed; it is held in memory only", "err", err)
	}
	if reg := run.Regressions(); len(reg) > 0 {
		s.log.Warn("the probe regressed against the run before", "workload", run.Workload, "run", run.ID,
			"previous", run.Previous, "regressions", len(reg), "first", reg[0].Row+" x "+reg[0].Load+" "+reg[0].Figure)
	}
}

// latestProbe returns the latest report of the scheduled workload and, with a history,
// its stored run: the newest stored run of the workload (the schedule's latest once it
// is stored, or after a restart the last run stored before), else the schedule's latest.
func (s *Sidecar) latestProbe() (synth.Report, *history.Run, bool) {
	if s.history != nil {
		if run, rep, ok := s.history.Latest(s.prober.Workload().Name); ok {
			return rep, &run, true
		}
	}
	rep, ok := s.prober.Latest()
	return rep, nil, ok
}

// historyRoutes adds GET /probe/history, the stored runs newest first as JSON, and GET
// /probe/history/{id}/report.{json,md,html}, a stored run's report.
func (s *Sidecar) historyRoutes(mux *http.ServeMux) {
	const off = "there is no probe history (--probe-history-dir is not set)"
	mux.HandleFunc("GET /probe/history", func(w http.ResponseWriter, _ *http.Request) {
		if s.history == nil {
			http.Error(w, off, http.StatusNotFound)
			return
		}
		body, err := json.MarshalIndent(struct {
			Runs []history.Run `json:"runs"`
		}{s.history.Runs()}, "", "  ")
		if err != nil {
			s.log.Error("encoding the probe history", "err", err)
			http.Error(w, "encoding the probe history failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
	mux.HandleFunc("GET /probe/history/{id}/{file}", func(w http.ResponseWriter, r *http.Request) {
		form, ok := report.FormOf(r.PathValue("file"))
		switch {
		case s.history == nil:
			http.Error(w, off, http.StatusNotFound)
			return
		case !ok:
			http.Error(w, "want report.json, report.md or report.html", http.StatusNotFound)
			return
		}
		rep, err := s.history.Report(r.PathValue("id"))
		switch {
		case errors.Is(err, history.ErrNotFound):
			http.Error(w, "the probe history holds no run "+r.PathValue("id")+" (GET /probe/history lists them)", http.StatusNotFound)
			return
		case err != nil:
			s.log.Error("reading a stored probe run", "run", r.PathValue("id"), "err", err)
			http.Error(w, "reading the stored run failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", form.ContentType)
		if err := form.Write(w, rep); err != nil {
			s.log.Error("writing a stored probe report", "err", err)
		}
	})
}
