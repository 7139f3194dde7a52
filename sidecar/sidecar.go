// Package sidecar is slogate's composition root: it wires the engine scraper, admission
// control, the proxy, the exporter, the status page, and the scheduled prober and
// calibrator into one Sidecar, which `slogate serve`, `slogate demo`, the end-to-end
// tests and the benchmarks all build with New and run with Run. It owns what belongs to
// no single part: readiness, the drain protocol, the admin API, and the arbiter that
// lets one piece of background work at a time drive the engine.
package sidecar

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/gpu"
	"github.com/slogate/slogate/history"
	"github.com/slogate/slogate/proxy"
	statuspage "github.com/slogate/slogate/status"
	"github.com/slogate/slogate/synth"
	"github.com/slogate/slogate/tracing"
)

// Options are what a program embedding the sidecar supplies besides its settings. The
// zero value is what `slogate serve` runs with.
type Options struct {
	Logger *slog.Logger // nil: discard
	// Observers see every request, besides the exporter and the status page.
	Observers []proxy.Observer
	// Tiers, when set, are the admission tiers in force at start, in place of
	// Config.TiersFile or the built-in tiers.
	Tiers *admission.Config
	// ProbeWorkload, when set, is the scheduled probe workload, in place of the one
	// Config.ProbeWorkload names.
	ProbeWorkload *synth.Workload
	// GPUs, when set, is the GPU collector, in place of DCGM as Config.DCGM says.
	GPUs prometheus.Collector
	// Clock is the time of every part: engine scrapes and readiness, admission's
	// decisions and deadlines, the metrics, the status page and the probe schedule.
	// nil: clock.Real.
	Clock clock.Clock
}

// Sidecar is slogate in front of one engine: a data listener that proxies and measures
// inference requests, and an admin listener with metrics, health, the status page and
// the admin API. Build it with New and run it once with Run.
type Sidecar struct {
	cfg       Config
	log       *slog.Logger
	clock     clock.Clock
	reg       *prometheus.Registry
	scraper   *engine.Scraper
	admission *admission.Controller
	reloads   *admission.Reloader // nil without a tiers file
	proxy     *proxy.Proxy
	metrics   *exporter.Metrics
	live      *statuspage.Window // recent live requests, for the status page
	tracing   *tracing.Tracing   // nil unless an OTLP endpoint is set

	prober      *synth.Schedule     // nil without scheduled probes
	history     *history.Store      // nil without --probe-history-dir
	calibration *calibrate.Schedule // nil unless Config.Calibrate
	work        *arbiter

	data, admin net.Listener
	gpus        io.Closer // the DCGM connection; never nil
	adminToken  []byte    // the admin listener's bearer token; nil: none
	probeKey    string    // lets the sidecar's own probes claim the probe class
	draining    atomic.Bool
	closeOnce   sync.Once
}

