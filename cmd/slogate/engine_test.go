package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// postBody posts a JSON body and returns the status and the answer.
func postBody(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return send(t, req)
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
	waitForLong(t, "requests for the adapter to carry its model label", 30*time.Second, func() bool {
		status, body := postBody(t, ts.data+"/v1/completions", `{"model":"sql-lora","prompt":[1,2,3],"max_tokens":2,"ignore_eos":true}`)
		if status != http.StatusOK || !strings.Contains(body, `"model":"sql-lora"`) {
			t.Fatalf("completion for the adapter through the sidecar: %d %s", status, body)
		}
		sent++
		return strings.Contains(get(t, ts.admin+"/metrics"), series)
	})
	t.Logf("labelled after %d requests", sent)
}
