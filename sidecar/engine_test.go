package sidecar

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// postBody posts a JSON body and returns the status and the answer.
func postBody(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return simtest.Send(t, req)
}

// TestRuntimeAdapterLabelled loads a LoRA adapter into the simulated vLLM while the
// sidecar runs and sends requests for it through the sidecar: they must be recorded
// under the adapter's name once the sidecar has read /v1/models again, which the first
// of them triggers, not a minute later at the scraper's next periodic read.
func TestRuntimeAdapterLabelled(t *testing.T) {
	ts := startTestSidecar(t, 5*time.Second)
	if status, body := postBody(t, ts.sc.cfg.Upstream+"/v1/load_lora_adapter", `{"lora_name":"sql-lora","lora_path":"/adapters/sql"}`); status != http.StatusOK {
		t.Fatalf("loading the adapter: %d %s", status, body)
	}
	const series = `slogate_requests_total{code="200",model="sql-lora"`
	sent := 0
	simtest.WaitFor(t, "requests for the adapter to carry its model label", 30*time.Second, func() bool {
		status, body := postBody(t, ts.data+"/v1/completions", `{"model":"sql-lora","prompt":[1,2,3],"max_tokens":2,"ignore_eos":true}`)
		if status != http.StatusOK || !strings.Contains(body, `"model":"sql-lora"`) {
			t.Fatalf("completion for the adapter through the sidecar: %d %s", status, body)
		}
		sent++
		return strings.Contains(simtest.Get(t, ts.admin+"/metrics"), series)
	})
	t.Logf("labelled after %d requests", sent)
}

// TestSleepingEngineNotReady puts the simulated vLLM to sleep (POST /sleep, as with
// VLLM_SERVER_DEV_MODE=1) behind an enforcing sidecar: /readyz answers 503 with the
// reason and requests are rejected 503 engine-down while it sleeps; after POST
// /wake_up the sidecar is ready again and requests are served.
func TestSleepingEngineNotReady(t *testing.T) {
	ts := startTestSidecarWith(t, func(cfg *Config) { cfg.Admission = "enforce" })
	body := `{"prompt":[1,2,3],"max_tokens":2,"ignore_eos":true}`
	if status, answer := postBody(t, ts.sc.cfg.Upstream+"/sleep?level=1", ""); status != http.StatusOK {
		t.Fatalf("/sleep: %d %s", status, answer)
	}
	waitFor(t, "/readyz to fail while the engine sleeps", func() bool {
		req, _ := http.NewRequest(http.MethodGet, ts.admin+"/readyz", nil)
		status, reason := simtest.Send(t, req)
		return status == http.StatusServiceUnavailable && strings.Contains(reason, "sleeping")
	})
	if code, answer := postBody(t, ts.data+"/v1/completions", body); code != http.StatusServiceUnavailable || !strings.Contains(answer, "engine") {
		t.Errorf("completion while the engine sleeps: %d %s, want 503 engine-down", code, answer)
	}
	if !strings.Contains(simtest.Get(t, ts.admin+"/metrics"), `slogate_admission_decisions_total{class="interactive",decision="rejected",reason="engine-down"`) {
		t.Error("no engine-down rejection recorded")
	}
	if status, answer := postBody(t, ts.sc.cfg.Upstream+"/wake_up", ""); status != http.StatusOK {
		t.Fatalf("/wake_up: %d %s", status, answer)
	}
	waitFor(t, "/readyz to pass after wake_up", func() bool { return simtest.Status(ts.admin+"/readyz") == http.StatusOK })
	if status, answer := postBody(t, ts.data+"/v1/completions", body); status != http.StatusOK {
		t.Errorf("completion after wake_up: %d %s", status, answer)
	}
}

// TestSGLangPriorityNotDoubled runs an enforcing sidecar in front of the simulated
// SGLang with priority scheduling, whose running and queued requests appear twice per
// family (total under priority="", breakdown under priority="0"). With 2 running and 4
// waiting, half the saturation queue of 8, the sidecar must report 4 waiting and not
// declare the engine saturated, as it would if it added the breakdown to the total.
func TestSGLangPriorityNotDoubled(t *testing.T) {
	p, _ := enginesim.LookupProfile("tiny")
	p.Timing = enginesim.Timing{StepBase: 0.005}
	p.PriorityScheduling, p.MaxNumSeqs = true, 2
	up := simtest.Engine(t, enginesim.Config{Profile: p, Flavor: enginesim.FlavorSGLang})
	cfg := testConfig(up.URL)
	cfg.Engine, cfg.Admission = "sglang", "enforce"
	ts := runTestSidecar(t, cfg, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var load sync.WaitGroup
	t.Cleanup(func() { cancel(); load.Wait() })
	for range 6 { // straight to the engine: seconds of generation each, until cancelled
		load.Go(func() { longStream(ctx, up.URL) })
	}
	want := []string{"slogate_engine_running_requests 2", "slogate_engine_waiting_requests 4", `slogate_admission_engine_state{state="ok"} 1`}
	waitFor(t, "the sidecar to read 2 running and 4 waiting, not saturated", func() bool {
		metrics := simtest.Get(t, ts.admin+"/metrics")
		for _, w := range want {
			if !strings.Contains(metrics, w+"\n") {
				return false
			}
		}
		return true
	})
}

// longStream streams a completion of 4000 tokens from base until ctx ends.
func longStream(ctx context.Context, base string) {
	body := strings.NewReader(`{"prompt":[1,2,3],"max_tokens":4000,"ignore_eos":true,"stream":true}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", body)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