// New builds the sidecar of cfg and opens its two listeners (Config.Listen and
// Config.AdminListen; port 0 picks a free one, see Addr and AdminAddr), so that an
// address in use fails here rather than once running. It reads the tiers file, the
// probe workload and the admin token file, and checks every setting, naming the flag at
// fault. Run serves; a Sidecar that is never run must be closed with Close.
func New(cfg Config, opts Options) (_ *Sidecar, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	kind, err := engine.ParseKind(cfg.Engine)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sidecar{cfg: cfg, log: log, clock: clock.Or(opts.Clock), reg: prometheus.NewRegistry(), probeKey: rand.Text(), gpus: io.NopCloser(nil)}
	if s.adminToken, err = readAdminToken(cfg.AdminTokenFile); err != nil {
		return nil, err
	}
	probes, err := probeWorkload(cfg, opts.ProbeWorkload)
	if err != nil {
		return nil, err
	}
	s.scraper = engine.NewScraper(engine.ScraperConfig{BaseURL: cfg.Upstream, Kind: kind, Interval: cfg.ScrapeInterval, APIKey: cfg.UpstreamAPIKey, Clock: s.clock})
	var relay decisionRelay
	if err := s.newAdmission(opts.Tiers, &relay); err != nil {
		return nil, err
	}
	if s.data, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, err
	}
	if s.admin, err = net.Listen("tcp", cfg.AdminListen); err != nil {
		s.data.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.work = &arbiter{live: s.liveBusy}
	if err := s.openHistory(); err != nil {
		return nil, err
	}
	s.newProber(probes)
	s.newCalibrator()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = s.newMetrics()
	relay.decisions = s.metrics
	s.live = statuspage.NewWindow(statuspage.WindowOptions{Clock: s.clock})
	upstream, _ := url.Parse(cfg.Upstream) // checked by cfg.check
	if s.tracing, err = tracing.New(context.Background(), tracing.Config{SampleRatio: cfg.TraceSampleRatio, Version: Version()}); err != nil {
		return nil, err
	}
	if s.tracing != nil {
		log.Info("exporting traces over OTLP", "sample_ratio", cfg.TraceSampleRatio)
	}
	s.proxy = proxy.New(proxy.Config{
		Upstream: upstream, MaxBodyBytes: cfg.MaxBodyBytes, BodyTimeout: cfg.BodyTimeout, InjectUsage: cfg.InjectUsage,
		UpstreamTimeout: cfg.UpstreamTimeout, StreamIdleTimeout: cfg.StreamIdleTimeout,
		ProbeKey: s.probeKey, TrustPriority: cfg.TrustClientPriority,
		Observers: append([]proxy.Observer{s.metrics, s.live}, opts.Observers...), Logger: log,
		Admission: s.admission, Clock: s.clock,
		Tracing: s.tracing, TraceContent: cfg.TraceContent, Judge: s.metrics, Engine: s.scraper,
	})
	if err := s.newGPUs(opts.GPUs); err != nil {
		return nil, err
	}
	return s, nil
}

// slo returns the sidecar's SLO, which tiers that set none take.

// newMetrics builds the exporter, reading the prober and calibrator when there are.
func (s *Sidecar) newMetrics() *exporter.Metrics {
	o := exporter.Options{
		TTFT: s.cfg.SLOTTFT, TPOT: s.cfg.SLOTPOT, NativeHistograms: s.cfg.NativeHist,
		ServedModels:  func() []string { return s.scraper.Latest().Models },
		UnknownModels: s.scraper, // an adapter loaded at run time is labelled within seconds
		Engine:        s.scraper, InFlight: s.admission, Version: Version(),
		Admission: s.admission, Reloads: s.reloads, Clock: s.clock,
		Sustainable: s, // λ* per tier: the latest calibration, or the tiers file's
	}
	if s.prober != nil {
		o.Probe = probeSource{s}
	}
	if s.calibration != nil {
		o.Calibration = s
	}
	return exporter.New(s.reg, o)
}

// newGPUs registers the GPU collector: gpus when given, else DCGM as the settings say.
func (s *Sidecar) newGPUs(gpus prometheus.Collector) error {
	if gpus != nil {
		s.reg.MustRegister(gpus)
		return nil
	}
	dcgm, closer, err := gpu.NewDCGMCollector(s.cfg.DCGM, s.log)
	if err != nil {
		return fmt.Errorf("--dcgm: %w", err)
	}
	s.reg.MustRegister(dcgm)
	s.gpus = closer
	return nil
}

// newAdmission builds the admission controller: of tiers when given, else of the tiers
// file (with its reloader), else of the built-in tiers.
func (s *Sidecar) newAdmission(tiers *admission.Config, relay *decisionRelay) error {
	mode, err := admission.ParseMode(s.cfg.Admission)
	if err != nil {
		return err
	}
	cfg := admission.DefaultConfig()
	switch {
	case tiers != nil:
		cfg = *tiers
	case s.cfg.TiersFile != "":
		if cfg, err = admission.LoadConfig(s.cfg.TiersFile); err != nil {
			return err
		}
	}
	s.admission, err = admission.New(cfg, admission.Options{
		Mode: mode, SLO: s.cfg.Objective(),
		Engine: s.scraper, Observers: []admission.DecisionObserver{relay}, Clock: s.clock,
		Saturation: admission.Saturation{
			QueueDepth: s.cfg.SaturationQueue, KVUsage: s.cfg.SaturationKV,
			StaleAfter: s.cfg.StaleAfter, FailClosed: s.cfg.StalePolicy == "closed",
		},
	})
	if err != nil {
		return err
	}
	if s.cfg.TiersFile != "" {
		s.reloads = admission.NewReloader(s.cfg.TiersFile, s.admission)
	}
	return nil
}

