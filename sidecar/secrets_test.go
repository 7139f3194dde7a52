package sidecar

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// Whatever clients send, slogate's metrics keep a bounded set of model names, and no
// credential (the engine's API key, a client's bearer token, the admin token) reaches
// its logs, metrics or status page: 10,000 requests with distinct model names and a
// client token go through a sidecar that logs at debug level.
func TestSecretsAndCardinality(t *testing.T) {
	const upstreamKey, clientToken = "upstream-secret-7f3a", "client-secret-91bc"
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	up := simtest.Engine(t, enginesim.Config{Profile: p})
	cfg := testConfig(up.URL)
	cfg.UpstreamAPIKey = upstreamKey
	var logs simtest.Buffer
	ts := runTestSidecar(t, cfg, Options{Logger: debugLogger(&logs)})
	base, adminURL := ts.data, ts.admin

	const n, workers = 10_000, 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				body := fmt.Sprintf(`{"model":"client-model-%d","prompt":"hi","max_tokens":1}`, i)
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+clientToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()

	metrics := simtest.Get(t, adminURL+"/metrics")
	models := map[string]bool{}
	for _, m := range regexp.MustCompile(`model="([^"]*)"`).FindAllStringSubmatch(metrics, -1) {
		models[m[1]] = true
	}
	if len(models) > 3 || !models["other"] {
		t.Errorf("%d model label values after %d distinct client models, want the served ones and \"other\": %v", len(models), n, models)
	}
	if !strings.Contains(metrics, `model="other"`) || !strings.Contains(metrics, "slogate_requests_total") {
		t.Error("the requests were not counted")
	}
	page := simtest.Get(t, adminURL+"/")
	for what, text := range map[string]string{"logs": logs.String(), "metrics": metrics, "status page": page} {
		for _, secret := range []string{upstreamKey, clientToken} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s contain the credential %q", what, secret)
			}
		}
	}
	if logs.Len() == 0 {
		t.Error("nothing was logged at debug level: the check above proves nothing")
	}
}

// debugLogger logs everything, as JSON, to w.
func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// The credentials a probe or a calibration works with — the engine's API key, a password
// in the engine's URL, the admin token and the sidecar's own probe key — reach nothing
// the sidecar produces: its probe and calibration reports in every form the admin
// listener serves, then its logs, metrics and status page.
func TestSecretsInSidecarReports(t *testing.T) {
	c := simtest.NewCredentials(t)
	key, password, adminToken, secrets := c.Key, c.Password, c.AdminToken, c.All()
	probeFile, tiersFile, tokenFile, p := c.ProbeFile, c.TiersFile, c.TokenFile, c.Profile
	engine, keyed := simtest.KeyedEngine(t, p, key)
	cfg := testConfig("http://probe:" + password + "@" + engine)
	cfg.UpstreamAPIKey, cfg.AdminTokenFile, cfg.TiersFile = key, tokenFile, tiersFile
	cfg.ProbeWorkload, cfg.ProbeInterval = probeFile, 0
	cfg.Calibrate, cfg.CalibrateRound, cfg.CalibrateOutput, cfg.SLOTTFT = true, time.Second, 8, 400*time.Millisecond
	var logs simtest.Buffer
	ts := runTestSidecar(t, cfg, Options{Logger: debugLogger(&logs)})
	sc, adminURL := ts.sc, ts.admin

	// The prober and the calibrator hold back while the other runs: one after the other.
	if code, _ := adminDo(t, http.MethodPost, adminURL+"/-/probe", adminToken); code != http.StatusAccepted {
		t.Fatalf("POST /-/probe: %d, want 202", code)
	}
	waitFor(t, "the probe to run", func() bool { return sc.prober.Status().Runs == 1 })
	if st := sc.prober.Status(); st.LastErr != "" {
		t.Fatalf("the probe failed: %s", st.LastErr)
	}
	if code, _ := adminDo(t, http.MethodPost, adminURL+"/-/calibrate", adminToken); code != http.StatusAccepted {
		t.Fatalf("POST /-/calibrate: %d, want 202", code)
	}
	simtest.WaitFor(t, "the calibration to finish", time.Minute, func() bool { st := sc.calibration.Status(); return st.Runs == 1 && !st.Running })
	if st := sc.calibration.Status(); st.LastErr != "" {
		t.Fatalf("the calibration failed: %s", st.LastErr)
	}
	if keyed.Load() == 0 {
		t.Error("no calibration request carried the engine's API key: the checks below prove little")
	}

	secrets = append(secrets, sc.probeKey)
	for _, path := range []string{
		"/probe/report.json", "/probe/report.md", "/probe/report.html",
		"/calibration/tiers.yaml", "/calibration/all/report.json", "/calibration/all/report.md", "/calibration/all/report.html",
		"/metrics", "/",
	} {
		code, body := adminDo(t, http.MethodGet, adminURL+path, adminToken)
		if code != http.StatusOK || body == "" {
			t.Errorf("GET %s: %d, %d bytes; want 200 and a document", path, code, len(body))
		}
		simtest.NoSecrets(t, "GET "+path, body, secrets)
		if path == "/calibration/tiers.yaml" && !strings.Contains(body, "probe:xxxxx@") {
			t.Errorf("the calibrated tiers do not name the engine with its password masked:\n%s", body)
		}
	}
	simtest.NoSecrets(t, "the logs", logs.String(), secrets)
}

// adminDo sends a request with the admin token and returns the status and body.
func adminDo(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return simtest.Send(t, req)
}
