package sidecar

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slogate/slogate/exporter"
)

// shutdownTimeout bounds the graceful shutdown of serveAdmin.
const shutdownTimeout = 5 * time.Second

// healthAndMetrics returns the handler of the admin listener's read-only endpoints:
//
//   - GET /metrics: every metric of reg (exporter.Handler).
//   - GET /healthz: 200 "ok" for as long as the process serves HTTP (liveness).
//   - GET /readyz: 200 "ok" when ready returns nil, else 503 with ready's error as the
//     text body (readiness). A nil ready is always ready.
//
// Anything else is 404. The handler is safe for concurrent use.
func healthAndMetrics(reg *prometheus.Registry, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", exporter.Handler(reg))
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

// serveAdmin serves h on ln until ctx is done, then shuts down gracefully: it stops
// accepting, lets requests in progress finish for up to 5 s, and returns nil. It
// returns early with the error if serving fails (including an invalid web config).
//
// webConfigFile is an exporter-toolkit web configuration file (the --web.config.file
// of every Prometheus exporter): TLS, client certificates, basic auth with bcrypt
// hashes, rate limits. The file is re-read as connections and requests arrive, so
// certificates and users can be rotated without a restart. An empty path serves plain
// HTTP without authentication. serveAdmin takes ownership of ln and closes it. A nil
// logger discards.
func serveAdmin(ctx context.Context, ln net.Listener, h http.Handler, webConfigFile string, logger *slog.Logger) error {
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
