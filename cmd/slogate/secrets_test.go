package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
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
	up := startTestEngine(t, enginesim.Config{Profile: p})
	cfg, err := demoSidecarSettings(strings.TrimPrefix(up.URL, "http://"), "debug")
	if err != nil {
		t.Fatal(err)
	}
	cfg.UpstreamAPIKey = upstreamKey
	var logs syncBuffer
	ts := runTestSidecar(t, cfg, debugLogger(&logs))
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

	metrics := get(t, adminURL+"/metrics")
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
	page := get(t, adminURL+"/")
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
// they produce: the sidecar's probe and calibration reports in every form the admin
// listener serves, with its logs, metrics and status page after them; the files and
// output of `slogate probe` and `slogate calibrate`; and those commands' usage text,
// with the key in the environment.
func TestSecretsInReports(t *testing.T) {
	const key, password, adminToken = "upstream-secret-5d2e", "url-secret-c4a1", "admin-secret-0b7f"
	secrets := []string{key, password, adminToken}
	dir := t.TempDir()
	probeFile, tiersFile, tokenFile := filepath.Join(dir, "probe.yaml"), filepath.Join(dir, "tiers.yaml"), filepath.Join(dir, "admin-token")
	for path, text := range map[string]string{probeFile: testProbeWorkload, tiersFile: guessedTiers, tokenFile: adminToken + "\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An engine of eight sequences at 5 ms a token: its knee, near 200 requests/s of 8
	// tokens, takes one-second rounds six points or so to find (about 8 s).
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	p.MaxNumSeqs, p.Timing = 8, enginesim.Timing{StepBase: 0.005}
	calibrateArgs := []string{"--tiers-file", tiersFile, "--round", "1s", "--output", "8", "--slo-ttft", "400ms"}

	t.Run("usage text", func(t *testing.T) { // not parallel: it sets the environment
		t.Setenv("SLOGATE_UPSTREAM_API_KEY", key)
		for _, args := range [][]string{{"probe", "--no-such-flag"}, {"help", "probe"}, {"calibrate", "--no-such-flag"}, {"help", "calibrate"}} {
			var out bytes.Buffer
			run(context.Background(), args, &out, &out)
			if !strings.Contains(out.String(), "-api-key") {
				t.Fatalf("slogate %s printed no usage text:\n%s", strings.Join(args, " "), out.String())
			}
			checkNoSecrets(t, "the output of slogate "+strings.Join(args, " "), out.String(), secrets)
		}
	})

	t.Run("sidecar", func(t *testing.T) {
		t.Parallel()
		engine, keyed := keyedEngine(t, p, key)
		cfg, err := demoSidecarSettings("probe:"+password+"@"+engine, "debug")
		if err != nil {
			t.Fatal(err)
		}
		cfg.UpstreamAPIKey, cfg.AdminTokenFile, cfg.TiersFile = key, tokenFile, tiersFile
		cfg.ProbeWorkload, cfg.ProbeInterval = probeFile, 0
		cfg.Calibrate, cfg.CalibrateRound, cfg.CalibrateOutput, cfg.SLOTTFT = true, time.Second, 8, 400*time.Millisecond
		var logs syncBuffer
		ts := runTestSidecar(t, cfg, debugLogger(&logs))
		sc, adminURL := ts.sc, ts.admin
		waitFor(t, "the prober to be scheduled", func() bool { return sc.prober.Load() != nil })

		// The prober and the calibrator hold back while the other runs: one after the other.
		if code, _ := adminDo(t, http.MethodPost, adminURL+"/-/probe", adminToken); code != http.StatusAccepted {
			t.Fatalf("POST /-/probe: %d, want 202", code)
		}
		waitFor(t, "the probe to run", func() bool { return sc.prober.Load().Status().Runs == 1 })
		if st := sc.prober.Load().Status(); st.LastErr != "" {
			t.Fatalf("the probe failed: %s", st.LastErr)
		}
		if code, _ := adminDo(t, http.MethodPost, adminURL+"/-/calibrate", adminToken); code != http.StatusAccepted {
			t.Fatalf("POST /-/calibrate: %d, want 202", code)
		}
		waitForLong(t, "the calibration to finish", time.Minute, func() bool { st := sc.calibration.Status(); return st.Runs == 1 && !st.Running })
		if st := sc.calibration.Status(); st.LastErr != "" {
			t.Fatalf("the calibration failed: %s", st.LastErr)
		}
		if keyed.Load() == 0 {
			t.Error("no calibration request carried the engine's API key: the checks below prove little")
		}

		secrets := append(secrets, sc.probeKey)
		for _, path := range []string{
			"/probe/report.json", "/probe/report.md", "/probe/report.html",
			"/calibration/tiers.yaml", "/calibration/all/report.json", "/calibration/all/report.md", "/calibration/all/report.html",
			"/metrics", "/",
		} {
			code, body := adminDo(t, http.MethodGet, adminURL+path, adminToken)
			if code != http.StatusOK || body == "" {
				t.Errorf("GET %s: %d, %d bytes; want 200 and a document", path, code, len(body))
			}
			checkNoSecrets(t, "GET "+path, body, secrets)
			if path == "/calibration/tiers.yaml" && !strings.Contains(body, "probe:xxxxx@") {
				t.Errorf("the calibrated tiers do not name the engine with its password masked:\n%s", body)
			}
		}
		checkNoSecrets(t, "the logs", logs.String(), secrets)
	})

	t.Run("probe command", func(t *testing.T) {
		t.Parallel()
		engine, keyed := keyedEngine(t, p, key)
		out := t.TempDir()
		args := []string{"probe", "--target", "http://probe:" + password + "@" + engine, "--api-key", key, "--workload", probeFile, "--out", out}
		checkCommand(t, args, out, secrets)
		if keyed.Load() == 0 {
			t.Error("no probe request carried the engine's API key")
		}
	})

	t.Run("calibrate command", func(t *testing.T) {
		t.Parallel()
		engine, keyed := keyedEngine(t, p, key)
		out := t.TempDir()
		args := append([]string{"calibrate", "--target", "http://probe:" + password + "@" + engine, "--api-key", key, "--out", filepath.Join(out, "tiers.yaml")}, calibrateArgs...)
		checkCommand(t, args, out, secrets)
		if keyed.Load() == 0 {
			t.Error("no calibration request carried the engine's API key")
		}
	})
}

// keyedEngine serves a simulator of profile p on loopback and returns its host:port and
// a count of the completions requests that carried key as their bearer token, which
// shows the key was sent; it serves requests without the key too.
func keyedEngine(t *testing.T, p enginesim.Profile, key string) (string, *atomic.Int64) {
	t.Helper()
	sim, err := enginesim.NewServer(enginesim.Config{Profile: p})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go sim.Run(ctx)
	var keyed atomic.Int64
	h := sim.Handler()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Authorization") == "Bearer "+key {
			keyed.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { up.Close(); stop() })
	return strings.TrimPrefix(up.URL, "http://"), &keyed
}

// checkCommand runs slogate with args, which must succeed, and checks its output and
// every file it wrote under dir for the secrets.
func checkCommand(t *testing.T, args []string, dir string, secrets []string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("slogate %s exited %d:\n%s", args[0], code, stderr.String())
	}
	checkNoSecrets(t, "slogate "+args[0]+"'s output", stdout.String()+stderr.String(), secrets)
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		checkNoSecrets(t, path, string(b), secrets)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Errorf("slogate %s wrote nothing under %s", args[0], dir)
	}
	t.Logf("slogate %s: %d files checked", args[0], files)
}

// adminDo sends a request with the admin token and returns the status and body.
func adminDo(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return send(t, req)
}

// checkNoSecrets fails the test for each secret that text, the named output, contains.
func checkNoSecrets(t *testing.T, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s contains the credential %q", what, s)
		}
	}
}
