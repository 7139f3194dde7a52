package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/wire"
)

// TestMain runs the slogate command itself when a test re-executes the test binary with
// runMainEnv set (see TestServeSIGTERM); otherwise the tests, checked for leaks.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

const runMainEnv = "SLOGATE_TEST_RUN_MAIN"

// TestSimCommand runs `slogate sim` as a user would and checks the acceptance:
// a streaming completion with max_tokens 16 and include_usage returns 16 output tokens,
// one usage chunk and [DONE], and /metrics carries the chosen flavour's names.
func TestSimCommand(t *testing.T) {
	cases := []struct {
		flavor      string
		want, avoid string
	}{
		{"vllm", "vllm:num_requests_running", "sglang:"},
		{"sglang", "sglang:num_running_reqs", "vllm:"},
	}
	for _, tc := range cases {
		t.Run(tc.flavor, func(t *testing.T) {
			base := startCommand(t, "sim", "--profile", "tiny", "--flavor", tc.flavor)
			body := `{"model":"sim-tiny","prompt":"hello there","max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`
			resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var tokens, usageChunks, done int
			r := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if ev.IsDone() {
					done++
					continue
				}
				c, err := wire.DecodeChunk(ev.Data)
				if err != nil {
					t.Fatal(err)
				}
				if c.OutputBytes() > 0 {
					tokens++
				}
				if c.UsageOnly() {
					usageChunks++
					if c.Usage.CompletionTokens != 16 {
						t.Errorf("usage reports %d completion tokens, want 16", c.Usage.CompletionTokens)
					}
				}
			}
			if tokens != 16 || usageChunks != 1 || done != 1 {
				t.Errorf("got %d output chunks, %d usage chunks, %d [DONE]; want 16, 1, 1", tokens, usageChunks, done)
			}
			metrics := get(t, base+"/metrics")
			if !strings.Contains(metrics, tc.want) || strings.Contains(metrics, tc.avoid) {
				t.Errorf("/metrics of the %s flavour: want %q and no %q", tc.flavor, tc.want, tc.avoid)
			}
		})
	}
}

func TestDemoCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"demo", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--load", "--duration", "3s"}
	code := run(context.Background(), args, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	out := stdout.String()
	var measured int
	if i := strings.Index(out, "slogate measured "); i < 0 {
		t.Fatalf("demo output lacks its summary:\n%s", out)
	} else if _, err := fmt.Sscanf(out[i:], "slogate measured %d", &measured); err != nil || measured == 0 {
		t.Errorf("demo measured %d requests (%v), want some:\n%s", measured, err, out)
	}
}

// startCommand runs a serving subcommand on a free loopback port until the test ends and
// returns its base URL once /health answers.
func startCommand(t *testing.T, name string, args ...string) string {
	t.Helper()
	addr := simtest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var stderr bytes.Buffer
	wg.Go(func() {
		if code := run(ctx, append([]string{name, "--listen", addr}, args...), io.Discard, &stderr); code != 0 {
			t.Errorf("%s exited %d: %s", name, code, stderr.String())
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	base := "http://" + addr
	simtest.WaitFor(t, name+" to become healthy on "+addr, 10*time.Second, func() bool {
		return simtest.Status(base+"/health") == http.StatusOK
	})
	return base
}

func get(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, body := simtest.Send(t, req)
	return body
}

// TestSimCaps: the admission-cap flags of slogate sim reach the simulator's
// configuration, and a cap of the other engine's flavour fails the start.
func TestSimCaps(t *testing.T) {
	cases := []struct {
		args         []string
		reqs, tokens int
		queued       int
		startFails   bool
	}{
		{args: nil},
		{args: []string{"--max-num-queued-reqs", "64", "--max-num-queued-tokens", "25856"}, reqs: 64, tokens: 25856},
		{args: []string{"--flavor", "sglang", "--max-queued-requests", "32"}, queued: 32},
		{args: []string{"--flavor", "sglang", "--max-num-queued-reqs", "64"}, reqs: 64, startFails: true},
		{args: []string{"--max-queued-requests", "32"}, queued: 32, startFails: true},
		{args: []string{"--max-num-queued-tokens", "-1"}, tokens: -1, startFails: true},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var set simSettings
			if err := loadSettings("sim", "", &set, tc.args, io.Discard); err != nil {
				t.Fatal(err)
			}
			cfg, err := simConfig(set)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxNumQueuedReqs != tc.reqs || cfg.MaxNumQueuedTokens != tc.tokens || cfg.MaxQueuedRequests != tc.queued {
				t.Errorf("caps %d/%d/%d, want %d/%d/%d", cfg.MaxNumQueuedReqs, cfg.MaxNumQueuedTokens, cfg.MaxQueuedRequests, tc.reqs, tc.tokens, tc.queued)
			}
			if _, err := enginesim.NewServer(cfg); (err != nil) != tc.startFails {
				t.Errorf("NewServer: %v; want failure %v", err, tc.startFails)
			}
		})
	}
}

// TestSimLongPrefill: --long-prefill-token-threshold reaches the profile the simulator
// schedules by, and a negative one is refused.
func TestSimLongPrefill(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		ok   bool
	}{
		{nil, 0, true},
		{[]string{"--long-prefill-token-threshold", "2048"}, 2048, true},
		{[]string{"--long-prefill-token-threshold", "-1"}, 0, false},
	} {
		var set simSettings
		if err := loadSettings("sim", "", &set, tc.args, io.Discard); err != nil {
			t.Fatal(err)
		}
		cfg, err := simConfig(set)
		if (err == nil) != tc.ok || err == nil && cfg.Profile.LongPrefillTokenThreshold != tc.want {
			t.Errorf("%v: threshold %d, err %v; want %d, ok %v", tc.args, cfg.Profile.LongPrefillTokenThreshold, err, tc.want, tc.ok)
		}
	}
}
