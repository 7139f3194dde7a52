// Package status serves slogate's status page on the admin listener: live SLO
// attainment and p95 TTFT/TPOT per tier, each tier's goodput and offered load against
// the sustainable rate λ* its calibration measured, admission limits and queues, the tenants'
// shares of service, budgets and recent traffic, the engine's snapshot, the latest
// probe matrix as a heatmap, the probe history's trends and regressions, and the
// latest calibration's curves.
//
// The page is server-rendered HTML with inline CSS and SVG and no script or external
// asset, so it works in a pod without internet access; it reloads itself every few
// seconds. Its parts come from small interfaces declared here, which cmd/slogate
// connects to admission, the engine scraper, the prober and the calibrator, and from a
// Window of recent requests that the proxy feeds as one of its observers.
package status

import (
	"bytes"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/schedule"
	"github.com/slogate/slogate/synth"
)

// AdmissionSource is admission control's state (*admission.Controller).
type AdmissionSource interface{ Stats() admission.Stats }

// EngineSource is the engine's latest snapshot (*engine.Scraper).
type EngineSource interface{ Latest() engine.Snapshot }

// LiveSource summarises recent live requests per tier and per tenant (*Window).
type LiveSource interface {
	Summary(tiers []admission.TierStats, def measure.SLO) (byTier []Live, all Live)
	ByTenant(names []string, tiers []admission.TierStats, def measure.SLO) []TenantLive
	Span() time.Duration
}

// ProbeSource is the scheduled prober.
type ProbeSource interface{ Probe() Probe }

// CalibrationSource is the scheduled calibration.
type CalibrationSource interface{ Calibration() Calibration }

// Probe is the prober's state and its latest finished report.
type Probe struct {
	Workload string
	schedule.Status
	Report *synth.Report // nil until a probe has finished
}

// Calibration is the calibration's state and its latest complete outcome.
type Calibration struct {
	schedule.Status
	Outcome *calibrate.Outcome // nil until a calibration has finished
}

// Config is what a Page shows.
type Config struct {
	Admission   AdmissionSource   // required
	Engine      EngineSource      // required
	Live        LiveSource        // nil: no live numbers
	Probe       ProbeSource       // nil: the sidecar does not probe
	Calibration CalibrationSource // nil: the sidecar does not calibrate
	History     HistorySource     // nil: the sidecar keeps no probe history
	Sustainable SustainableSource // nil: no tier's λ* is known
	SLO         measure.SLO       // the sidecar's SLOs, for requests no tier classified
	Refresh     time.Duration     // how often the page reloads itself; default 5 s
	Clock       clock.Clock       // default clock.Real
	Logger      *slog.Logger      // rendering errors; default discard
}

// Page is the status page, an http.Handler answering GET and HEAD. Every request reads
// each source once and renders the whole page; the page is never cached. Safe for
// concurrent use.
type Page struct{ cfg Config }

var _ http.Handler = (*Page)(nil)

// New returns the page of cfg. It panics when Admission or Engine is nil.
func New(cfg Config) *Page {
	if cfg.Admission == nil || cfg.Engine == nil {
		panic("status: New needs an admission and an engine source")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Page{cfg: cfg}
}

//go:embed templates
var templateFiles embed.FS

// pageTemplate is the page; html/template escapes every value it is given. The only
// unescaped HTML is the figures, which package report writes with all text escaped.
var pageTemplate = template.Must(template.New("page.html").ParseFS(templateFiles, "templates/*.html"))

//go:embed templates/status.css
var pageCSS string

// ServeHTTP renders the page. It answers 405 to methods other than GET and HEAD.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var body bytes.Buffer
	if err := pageTemplate.Execute(&body, p.view()); err != nil {
		p.cfg.Logger.Error("rendering the status page", "err", err)
		http.Error(w, "rendering the status page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body.Bytes()) // an error means the client went away
	}
}

// view reads every source once and lays the page out.
func (p *Page) view() pageView {
	now := p.cfg.Clock.Now()
	st := p.cfg.Admission.Stats()
	v := pageView{
		Refresh: int(p.cfg.Refresh.Round(time.Second) / time.Second),
		Now:     now.UTC().Format(time.RFC3339),
		Style:   template.CSS(report.HTMLStyle() + pageCSS),
		Mode:    st.Mode.String(), EngineState: engineState(st.Engine),
		Admission: admissionRows(st),
		Tenants:   tenantView(st, p.cfg.Live, p.cfg.SLO),
		Engine:    engineView(p.cfg.Engine.Latest(), now),
	}
	v.Refresh = max(v.Refresh, 1)
	var live []Live // nil: not measured
	var span string
	if p.cfg.Live != nil {
		byTier, all := p.cfg.Live.Summary(st.Tiers, p.cfg.SLO)
		v.Live = liveView(byTier, all, p.cfg.Live.Span())
		live, span = byTier, v.Live.Span
	}
	var knees map[string]float64
	if p.cfg.Sustainable != nil {
		knees = p.cfg.Sustainable.Sustainable()
	}
	v.Capacity = capacityView(st.Tiers, live, knees, span)
	v.Probe = probeView(p.cfg.Probe, now)
	v.Calibration = calibrationView(p.cfg.Calibration, now)
	v.History = historyView(p.cfg.History, now)
	return v
}
