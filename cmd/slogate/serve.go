package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/synth"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/gpu"
	"github.com/slogate/slogate/proxy"
	statuspage "github.com/slogate/slogate/status" // serve_test.go has a func status
)

func init() {
	commands["serve"] = command{summary: "run the sidecar in front of an inference engine", run: runServe}
}

// serveSettings are the settings of `slogate serve` (and of the sidecar inside `demo`).
type serveSettings struct {
	Upstream            string        `flag:"upstream" env:"SLOGATE_UPSTREAM" envDefault:"http://127.0.0.1:8000" help:"the engine's base URL"`
	Listen              string        `flag:"listen" env:"SLOGATE_LISTEN" envDefault:":8080" help:"address clients connect to"`
	AdminListen         string        `flag:"admin-listen" env:"SLOGATE_ADMIN_LISTEN" envDefault:":9090" help:"address of /metrics, /healthz and /readyz"`
	UpstreamAPIKey      string        `flag:"upstream-api-key" env:"SLOGATE_UPSTREAM_API_KEY" envDefault:"" help:"bearer token for slogate's own requests to the engine (its /v1/models, probes and calibrations), for engines started with --api-key; never logged"`
	Engine              string        `flag:"engine" env:"SLOGATE_ENGINE" envDefault:"auto" help:"the engine behind slogate: auto, vllm or sglang"`
	SLOTTFT             time.Duration `flag:"slo-ttft" env:"SLOGATE_SLO_TTFT" envDefault:"2s" help:"time-to-first-token SLO; a histogram bucket boundary sits exactly on it"`
	SLOTPOT             time.Duration `flag:"slo-tpot" env:"SLOGATE_SLO_TPOT" envDefault:"100ms" help:"time-per-output-token SLO; a histogram bucket boundary sits exactly on it"`
	Admission           string        `flag:"admission" env:"SLOGATE_ADMISSION" envDefault:"shadow" help:"admission control: off, shadow (decide and record, never delay or reject) or enforce"`
	TiersFile           string        `flag:"tiers-file" env:"SLOGATE_TIERS_FILE" envDefault:"" help:"YAML file of admission tiers (reloaded on SIGHUP, on change and on POST /-/reload); empty: the built-in tiers"`
	StalePolicy         string        `flag:"stale-policy" env:"SLOGATE_STALE_POLICY" envDefault:"open" help:"when engine metrics are stale or missing: open (admit, ignoring them) or closed (answer 503)"`
	StaleAfter          time.Duration `flag:"stale-after" env:"SLOGATE_STALE_AFTER" envDefault:"5s" help:"engine metrics older than this are stale"`
	SaturationQueue     float64       `flag:"saturation-queue" env:"SLOGATE_SATURATION_QUEUE" envDefault:"8" help:"the engine is saturated when this many requests wait in its queue"`
	SaturationKV        float64       `flag:"saturation-kv" env:"SLOGATE_SATURATION_KV" envDefault:"0.9" help:"the engine is saturated at this KV-cache usage (reported, or slogate's in-flight tokens against capacity)"`
	ProbeWorkload       string        `flag:"probe-workload" env:"SLOGATE_PROBE_WORKLOAD" envDefault:"" help:"probe workload to schedule: a preset (context-matrix, shapes, rate-scan) or a YAML file; empty: no probes"`
	ProbeInterval       time.Duration `flag:"probe-interval" env:"SLOGATE_PROBE_INTERVAL" envDefault:"6h" help:"time between scheduled probes (plus jitter); 0: only on POST /-/probe"`
	ProbeJitter         float64       `flag:"probe-jitter" env:"SLOGATE_PROBE_JITTER" envDefault:"0.1" help:"share of the probe interval added at random, so replicas do not probe in step"`
	ProbeQuick          bool          `flag:"probe-quick" env:"SLOGATE_PROBE_QUICK" envDefault:"false" help:"run the probe workload's quick variant (about a minute)"`
	ProbeMaxLoad        float64       `flag:"probe-max-load" env:"SLOGATE_PROBE_MAX_LOAD" envDefault:"0.5" help:"probes and calibrations hold back while live traffic holds more than this share of the engine's KV cache, the engine is saturated, or live p95 TTFT is over its SLO"`
	Calibrate           bool          `flag:"calibrate" env:"SLOGATE_CALIBRATE" envDefault:"false" help:"measure each tier's knee from inside the sidecar, on POST /-/calibrate and every --calibrate-interval; it drives the engine past its knee for minutes, so choose quiet hours"`
	CalibrateInterval   time.Duration `flag:"calibrate-interval" env:"SLOGATE_CALIBRATE_INTERVAL" envDefault:"0s" help:"time between scheduled calibrations (plus up to 10%); 0: only on POST /-/calibrate"`
	CalibrateApply      bool          `flag:"calibrate-apply" env:"SLOGATE_CALIBRATE_APPLY" envDefault:"false" help:"put calibrated limits in force at once; false: only publish them (GET /calibration/tiers.yaml, slogate_calibration_* metrics) for review"`
	CalibrateRound      time.Duration `flag:"calibrate-round" env:"SLOGATE_CALIBRATE_ROUND" envDefault:"60s" help:"arrival window of each rate a calibration measures"`
	CalibrateOutput     int           `flag:"calibrate-output" env:"SLOGATE_CALIBRATE_OUTPUT" envDefault:"128" help:"output tokens of every calibration request"`
	ScrapeInterval      time.Duration `flag:"scrape-interval" env:"SLOGATE_SCRAPE_INTERVAL" envDefault:"1s" help:"how often the engine's /metrics is read"`
	UpstreamTimeout     time.Duration `flag:"upstream-timeout" env:"SLOGATE_UPSTREAM_TIMEOUT" envDefault:"10m" help:"longest wait for the engine's response headers before 504 (0: none)"`
	StreamIdleTimeout   time.Duration `flag:"stream-idle-timeout" env:"SLOGATE_STREAM_IDLE_TIMEOUT" envDefault:"60s" help:"longest silence of a streaming answer (before its first token or between two): the engine's request is cancelled and the client's stream ends with an error event, counted as upstream_timeout (0: none)"`
	MaxBodyBytes        int64         `flag:"max-body-bytes" env:"SLOGATE_MAX_BODY_BYTES" envDefault:"67108864" help:"largest inference request body; larger ones get 413"`
	BodyTimeout         time.Duration `flag:"body-timeout" env:"SLOGATE_BODY_TIMEOUT" envDefault:"60s" help:"longest time a client may take to send a request's body, from the end of its headers; a slower one gets 408 and its connection is closed (0: none)"`
	InjectUsage         bool          `flag:"inject-usage" env:"SLOGATE_INJECT_USAGE" envDefault:"true" help:"ask the engine for usage on streams that did not, and strip it, so output tokens are exact"`
	ReadHeaderTimeout   time.Duration `flag:"read-header-timeout" env:"SLOGATE_READ_HEADER_TIMEOUT" envDefault:"10s" help:"longest time a client may take to send a request's headers (from the connection's accept, or on a kept-alive connection from the next request's first bytes); a slower client (slowloris) has its connection closed (sometimes after a 400). It bounds neither request bodies nor responses"`
	IdleTimeout         time.Duration `flag:"idle-timeout" env:"SLOGATE_IDLE_TIMEOUT" envDefault:"2m" help:"longest time a keep-alive client connection may wait for its next request before slogate closes it"`
	DrainTimeout        time.Duration `flag:"drain-timeout" env:"SLOGATE_DRAIN_TIMEOUT" envDefault:"30s" help:"on SIGTERM, how long in-flight requests may take to finish"`
	AdminTokenFile      string        `flag:"admin-token-file" env:"SLOGATE_ADMIN_TOKEN_FILE" envDefault:"" help:"file holding a bearer token the admin listener requires on every path but /healthz and /readyz (e.g. a mounted Secret); empty: none"`
	EnableAdminAPI      bool          `flag:"enable-admin-api" env:"SLOGATE_ENABLE_ADMIN_API" envDefault:"false" help:"serve the admin endpoints that change what slogate does: POST /-/reload, /-/probe and /-/calibrate; off, they answer 403"`
	TrustClientPriority bool          `flag:"trust-client-priority" env:"SLOGATE_TRUST_CLIENT_PRIORITY" envDefault:"false" help:"let any client mark requests as probes (X-Slogate-Priority: probe: kept out of the live metrics, admitted from headroom), e.g. for slogate probe run from outside the pod; off, only the sidecar's own prober may, and other claims are served as interactive"`
	WebConfigFile       string        `flag:"web-config-file" env:"SLOGATE_WEB_CONFIG_FILE" envDefault:"" help:"exporter-toolkit web config (TLS, basic auth) for the admin listener"`
	PushURL             string        `flag:"push-url" env:"SLOGATE_PUSH_URL" envDefault:"" help:"push metrics in Prometheus text format to this URL (e.g. VictoriaMetrics /api/v1/import/prometheus)"`
	PushInterval        time.Duration `flag:"push-interval" env:"SLOGATE_PUSH_INTERVAL" envDefault:"15s" help:"how often to push when --push-url is set"`
	PushLabels          string        `flag:"push-labels" env:"SLOGATE_PUSH_LABELS" envDefault:"" help:"extra labels on pushed metrics, e.g. pod=\"a\",namespace=\"b\""`
	NativeHist          bool          `flag:"native-histograms" env:"SLOGATE_NATIVE_HISTOGRAMS" envDefault:"false" help:"also expose native histograms, for Prometheus servers that scrape them"`
	DCGM                string        `flag:"dcgm" env:"SLOGATE_DCGM" envDefault:"embedded" help:"GPU metrics from NVIDIA DCGM: embedded (DCGM inside slogate; needs libdcgm.so.4 and the GPUs visible), host:port of an nv-hostengine (e.g. the GPU operator's on the node), or off; without DCGM slogate_gpu_collector_up is 0"`
	LogLevel            string        `flag:"log-level" env:"SLOGATE_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat           string        `flag:"log-format" env:"SLOGATE_LOG_FORMAT" envDefault:"json" help:"json or text"`
}

const serveAbout = `slogate serve runs the sidecar: clients talk to --listen, slogate forwards to
--upstream and measures every completions and chat request; metrics and health are on
--admin-listen.

Usage: slogate serve [flags]
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), serveAbout) }
	var cfg serveSettings
	if err := loadSettings(fs, &cfg, os.Environ(), args); err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	sc, err := newSidecar(cfg, log)
	if err != nil {
		return err
	}
	data, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	admin, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		data.Close()
		return err
	}
	return sc.run(ctx, data, admin)
}

