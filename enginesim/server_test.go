package enginesim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/wire"
)

func TestModels(t *testing.T) {
	for _, flavor := range []Flavor{FlavorVLLM, FlavorSGLang} {
		t.Run(string(flavor), func(t *testing.T) {
			sim := startSim(t, Config{Flavor: flavor})
			status, _, data := sim.do(http.MethodGet, "/v1/models", "", nil)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			var list struct {
				Object string `json:"object"`
				Data   []struct {
					ID          string `json:"id"`
					Object      string `json:"object"`
					Root        string `json:"root"`
					OwnedBy     string `json:"owned_by"`
					MaxModelLen int    `json:"max_model_len"`
					Created     int64  `json:"created"`
				} `json:"data"`
			}
			if err := json.Unmarshal(data, &list); err != nil {
				t.Fatal(err)
			}
			if list.Object != "list" || len(list.Data) != 1 {
				t.Fatalf("models = %s, want a list of one", data)
			}
			m := list.Data[0]
			if m.ID != tinyModel || m.Object != "model" || m.Root != tinyModel || m.MaxModelLen != 4096 || m.OwnedBy != string(flavor) || m.Created <= 0 {
				t.Errorf("model card = %+v", m)
			}
			// The SDK reads the same list.
			page, err := sim.client.Models.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Data) != 1 || page.Data[0].ID != tinyModel {
				t.Errorf("SDK models = %+v", page.Data)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		sim := startSim(t, Config{})
		if status, _, _ := sim.do(http.MethodGet, "/health", "", nil); status != http.StatusOK {
			t.Errorf("status %d, want 200", status)
		}
	})
	t.Run("starting", func(t *testing.T) {
		sim := startSim(t, Config{NotReadyFor: time.Hour})
		if status, _, body := sim.do(http.MethodGet, "/health", "", nil); status != http.StatusServiceUnavailable || len(body) != 0 {
			t.Errorf("status %d body %q, want 503 and no body", status, body)
		}
		status, _, body := sim.do(http.MethodPost, "/v1/completions", `{"prompt":"hi"}`, nil)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("inference while starting: status %d, want 503", status)
		}
		if e := apiError(t, body); e.Code != 503 || e.Type != wire.TypeEngineInternalServer {
			t.Errorf("error = %+v", e)
		}
		if st := sim.srv.Stats(); st.finishedTotal() != 0 || st.Waiting != 0 {
			t.Errorf("a request reached the engine while it was starting: %+v", st)
		}
	})
	t.Run("becomes ready", func(t *testing.T) {
		const startUp = 200 * time.Millisecond
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		sim := startSim(t, Config{NotReadyFor: startUp, Clock: clk})
		clk.Step(startUp - time.Nanosecond)
		if status, _, _ := sim.do(http.MethodGet, "/health", "", nil); status != http.StatusServiceUnavailable {
			t.Fatalf("a nanosecond before the start-up ends: status %d, want 503", status)
		}
		clk.Step(time.Nanosecond)
		if status, _, _ := sim.do(http.MethodGet, "/health", "", nil); status != http.StatusOK {
			t.Fatalf("once the start-up has ended: status %d, want 200", status)
		}
		status, _, body := sim.do(http.MethodPost, "/v1/completions", `{"prompt":"hi","max_tokens":2}`, nil)
		if status != http.StatusOK {
			t.Errorf("inference once ready: status %d body %s", status, body)
		}
	})
}

