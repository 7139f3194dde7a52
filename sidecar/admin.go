package sidecar

import (
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// adminHandler is the admin listener: metrics, health and readiness (server.go), the
// status page at GET / (status.go), the prober's and the calibrator's reports and
// triggers (prober.go, calibrator.go), and POST /-/reload of the tiers file, behind the
// admin token when there is one.
func (s *Sidecar) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", healthAndMetrics(s.reg, s.Ready))
	mux.Handle("GET /{$}", s.statusPage())
	s.probeRoutes(mux)
	s.calibrationRoutes(mux)
	mux.HandleFunc("POST /-/reload", s.mutating(func(w http.ResponseWriter, _ *http.Request) {
		if s.reloads == nil {
			http.Error(w, "no tiers file to reload (--tiers-file is not set)", http.StatusBadRequest)
			return
		}
		if err := s.reloadTiers(); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		_, _ = io.WriteString(w, "reloaded\n")
	}))
	return s.guardAdmin(mux)
}

// The admin listener's protection, besides TLS and basic auth (--web-config-file):
// an optional bearer token on every path but the kubelet's probes, and the endpoints
// that change what slogate does (reload, probe, calibrate) off unless enabled.

// readAdminToken returns the bearer token in path, trimmed of surrounding space; none
// for an empty path. A file that holds no token is an error, so that a misnamed Secret
// does not leave the listener open.
func readAdminToken(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--admin-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, fmt.Errorf("--admin-token-file %s holds no token", path)
	}
	return []byte(tok), nil
}

// guardAdmin returns h behind the admin token, when there is one: every request but GET
// /healthz and /readyz (the kubelet's probes, which carry no credentials) must carry
// `Authorization: Bearer <token>`, compared in constant time, or gets 401.
func (s *Sidecar) guardAdmin(h http.Handler) http.Handler {
	if len(s.adminToken) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			h.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), s.adminToken) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="slogate admin"`)
			http.Error(w, "the admin listener needs its bearer token (--admin-token-file)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// mutating returns h, an admin endpoint that changes what slogate does, or, unless
// --enable-admin-api is set, a handler that refuses with 403 and says how to enable it.
func (s *Sidecar) mutating(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.EnableAdminAPI {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, r.URL.Path+" is off: start slogate with --enable-admin-api (SLOGATE_ENABLE_ADMIN_API=true) to use it", http.StatusForbidden)
	}
}