// sidecar is slogate serve's parts, wired.
type sidecar struct {
	cfg       serveSettings
	log       *slog.Logger
	reg       *prometheus.Registry
	scraper   *engine.Scraper
	admission *admission.Controller
	reloads   *admission.Reloader // nil without a tiers file
	proxy     *proxy.Proxy

	probeWorkload *synth.Workload // nil without scheduled probes
	prober        atomic.Pointer[synth.Schedule]
	calibration   *calibrate.Schedule // nil unless --calibrate
	gpus          io.Closer           // the DCGM connection; never nil
	adminToken    []byte              // the admin listener's bearer token; nil: none
	probeKey      string              // lets the sidecar's own probes claim the probe class
	draining      atomic.Bool

	live *statuspage.Window // recent live requests, for the status page (status.go)
}

// newSidecar wires slogate's parts for cfg; extra observers see every request too.
func newSidecar(cfg serveSettings, log *slog.Logger, extra ...proxy.Observer) (*sidecar, error) {
	upstream, err := url.Parse(cfg.Upstream)
	if err != nil || upstream.Scheme == "" || upstream.Host == "" {
		return nil, fmt.Errorf("--upstream %q: want an absolute URL such as http://127.0.0.1:8000", cfg.Upstream)
	}
	kind, err := engine.ParseKind(cfg.Engine)
	if err != nil {
		return nil, err
	}
	if cfg.SLOTTFT <= 0 || cfg.SLOTPOT <= 0 {
		return nil, errors.New("the TTFT and TPOT SLOs must be positive")
	}
	if cfg.ReadHeaderTimeout <= 0 || cfg.IdleTimeout <= 0 {
		return nil, errors.New("--read-header-timeout and --idle-timeout must be positive")
	}
	sc := &sidecar{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	if sc.adminToken, err = readAdminToken(cfg.AdminTokenFile); err != nil {
		return nil, err
	}
	sc.probeKey = rand.Text()
	sc.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sc.scraper = engine.NewScraper(engine.ScraperConfig{BaseURL: cfg.Upstream, Kind: kind, Interval: cfg.ScrapeInterval, APIKey: cfg.UpstreamAPIKey})
	var late lateBinding
	if err := sc.newAdmission(&late); err != nil {
		return nil, err
	}
	if err := sc.loadProber(); err != nil {
		return nil, err
	}
	if err := sc.loadCalibrator(); err != nil {
		return nil, err
	}
	var probes exporter.ProbeSource
	if sc.probeWorkload != nil {
		probes = sc
	}
	var calibrations exporter.CalibrationSource
	if sc.calibration != nil {
		calibrations = sc
	}
	metrics := exporter.New(sc.reg, exporter.Options{
		TTFT: cfg.SLOTTFT, TPOT: cfg.SLOTPOT, NativeHistograms: cfg.NativeHist,
		ServedModels:  func() []string { return sc.scraper.Latest().Models },
		UnknownModels: sc.scraper, // an adapter loaded at run time is labelled within seconds
		Engine:        sc.scraper, InFlight: &late, Version: buildVersion(),
		Admission: sc.admission, Reloads: sc.reloads, Probe: probes, Calibration: calibrations,
	})
	late.decisions = metrics
	sc.live = statuspage.NewWindow(statuspage.WindowOptions{})
	sc.proxy = proxy.New(proxy.Config{
		Upstream: upstream, MaxBodyBytes: cfg.MaxBodyBytes, BodyTimeout: cfg.BodyTimeout, InjectUsage: cfg.InjectUsage,
		UpstreamTimeout: cfg.UpstreamTimeout, StreamIdleTimeout: cfg.StreamIdleTimeout,
		ProbeKey: sc.probeKey, TrustPriority: cfg.TrustClientPriority,
		Observers: append([]proxy.Observer{metrics, sc.live}, extra...), Logger: log,
		Admission: sc.admitter(),
	})
	late.proxy = sc.proxy
	gpus, closer, err := gpu.NewDCGMCollector(cfg.DCGM, log)
	if err != nil {
		return nil, fmt.Errorf("--dcgm: %w", err)
	}
	sc.reg.MustRegister(gpus)
	sc.gpus = closer
	return sc, nil
}

// newAdmission builds the admission controller (and the tiers file's reloader) of cfg.
func (s *sidecar) newAdmission(late *lateBinding) error {
	mode, err := admission.ParseMode(s.cfg.Admission)
	if err != nil {
		return err
	}
	if s.cfg.StalePolicy != "open" && s.cfg.StalePolicy != "closed" {
		return fmt.Errorf("--stale-policy %q: want open or closed", s.cfg.StalePolicy)
	}
	tiers := admission.DefaultConfig()
	if s.cfg.TiersFile != "" {
		if tiers, err = admission.LoadConfig(s.cfg.TiersFile); err != nil {
			return err
		}
	}
	s.admission, err = admission.New(tiers, admission.Options{
		Mode: mode, SLO: admission.SLO{TTFT: admission.Duration(s.cfg.SLOTTFT), TPOT: admission.Duration(s.cfg.SLOTPOT)},
		Engine: s.scraper, InFlightKV: late.kvTokens, Observers: []admission.DecisionObserver{late},
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

// admitter returns the proxy's admission control: none when it is off.
func (s *sidecar) admitter() proxy.Admitter {
	if s.admission.Mode() == admission.Off {
		return nil
	}
	return s.admission
}

// lateBinding connects parts built in an order their dependencies cannot all follow:
// the exporter and admission read the proxy's requests in flight, and admission reports
// its decisions to the exporter, although the proxy needs both of them built first.
type lateBinding struct {
	proxy     *proxy.Proxy
	decisions admission.DecisionObserver
}

func (l *lateBinding) InFlight() (int, int64) { return l.proxy.InFlight() }

func (l *lateBinding) kvTokens() int64 {
	if l.proxy == nil {
		return 0
	}
	_, kv := l.proxy.InFlight()
	return kv
}

func (l *lateBinding) ObserveDecision(d admission.Decision) {
	if l.decisions != nil {
		l.decisions.ObserveDecision(d)
	}
}

// ready reports why the sidecar should not receive traffic, or nil.
func (s *sidecar) ready() error {
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
	if stale := max(5*s.cfg.ScrapeInterval, 5*time.Second); snap.Age(time.Now()) > stale {
		return fmt.Errorf("engine metrics are %s old", snap.Age(time.Now()).Round(time.Second))
	}
	return nil
}

// run serves clients on data and the admin endpoints on admin until ctx is done, then
// drains: readiness turns false, no new connections are accepted, and requests in flight
// get DrainTimeout to finish before their connections are closed.
func (s *sidecar) run(ctx context.Context, data, admin net.Listener) error {
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait(); s.gpus.Close() }()
	wg.Go(func() { _ = s.scraper.Run(bg) })
	wg.Go(func() { s.admission.Run(bg, 20*time.Millisecond) })
	if s.reloads != nil {
		wg.Go(func() { s.reloads.Watch(bg, 5*time.Second) })
		wg.Go(func() { s.reloadOnSIGHUP(bg) })
	}
	wg.Go(func() {
		h := s.adminHandler()
		if err := exporter.ServeAdmin(bg, admin, h, s.cfg.WebConfigFile, s.log); err != nil {
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
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(data) }()
	wg.Go(func() { s.startProber(ctx, data.Addr().String()) }) // stops when draining starts
	wg.Go(func() { s.runCalibrator(ctx) })
	s.log.Info("slogate serving", "listen", data.Addr().String(), "admin", admin.Addr().String(), "upstream", redactedURL(s.cfg.Upstream))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.drain(srv)
}

// adminHandler is the exporter's admin endpoints plus POST /-/reload of the tiers file,
// and the status page at GET /, behind the admin token when there is one (admin.go).
func (s *sidecar) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", exporter.AdminHandler(s.reg, s.ready))
	mux.Handle("GET /{$}", s.statusPage()) // see status.go
	s.probeRoutes(mux)
	s.calibrationRoutes(mux)
	mux.HandleFunc("POST /-/reload", s.mutating(func(w http.ResponseWriter, _ *http.Request) {
		if s.reloads == nil {
			http.Error(w, "no tiers file to reload (--tiers-file is not set)", http.StatusBadRequest)
			return
		}
		if err := s.reloads.Reload(); err != nil {
			s.log.Error("reloading the tiers file failed", "err", err)
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		s.log.Info("tiers file reloaded", "path", s.cfg.TiersFile)
		_, _ = io.WriteString(w, "reloaded\n")
	}))
	return s.guardAdmin(mux)
}

// reloadOnSIGHUP reloads the tiers file on every SIGHUP until ctx is done.
func (s *sidecar) reloadOnSIGHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := s.reloads.Reload(); err != nil {
				s.log.Error("reloading the tiers file failed", "err", err)
			} else {
				s.log.Info("tiers file reloaded", "path", s.cfg.TiersFile)
			}
		}
	}
}

// shutdownGrace is how long the requests cut short when the drain timed out have to
// tell their clients before the connections close.
const shutdownGrace = 2 * time.Second

// drain stops the data listener and waits up to DrainTimeout for requests in flight;
// past it, those left are cut short (proxy.Shutdown), which takes up to shutdownGrace more.
func (s *sidecar) drain(srv *http.Server) error {
	s.draining.Store(true)
	n, _ := s.proxy.InFlight()
	s.log.Info("draining", "in_flight", n, "timeout", s.cfg.DrainTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		// The requests still in flight are cut short so that each client is told (an
		// error event, or 503) and each counts as shutdown; their handlers get a moment
		// to say so before the connections close.
		n := s.proxy.Shutdown()
		s.log.Warn("drain timed out; cutting the remaining requests short", "requests", n)
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
	s.log.Info("stopped")
	return nil
}

// redactedURL returns raw with the password of any user information in it masked, for
// logs; raw unchanged when it does not parse.
func redactedURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

// newLogger returns a slog logger writing to w in the given format and level.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", format)
}
