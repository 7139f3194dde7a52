package sidecar

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogate/slogate/internal/simtest"
)

// The admin listener with a token and its mutating endpoints off (the default): the
// kubelet's probes need no token, everything else does, and reload, probe and
// calibrate refuse with 403 even with it. The data listener serves none of it.
func TestAdminListenerSecurity(t *testing.T) {
	const token = "s3cret-admin-token"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startTestSidecarWith(t, func(cfg *Config) {
		cfg.AdminTokenFile, cfg.EnableAdminAPI = file, false
	})
	cases := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"liveness without a token", "GET", "/healthz", "", http.StatusOK},
		{"readiness without a token", "GET", "/readyz", "", http.StatusOK},
		{"metrics without a token", "GET", "/metrics", "", http.StatusUnauthorized},
		{"metrics with a wrong token", "GET", "/metrics", "Bearer nope", http.StatusUnauthorized},
		{"metrics with the token as basic auth", "GET", "/metrics", "Basic " + token, http.StatusUnauthorized},
		{"metrics with the token", "GET", "/metrics", "Bearer " + token, http.StatusOK},
		{"status page without a token", "GET", "/", "", http.StatusUnauthorized},
		{"status page with the token", "GET", "/", "Bearer " + token, http.StatusOK},
		{"reload without a token", "POST", "/-/reload", "", http.StatusUnauthorized},
		{"reload off", "POST", "/-/reload", "Bearer " + token, http.StatusForbidden},
		{"probe off", "POST", "/-/probe", "Bearer " + token, http.StatusForbidden},
		{"calibrate off", "POST", "/-/calibrate", "Bearer " + token, http.StatusForbidden},
		{"reload by GET never reaches it", "GET", "/-/reload", "Bearer " + token, http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := adminRequest(t, tc.method, ts.admin+tc.path, tc.auth); got != tc.want {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, got, tc.want)
			}
		})
	}
	// The data listener forwards to the engine and never answers slogate's admin paths.
	for _, path := range []string{"/-/reload", "/-/probe", "/-/calibrate"} {
		if got := adminRequest(t, "POST", ts.data+path, "Bearer "+token); got != http.StatusNotFound {
			t.Errorf("POST %s on the data listener: %d, want the engine's 404", path, got)
		}
	}
	if body := simtest.Get(t, ts.data+"/metrics"); strings.Contains(body, "slogate_") {
		t.Error("the data listener serves slogate's own metrics")
	}
}

func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, err string
	}{
		{"none", "", ""},
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"empty", empty, "holds no token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := readAdminToken(tc.path)
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) || tok != nil {
				t.Errorf("readAdminToken(%q) = %q, %v; want nil, %q", tc.path, tok, err, tc.err)
			}
		})
	}
}

func adminRequest(t *testing.T, method, url, auth string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