// decisionRelay relays admission's decisions to the exporter, which is built after the
// controller because it reads the controller's state.
type decisionRelay struct {
	decisions admission.DecisionObserver
}

func (l *decisionRelay) ObserveDecision(d admission.Decision) {
	if l.decisions != nil {
		l.decisions.ObserveDecision(d)
	}
}

// Addr is the address of the data listener, where clients send inference requests.
func (s *Sidecar) Addr() net.Addr { return s.data.Addr() }

// AdminAddr is the address of the admin listener: /metrics, /healthz, /readyz, the
// status page and the admin API.
func (s *Sidecar) AdminAddr() net.Addr { return s.admin.Addr() }

// Admission is the sidecar's admission controller.
func (s *Sidecar) Admission() *admission.Controller { return s.admission }

// Engine is the sidecar's reader of the engine's metrics and served models.
func (s *Sidecar) Engine() *engine.Scraper { return s.scraper }

// Prober is the scheduled prober, or nil when no probe workload is set.
func (s *Sidecar) Prober() *synth.Schedule { return s.prober }

// Calibrator is the scheduled calibration, or nil when Config.Calibrate is off.
func (s *Sidecar) Calibrator() *calibrate.Schedule { return s.calibration }

// Ready reports why the sidecar should not receive traffic (/readyz answers 503 with
// it), or nil: it is draining, or the engine is unreachable, asleep, or its metrics are
// more than five scrape intervals (at least 5 s) old.
func (s *Sidecar) Ready() error {
	if s.draining.Load() {
		return errors.New("draining")
	}
	snap := s.scraper.Latest()
	if !snap.Up {
		return fmt.Errorf("engine not reachable: %v", snap.Err)
	}
	if snap.Sleeping {
		return errors.New("engine is sleeping (vllm:engine_sleep_state awake=0)")
	}
	now := s.clock.Now()
	if stale := max(5*s.cfg.ScrapeInterval, 5*time.Second); snap.Age(now) > stale {
		return fmt.Errorf("engine metrics are %s old", snap.Age(now).Round(time.Second))
	}
	return nil
}

// Close releases the listeners and the DCGM connection of a Sidecar that was never run;
// after Run it does nothing. It is safe to call more than once.
func (s *Sidecar) Close() {
	s.closeOnce.Do(func() {
		s.data.Close()
		s.admin.Close()
		s.gpus.Close()
		s.stopTracing()
	})
}

// stopTracing exports the spans still queued, within a few seconds, and stops the
// exporter.
func (s *Sidecar) stopTracing() {
	if s.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tracing.Shutdown(ctx); err != nil {
		s.log.Warn("exporting the last spans failed", "err", err)
	}
}