// TestServerInfo: each flavour answers the engine's own questions about itself (SGLang's
// server info under both its paths, vLLM's /version) from the profile, and not the other's.
func TestServerInfo(t *testing.T) {
	cases := []struct {
		flavor Flavor
		path   string
		status int
	}{
		{FlavorSGLang, "/server_info", 200},
		{FlavorSGLang, "/get_server_info", 200},
		{FlavorSGLang, "/version", 404},
		{FlavorVLLM, "/get_server_info", 404},
		{FlavorVLLM, "/server_info", 404},
		{FlavorVLLM, "/version", 200},
	}
	for _, tc := range cases {
		t.Run(string(tc.flavor)+tc.path, func(t *testing.T) {
			p := tinyProfile(t, func(p *Profile) { p.Speculation = Speculation{DraftTokens: 3, AcceptRate: 0.5} })
			sim := startSim(t, Config{Flavor: tc.flavor, Profile: p})
			status, _, data := sim.do(http.MethodGet, tc.path, "", nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			if status != http.StatusOK {
				return
			}
			if tc.path == "/version" {
				var v map[string]string
				if err := json.Unmarshal(data, &v); err != nil || len(v) != 1 || v["version"] != simVersion {
					t.Errorf("/version = %s (%v), want {\"version\": %q}", data, err, simVersion)
				}
				return
			}
			var info struct {
				MaxTotalNumTokens  int     `json:"max_total_num_tokens"`
				MaxReqInputLen     int     `json:"max_req_input_len"`
				PageSize           int     `json:"page_size"`
				ServedModelName    string  `json:"served_model_name"`
				ContextLength      int     `json:"context_length"`
				MaxRunningRequests int     `json:"max_running_requests"`
				ChunkedPrefill     int     `json:"chunked_prefill_size"`
				DisableRadixCache  bool    `json:"disable_radix_cache"`
				SpecSteps          int     `json:"speculative_num_steps"`
				SpecDraftTokens    int     `json:"speculative_num_draft_tokens"`
				APIKey             *string `json:"api_key"`
				Status             string  `json:"status"`
				Version            string  `json:"version"`
				InternalStates     []struct {
					MaxRunningRequests int `json:"max_running_requests"`
				} `json:"internal_states"`
			}
			if err := json.Unmarshal(data, &info); err != nil {
				t.Fatal(err)
			}
			if info.MaxTotalNumTokens != p.KVCapacity() || info.PageSize != p.BlockSize || info.ServedModelName != p.Model ||
				info.ContextLength != p.MaxModelLen || info.MaxReqInputLen != p.MaxModelLen-1 ||
				info.MaxRunningRequests != p.MaxNumSeqs || info.ChunkedPrefill != p.MaxBatchedTokens ||
				info.DisableRadixCache != !p.PrefixCaching || info.SpecSteps != 3 || info.SpecDraftTokens != 4 ||
				info.APIKey != nil || info.Status != "ready" || info.Version != simVersion ||
				len(info.InternalStates) != 1 || info.InternalStates[0].MaxRunningRequests != p.MaxNumSeqs {
				t.Errorf("server info = %+v, want the profile's %+v", info, p)
			}
		})
	}
}

func TestNewServerRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no profile", Config{}},
		{"unknown flavor", Config{Profile: tinyProfile(t, nil), Flavor: "tgi"}},
		{"invalid profile", Config{Profile: tinyProfile(t, func(p *Profile) { p.NumBlocks = 1 })}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewServer(tc.cfg); err == nil {
				t.Error("NewServer accepted it")
			}
		})
	}
}

// abortedCount returns the flavour's count of aborted requests from /metrics.
func (e *simEnv) abortedCount() float64 {
	e.t.Helper()
	fams := e.scrape()
	if e.srv.cfg.Flavor == FlavorSGLang {
		return metricValue(e.t, fams, "sglang:num_aborted_requests_total", nil)
	}
	return metricValue(e.t, fams, "vllm:request_success_total", map[string]string{"finished_reason": "abort"})
}

// idle reports whether the engine holds no request and no KV block.
func (e *simEnv) idle() (bool, string) {
	st := e.srv.Stats()
	return st.Running == 0 && st.Waiting == 0 && st.UsedBlocks == 0,
		fmt.Sprintf("running %d waiting %d used blocks %d", st.Running, st.Waiting, st.UsedBlocks)
}

