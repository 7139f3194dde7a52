package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

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
	sim, err := enginesim.NewServer(enginesim.Config{Profile: p})
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(context.Background())
	go sim.Run(simCtx)
	up := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { up.Close(); stopSim() })

	cfg, err := demoSidecarSettings(strings.TrimPrefix(up.URL, "http://"), "debug")
	if err != nil {
		t.Fatal(err)
	}
	cfg.UpstreamAPIKey = upstreamKey
	var logs lockedBuffer
	sc, err := newSidecar(cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	data, admin, err := listenPair("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.run(ctx, data, admin) }()
	t.Cleanup(func() { stop(); <-done })
	base, adminURL := "http://"+data.Addr().String(), "http://"+admin.Addr().String()
	waitFor(t, "the sidecar to be ready", func() bool { return status(adminURL+"/readyz") == http.StatusOK })

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

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