// Run serves clients and the admin listener, and runs the background loops (engine
// scraping, admission, tiers-file reloads, pushes, probes, calibrations), until ctx is
// done. Then it drains: readiness turns false, no new connections are accepted, and
// requests in flight get Config.DrainTimeout to finish before they are cut short (each
// client told so, by an error event or a 503). It returns nil after a drain, or the
// data listener's error. Run may be called once.
func (s *Sidecar) Run(ctx context.Context) error {
	ran := false
	s.closeOnce.Do(func() { ran = true })
	if !ran {
		return errors.New("sidecar: Run called twice, or after Close")
	}
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait(); s.gpus.Close(); s.stopTracing() }()
	wg.Go(func() { _ = s.scraper.Run(bg) })
	wg.Go(func() { s.admission.Run(bg, 20*time.Millisecond) })
	if s.reloads != nil {
		wg.Go(func() { s.reloads.Watch(bg, 5*time.Second) })
		wg.Go(func() { s.reloadOnSIGHUP(bg) })
	}
	wg.Go(func() {
		if err := serveAdmin(bg, s.admin, s.adminHandler(), s.cfg.WebConfigFile, s.log); err != nil {
			s.log.Error("admin listener failed", "err", err)
		}
	})
	if s.cfg.PushURL != "" {
		wg.Go(func() {
			if err := exporter.Push(bg, s.cfg.PushURL, s.cfg.PushInterval, s.reg, s.cfg.PushLabels, s.log); err != nil {
				s.log.Error("push failed", "err", err)
			}
		})
	}
	srv := &http.Server{
		Handler: s.proxy,
		// A client gets ReadHeaderTimeout for its headers and no more, however slowly it
		// sends them. There is no ReadTimeout: it would bound headers and body with one
		// duration, and a body it cuts short reaches the handlers as a bare read error, not
		// as a timeout the client can be told of (408).
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		// Headers of more than 64 KiB get 431 (Envoy's default limit is 60 KiB, nginx's
		// 32 KiB); net/http's default of 1 MiB would let a client forward thousands of
		// headers to the engine.
		MaxHeaderBytes: 64 << 10,
		IdleTimeout:    s.cfg.IdleTimeout,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	// Streams leave the server's connection goroutines once their headers are out
	// (proxy/detach.go); where that is not supported they stay.
	if s.cfg.DetachStreams {
		if err := s.proxy.Detach(srv); err != nil {
			s.log.Info("streams stay on the server's connections", "reason", err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.data) }()
	// The schedules stop when draining starts (ctx), the loops above only after it.
	if s.prober != nil {
		wg.Go(func() { s.prober.Run(ctx) })
	}
	if s.calibration != nil {
		wg.Go(func() { s.calibration.Run(ctx) })
	}
	s.log.Info("slogate serving", "listen", s.Addr().String(), "admin", s.AdminAddr().String(), "upstream", redactedURL(s.cfg.Upstream))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.drain(srv)
}

// reloadOnSIGHUP reloads the tiers file on every SIGHUP until ctx is done.
func (s *Sidecar) reloadOnSIGHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			s.reloadTiers()
		}
	}
}

// reloadTiers reloads the tiers file, logging the outcome.
func (s *Sidecar) reloadTiers() error {
	if err := s.reloads.Reload(); err != nil {
		s.log.Error("reloading the tiers file failed", "err", err)
		return err
	}
	s.log.Info("tiers file reloaded", "path", s.cfg.TiersFile)
	return nil
}

// shutdownGrace is how long the requests cut short when the drain timed out have to
// tell their clients before the connections close.
const shutdownGrace = 2 * time.Second

// drain stops the data listener and waits up to DrainTimeout for requests in flight;
// past it, those left are cut short (proxy.Shutdown), which takes up to shutdownGrace more.
func (s *Sidecar) drain(srv *http.Server) error {
	s.draining.Store(true)
	n, _ := s.admission.InFlight()
	s.log.Info("draining", "in_flight", n, "timeout", s.cfg.DrainTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	// The server waits for the requests it still serves; the streams the proxy detached
	// from it (proxy.Detach) are waited for after.
	defer s.proxy.CloseDetached()
	if err := waitDrained(ctx, srv, s.proxy); err != nil {
		// The requests still in flight are cut short so that each client is told (an
		// error event, or 503) and each counts as shutdown; their handlers get a moment
		// to say so before the connections close.
		n := s.proxy.Shutdown()
		s.log.Warn("drain timed out; cutting the remaining requests short", "requests", n)
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := waitDrained(ctx, srv, s.proxy); err != nil {
			srv.Close()
		}
	}
	s.log.Info("stopped")
	return nil
}

// waitDrained shuts srv down and waits for the proxy's detached streams, until ctx ends.
func waitDrained(ctx context.Context, srv *http.Server, p *proxy.Proxy) error {
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	return p.WaitDetached(ctx)
}

// redactedURL returns raw with the password of any user information in it masked, for
// logs; raw unchanged when it does not parse.
func redactedURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}