// TestClientDisconnect cancels a long stream after a few chunks: the engine must abort
// it, freeing its batch slot and KV blocks, and count the abort.
func TestClientDisconnect(t *testing.T) {
	for _, flavor := range []Flavor{FlavorVLLM, FlavorSGLang} {
		t.Run(string(flavor), func(t *testing.T) {
			sim := startSim(t, Config{Flavor: flavor})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := sim.client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
				Model:     tinyModel,
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("a long answer, please")},
				MaxTokens: openai.Int(4000),
			}, option.WithJSONSet("ignore_eos", true))
			for i := 0; i < 3; i++ {
				if !s.Next() {
					t.Fatalf("stream ended after %d chunks: %v", i, s.Err())
				}
			}
			if st := sim.srv.Stats(); st.Running != 1 || st.UsedBlocks == 0 {
				t.Fatalf("while streaming: %+v, want one running request holding blocks", st)
			}
			cancel()
			s.Close()
			sim.await("the engine drops the request", sim.idle)
			sim.await("the abort is counted", func() (bool, string) {
				n := sim.abortedCount()
				return n == 1, fmt.Sprint("aborted ", n)
			})
			st := sim.srv.Stats()
			if st.FinishedByReason["length"] != 0 || st.GenerationTokens >= 4000 {
				t.Errorf("the request ran to its end anyway: %+v", st)
			}
		})
	}
}

// TestQueuedClientDisconnect cancels a request while it waits for a batch slot.
func TestQueuedClientDisconnect(t *testing.T) {
	p := tinyProfile(t, func(p *Profile) { p.MaxNumSeqs = 1 })
	sim := startSim(t, Config{Profile: p})
	open := func(ctx context.Context) interface {
		Next() bool
		Close() error
		Err() error
	} {
		return sim.client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model:     tinyModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 2, 3, 4, 5}},
			MaxTokens: openai.Int(4000),
		}, option.WithJSONSet("ignore_eos", true))
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := open(ctxA)
	defer a.Close()
	if !a.Next() {
		t.Fatalf("first stream: %v", a.Err())
	}
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	b := open(ctxB) // returns once the headers arrive; the request is queued by then
	defer b.Close()
	sim.await("the second request waits", func() (bool, string) {
		st := sim.srv.Stats()
		return st.Running == 1 && st.Waiting == 1, fmt.Sprintf("%+v", st)
	})
	cancelB()
	b.Close()
	sim.await("the queued request is dropped", func() (bool, string) {
		st := sim.srv.Stats()
		n := sim.abortedCount()
		return st.Waiting == 0 && n == 1, fmt.Sprintf("waiting %d aborted %v", st.Waiting, n)
	})
	if st := sim.srv.Stats(); st.Running != 1 {
		t.Errorf("the running request was disturbed: %+v", st)
	}
	if !a.Next() {
		t.Fatalf("first stream stopped: %v", a.Err())
	}
	cancelA()
	a.Close()
	sim.await("the engine is idle", sim.idle)
	sim.await("both aborts are counted", func() (bool, string) {
		n := sim.abortedCount()
		return n == 2, fmt.Sprint("aborted ", n)
	})
}

// TestSpeculativeStream checks a profile with speculative decoding, where one chunk
// carries several tokens: the tokens still add up to usage and max_tokens.
func TestSpeculativeStream(t *testing.T) {
	p := tinyProfile(t, func(p *Profile) { p.Speculation = Speculation{DraftTokens: 7, AcceptRate: 1} })
	sim := startSim(t, Config{Profile: p})
	got := sim.stream(context.Background(), "/v1/completions",
		`{"prompt":[1,2,3],"max_tokens":17,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, nil, nil)
	text, chunks := got.output()
	if !got.done || sim.countText(text) != 17 || got.usageOnly()[0].Usage.CompletionTokens != 17 {
		t.Fatalf("done %v, text %d tokens; want [DONE] and 17 tokens", got.done, sim.countText(text))
	}
	// The first token comes from prefill; every decode step then yields 1 + 7 accepted.
	if chunks != 3 {
		t.Errorf("%d chunks with output, want 3 (1 + 8 + 8 tokens)", chunks)
	}
	fams := sim.scrape()
	for name, want := range map[string]float64{
		"vllm:spec_decode_num_drafts_total":          2,
		"vllm:spec_decode_num_draft_tokens_total":    14,
		"vllm:spec_decode_num_accepted_tokens_total": 14,
		"vllm:generation_tokens_total":               17,
	} {
		if got := metricValue(t, fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
