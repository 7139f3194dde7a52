package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/proxy"
)

func init() {
	commands["serve"] = command{summary: "run the sidecar in front of an inference engine", run: runServe}
}

// serveSettings are the settings of `slogate serve` (and of the sidecar inside `demo`).
type serveSettings struct {
	Upstream        string        `flag:"upstream" env:"SLOGATE_UPSTREAM" envDefault:"http://127.0.0.1:8000" help:"the engine's base URL"`
	Listen          string        `flag:"listen" env:"SLOGATE_LISTEN" envDefault:":8080" help:"address clients connect to"`
	AdminListen     string        `flag:"admin-listen" env:"SLOGATE_ADMIN_LISTEN" envDefault:":9090" help:"address of /metrics, /healthz and /readyz"`
	UpstreamAPIKey  string        `flag:"upstream-api-key" env:"SLOGATE_UPSTREAM_API_KEY" envDefault:"" help:"bearer token for slogate's own requests to the engine (its /v1/models), for engines started with --api-key; never logged"`
	Engine          string        `flag:"engine" env:"SLOGATE_ENGINE" envDefault:"auto" help:"the engine behind slogate: auto, vllm or sglang"`
	SLOTTFT         time.Duration `flag:"slo-ttft" env:"SLOGATE_SLO_TTFT" envDefault:"2s" help:"time-to-first-token SLO; a histogram bucket boundary sits exactly on it"`
	SLOTPOT         time.Duration `flag:"slo-tpot" env:"SLOGATE_SLO_TPOT" envDefault:"100ms" help:"time-per-output-token SLO; a histogram bucket boundary sits exactly on it"`
	ScrapeInterval  time.Duration `flag:"scrape-interval" env:"SLOGATE_SCRAPE_INTERVAL" envDefault:"1s" help:"how often the engine's /metrics is read"`
	UpstreamTimeout time.Duration `flag:"upstream-timeout" env:"SLOGATE_UPSTREAM_TIMEOUT" envDefault:"10m" help:"longest wait for the engine's response headers before 504 (0: none)"`
	MaxBodyBytes    int64         `flag:"max-body-bytes" env:"SLOGATE_MAX_BODY_BYTES" envDefault:"67108864" help:"largest inference request body; larger ones get 413"`
	InjectUsage     bool          `flag:"inject-usage" env:"SLOGATE_INJECT_USAGE" envDefault:"true" help:"ask the engine for usage on streams that did not, and strip it, so output tokens are exact"`
	DrainTimeout    time.Duration `flag:"drain-timeout" env:"SLOGATE_DRAIN_TIMEOUT" envDefault:"30s" help:"on SIGTERM, how long in-flight requests may take to finish"`
	WebConfigFile   string        `flag:"web-config-file" env:"SLOGATE_WEB_CONFIG_FILE" envDefault:"" help:"exporter-toolkit web config (TLS, basic auth) for the admin listener"`
	PushURL         string        `flag:"push-url" env:"SLOGATE_PUSH_URL" envDefault:"" help:"push metrics in Prometheus text format to this URL (e.g. VictoriaMetrics /api/v1/import/prometheus)"`
	PushInterval    time.Duration `flag:"push-interval" env:"SLOGATE_PUSH_INTERVAL" envDefault:"15s" help:"how often to push when --push-url is set"`
	PushLabels      string        `flag:"push-labels" env:"SLOGATE_PUSH_LABELS" envDefault:"" help:"extra labels on pushed metrics, e.g. pod=\"a\",namespace=\"b\""`
	NativeHist      bool          `flag:"native-histograms" env:"SLOGATE_NATIVE_HISTOGRAMS" envDefault:"false" help:"also expose native histograms, for Prometheus servers that scrape them"`
	LogLevel        string        `flag:"log-level" env:"SLOGATE_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat       string        `flag:"log-format" env:"SLOGATE_LOG_FORMAT" envDefault:"json" help:"json or text"`
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
	cfg      serveSettings
	log      *slog.Logger
	reg      *prometheus.Registry
	scraper  *engine.Scraper
	proxy    *proxy.Proxy
	draining atomic.Bool
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
	sc := &sidecar{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	sc.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sc.scraper = engine.NewScraper(engine.ScraperConfig{BaseURL: cfg.Upstream, Kind: kind, Interval: cfg.ScrapeInterval, APIKey: cfg.UpstreamAPIKey})
	var inflight lateInFlight
	metrics := exporter.New(sc.reg, exporter.Options{
		TTFT: cfg.SLOTTFT, TPOT: cfg.SLOTPOT, NativeHistograms: cfg.NativeHist,
		ServedModels: func() []string { return sc.scraper.Latest().Models },
		Engine:       sc.scraper, InFlight: &inflight, Version: buildVersion(),
	})
	sc.proxy = proxy.New(proxy.Config{
		Upstream: upstream, MaxBodyBytes: cfg.MaxBodyBytes, InjectUsage: cfg.InjectUsage,
		UpstreamTimeout: cfg.UpstreamTimeout, Observers: append([]proxy.Observer{metrics}, extra...), Logger: log,
	})
	inflight.p = sc.proxy
	return sc, nil
}

// lateInFlight lets the exporter read the proxy's requests in flight although the proxy
// is built after the exporter (the proxy needs the exporter as its observer).
type lateInFlight struct{ p *proxy.Proxy }

func (l *lateInFlight) InFlight() (int, int64) { return l.p.InFlight() }

// ready reports why the sidecar should not receive traffic, or nil.
func (s *sidecar) ready() error {
	if s.draining.Load() {
		return errors.New("draining")
	}
	snap := s.scraper.Latest()
	if !snap.Up {
		return fmt.Errorf("engine not reachable: %v", snap.Err)
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
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() { _ = s.scraper.Run(bg) })
	wg.Go(func() {
		h := exporter.AdminHandler(s.reg, s.ready)
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
		Handler:           s.proxy,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(data) }()
	s.log.Info("slogate serving", "listen", data.Addr().String(), "admin", admin.Addr().String(), "upstream", s.cfg.Upstream)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.drain(srv)
}

// drain stops the data listener and waits up to DrainTimeout for requests in flight.
func (s *sidecar) drain(srv *http.Server) error {
	s.draining.Store(true)
	n, _ := s.proxy.InFlight()
	s.log.Info("draining", "in_flight", n, "timeout", s.cfg.DrainTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		n, _ := s.proxy.InFlight()
		s.log.Warn("drain timed out; closing the remaining connections", "in_flight", n)
		srv.Close()
	}
	s.log.Info("stopped")
	return nil
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
