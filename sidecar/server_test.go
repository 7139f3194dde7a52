package sidecar

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/slogate/slogate/exporter"
)

// get sends one request and returns the status, content type and body.
func get(t *testing.T, c *http.Client, method, url string, edit func(*http.Request)) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// servedRegistry returns the registry of a sidecar in front of the simulator after one
// request went through it: every metric family slogate serves has samples.
func servedRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	ts := startTestSidecar(t, time.Second)
	resp, err := http.Post(ts.data+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return ts.sc.reg
}

func TestAdminHandler(t *testing.T) {
	reg := servedRegistry(t)
	var notReady atomic.Pointer[error]
	srv := httptest.NewServer(healthAndMetrics(reg, func() error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}))
	defer srv.Close()
	engineDown := errors.New("engine: not scraped yet")
	accept := func(v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set("Accept", v) } }
	tests := []struct {
		name       string
		method     string
		path       string
		notReady   error
		edit       func(*http.Request)
		wantStatus int
		wantBody   string // a substring; "" to skip
		wantType   string // a prefix; "" to skip
	}{
		{"healthz", "GET", "/healthz", nil, nil, 200, "ok", "text/plain"},
		{"healthz while not ready", "GET", "/healthz", engineDown, nil, 200, "ok", "text/plain"},
		{"readyz ready", "GET", "/readyz", nil, nil, 200, "ok", "text/plain"},
		{"readyz not ready", "GET", "/readyz", engineDown, nil, 503, "engine: not scraped yet", "text/plain"},
		{"metrics text", "GET", "/metrics", nil, accept("text/plain;version=0.0.4"), 200, "slogate_requests_total{", "text/plain"},
		{"metrics openmetrics", "GET", "/metrics", nil, accept("application/openmetrics-text;version=1.0.0"), 200, "# EOF", "application/openmetrics-text"},
		{"metrics not ready still served", "GET", "/metrics", engineDown, nil, 200, "slogate_engine_up 1", ""},
		{"head healthz", "HEAD", "/healthz", nil, nil, 200, "", ""},
		{"post metrics", "POST", "/metrics", nil, nil, 405, "", ""},
		{"unknown path", "GET", "/debug/pprof/", nil, nil, 404, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.notReady != nil {
				notReady.Store(&tc.notReady)
			} else {
				notReady.Store(nil)
			}
			status, ctype, body := get(t, srv.Client(), tc.method, srv.URL+tc.path, tc.edit)
			if status != tc.wantStatus {
				t.Errorf("status %d, want %d (body %q)", status, tc.wantStatus, body)
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("body does not contain %q:\n%.500s", tc.wantBody, body)
			}
			if !strings.HasPrefix(ctype, tc.wantType) {
				t.Errorf("Content-Type %q, want %q...", ctype, tc.wantType)
			}
		})
	}
}

// writeWebConfig writes an exporter-toolkit web config with one basic-auth user.
func writeWebConfig(t *testing.T, user, password string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "web.yml")
	cfg := "basic_auth_users:\n  " + user + ": " + string(hash) + "\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAdmin starts serveAdmin on a loopback port and returns its base URL and a stop
// function that cancels it and returns what it returned.
func startAdmin(t *testing.T, h http.Handler, webConfig string) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveAdmin(ctx, ln, h, webConfig, nil) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second): // a deadlock guard, not a timing assertion
			t.Fatal("serveAdmin did not return after its context ended")
			return nil
		}
	}
	return "http://" + ln.Addr().String(), stop
}

func TestServeAdminBasicAuth(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter.New(reg, exporter.Options{})
	base, stop := startAdmin(t, healthAndMetrics(reg, nil), writeWebConfig(t, "prometheus", "s3cret"))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	auth := func(user, pass string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(user, pass) }
	}
	tests := []struct {
		name string
		edit func(*http.Request)
		want int
	}{
		{"no credentials", nil, http.StatusUnauthorized},
		{"wrong password", auth("prometheus", "guess"), http.StatusUnauthorized},
		{"unknown user", auth("mallory", "s3cret"), http.StatusUnauthorized},
		{"right credentials", auth("prometheus", "s3cret"), http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/metrics", "/healthz"} {
				if status, _, body := get(t, client, "GET", base+path, tc.edit); status != tc.want {
					t.Errorf("GET %s: status %d, want %d (body %q)", path, status, tc.want, body)
				}
			}
		})
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Errorf("serveAdmin returned %v, want nil", err)
	}
}

func TestServeAdminPlainAndShutdown(t *testing.T) {
	base, stop := startAdmin(t, healthAndMetrics(prometheus.NewRegistry(), nil), "")
	client := &http.Client{Transport: &http.Transport{}}
	if status, _, body := get(t, client, "GET", base+"/healthz", nil); status != 200 || body != "ok" {
		t.Errorf("GET /healthz: %d %q, want 200 \"ok\"", status, body)
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Errorf("serveAdmin returned %v, want nil", err)
	}
	if _, err := net.Dial("tcp", strings.TrimPrefix(base, "http://")); err == nil {
		t.Error("the listener is still open after shutdown")
	}
}

func TestServeAdminBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		config string // file contents; "" for a missing file
	}{
		{"missing file", ""},
		{"not yaml", "basic_auth_users: [unclosed"},
		{"unknown field", "no_such_setting: true\n"},
		{"password not hashed", "basic_auth_users:\n  alice: plaintext\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "web.yml")
			if tc.config != "" {
				if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			err = serveAdmin(context.Background(), ln, http.NotFoundHandler(), path, nil)
			if err == nil {
				t.Error("serveAdmin accepted a bad web config")
			}
			if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				t.Error("the listener is still open after the failure")
			}
		})
	}
}
