package exporter

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// Admin endpoint limits.
const (
	// scrapeTimeout bounds one /metrics response; collectors read in-memory state, so a
	// slow scrape means something is wrong.
	scrapeTimeout = 10 * time.Second
	// maxScrapesInFlight bounds concurrent /metrics requests.
	maxScrapesInFlight = 8
	// shutdownTimeout bounds the graceful shutdown of ServeAdmin.
	shutdownTimeout = 5 * time.Second
)

// AdminHandler returns the handler of slogate's admin endpoints:
//
//   - GET /metrics: every metric of reg. Content negotiation offers the Prometheus text
//     and protobuf formats (protobuf carries native histograms) and OpenMetrics (which
//     carries exemplars). The handler's own promhttp_metric_handler_* metrics are
//     registered on reg (once, however often AdminHandler is called).
//   - GET /healthz: 200 "ok" for as long as the process serves HTTP (liveness).
//   - GET /readyz: 200 "ok" when ready returns nil, else 503 with ready's error as the
//     text body (readiness). A nil ready is always ready.
//
// Anything else is 404. The handler is safe for concurrent use.
func AdminHandler(reg *prometheus.Registry, ready func() error) http.Handler {
	metrics := promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: maxScrapesInFlight,
		Timeout:             scrapeTimeout,
		EnableOpenMetrics:   true,
	}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				plain(w, http.StatusServiceUnavailable, err.Error())
				return
			}
		}
		plain(w, http.StatusOK, "ok")
	})
	return mux
}

// plain writes a short, uncacheable text response.
func plain(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // an error means the client went away
}

// ServeAdmin serves h on ln until ctx is done, then shuts down gracefully: it stops
// accepting, lets requests in progress finish for up to 5 s, and returns nil. It
// returns early with the error if serving fails (including an invalid web config).
//
// webConfigFile is an exporter-toolkit web configuration file (the --web.config.file
// of every Prometheus exporter): TLS, client certificates, basic auth with bcrypt
// hashes, rate limits. The file is re-read as connections and requests arrive, so
// certificates and users can be rotated without a restart. An empty path serves plain
// HTTP without authentication. ServeAdmin takes ownership of ln and closes it. A nil
// logger discards.
func ServeAdmin(ctx context.Context, ln net.Listener, h http.Handler, webConfigFile string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	flags := &web.FlagConfig{WebConfigFile: &webConfigFile}
	done := make(chan error, 1)
	go func() { done <- web.Serve(ln, srv, flags, logger) }()

	select {
	case err := <-done:
		ln.Close()
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("admin server did not shut down in time; closing", "err", err)
		srv.Close()
	}
	err := <-done
	ln.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
