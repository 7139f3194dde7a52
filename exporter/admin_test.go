package exporter

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
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"
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

func TestAdminHandler(t *testing.T) {
	_, reg := fullRegistry(t, false)
	var notReady atomic.Pointer[error]
	srv := httptest.NewServer(AdminHandler(reg, func() error {
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

func TestMetricsExpositionParses(t *testing.T) {
	_, reg := fullRegistry(t, true)
	srv := httptest.NewServer(AdminHandler(reg, nil))
	defer srv.Close()
	_, _, body := get(t, srv.Client(), "GET", srv.URL+"/metrics", nil)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	for _, name := range []string{
		"slogate_requests_total", "slogate_time_to_first_token_seconds", "slogate_time_per_output_token_seconds",
		"slogate_inter_token_gap_seconds", "slogate_e2e_request_duration_seconds", "slogate_prompt_tokens_total",
		"slogate_generation_tokens_total", "slogate_inflight_requests", "slogate_inflight_kv_tokens",
		"slogate_engine_up", "slogate_engine_info", "slogate_engine_kv_cache_usage_ratio",
		"slogate_engine_preemptions_total", "slogate_engine_scrape_age_seconds", "slogate_build_info",
		"slogate_queue_wait_seconds", "slogate_admission_decisions_total", "slogate_admission_mode",
		"slogate_admission_engine_state", "slogate_admission_inflight_requests", "slogate_admission_inflight_limit",
		"slogate_admission_inflight_limit_min", "slogate_admission_inflight_limit_max", "slogate_admission_queue_length",
		"slogate_admission_queue_limit", "slogate_admission_queue_wait_limit_seconds", "slogate_admission_rate_limit",
		"slogate_admission_slo_seconds", "slogate_admission_observed_p95_seconds", "slogate_admission_service_rate",
		"slogate_admission_tier_max_input_tokens", "slogate_admission_config_last_reload_successful",
		"slogate_admission_config_last_reload_success_timestamp_seconds",
		"go_goroutines", "process_start_time_seconds",
	} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing from /metrics", name)
		}
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

// serveAdmin starts ServeAdmin on a loopback port and returns its base URL and a stop
// function that cancels it and returns what it returned.
func serveAdmin(t *testing.T, h http.Handler, webConfig string) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeAdmin(ctx, ln, h, webConfig, nil) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second): // a deadlock guard, not a timing assertion
			t.Fatal("ServeAdmin did not return after its context ended")
			return nil
		}
	}
	return "http://" + ln.Addr().String(), stop
}

func TestServeAdminBasicAuth(t *testing.T) {
	_, reg := newMetrics(t, Options{})
	base, stop := serveAdmin(t, AdminHandler(reg, nil), writeWebConfig(t, "prometheus", "s3cret"))
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
		t.Errorf("ServeAdmin returned %v, want nil", err)
	}
}

func TestServeAdminPlainAndShutdown(t *testing.T) {
	base, stop := serveAdmin(t, AdminHandler(prometheus.NewRegistry(), nil), "")
	client := &http.Client{Transport: &http.Transport{}}
	if status, _, body := get(t, client, "GET", base+"/healthz", nil); status != 200 || body != "ok" {
		t.Errorf("GET /healthz: %d %q, want 200 \"ok\"", status, body)
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Errorf("ServeAdmin returned %v, want nil", err)
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
			err = ServeAdmin(context.Background(), ln, http.NotFoundHandler(), path, nil)
			if err == nil {
				t.Error("ServeAdmin accepted a bad web config")
			}
			if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				t.Error("the listener is still open after the failure")
			}
		})
	}
}
