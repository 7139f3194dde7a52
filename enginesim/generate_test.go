package enginesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/wire"
)

// TestWithoutIgnoreEOS checks that an answer left to end by itself stops at its own
// length ("stop") or at max_tokens ("length"), never beyond. The server is fresh, so the
// request ids, and with them the natural lengths, are the same on every run.
func TestWithoutIgnoreEOS(t *testing.T) {
	// Speed 20: up to 300 tokens take ~30 ms instead of ~0.6 s; the lengths are the same.
	sim := startSim(t, Config{Speed: 20})
	const maxTokens = 300
	var mu sync.Mutex
	finishes := map[string]int{}
	t.Run("requests", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				res, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
					Model:     tinyModel,
					Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(fmt.Sprintf("request %d", i))},
					MaxTokens: openai.Int(maxTokens),
				})
				if err != nil {
					t.Fatal(err)
				}
				n, reason := res.Usage.CompletionTokens, string(res.Choices[0].FinishReason)
				mu.Lock()
				finishes[reason]++
				mu.Unlock()
				switch {
				case n < 1 || n > maxTokens:
					t.Errorf("%d completion tokens, want 1..%d", n, maxTokens)
				case reason == "length" && n != maxTokens, reason == "stop" && n == maxTokens:
					t.Errorf("finish_reason %q with %d of %d tokens", reason, n, maxTokens)
				case reason != "length" && reason != "stop":
					t.Errorf("finish_reason %q", reason)
				}
				if got := sim.countText(res.Choices[0].Text); int64(got) != n {
					t.Errorf("text re-tokenises to %d tokens, usage says %d", got, n)
				}
			})
		}
	})
	// The server is fresh, so the eight requests have ids 1-8 in some order, and with them
	// the same eight natural lengths on every run: some below max_tokens, some above.
	if finishes["stop"] == 0 || finishes["length"] == 0 {
		t.Errorf("finish reasons = %v; want both stop and length among 8 requests", finishes)
	}

	// The same holds for a stream: its chunks carry exactly what usage reports.
	got := sim.stream(context.Background(), "/v1/completions",
		`{"prompt":"stream it","max_tokens":300,"stream":true,"stream_options":{"include_usage":true}}`, nil, nil)
	text, chunks := got.output()
	usage := got.usageOnly()
	if !got.done || len(usage) != 1 {
		t.Fatalf("stream: done %v, %d usage chunks", got.done, len(usage))
	}
	if c := usage[0].Usage.CompletionTokens; c != chunks || c != sim.countText(text) || c > maxTokens {
		t.Errorf("stream: usage %d tokens, %d chunks, text %d tokens; want equal and <= %d", c, chunks, sim.countText(text), maxTokens)
	}
}

func TestPromptTokens(t *testing.T) {
	sim := startSim(t, Config{})
	const text = "Hello there, world! Ünïcödé and tabs\tcount too."
	textTokens := sim.tokenize(map[string]any{"prompt": text})
	chatTokens := sim.tokenize(map[string]any{"messages": userMessages(text)})
	noGenPrompt := sim.tokenize(map[string]any{"messages": userMessages(text), "add_generation_prompt": false})
	if chatTokens != noGenPrompt+3 {
		t.Errorf("/tokenize: chat %d tokens, %d without the generation prompt; want 3 more with it", chatTokens, noGenPrompt)
	}
	quoted, _ := json.Marshal(text)
	cases := []struct {
		name       string
		path, body string
		status     int
		prompt     int // prompt_tokens when status is 200
	}{
		{"string", "/v1/completions", `{"prompt":` + string(quoted) + `}`, 200, textTokens},
		{"list of one string", "/v1/completions", `{"prompt":[` + string(quoted) + `]}`, 200, textTokens},
		{"token ids", "/v1/completions", `{"prompt":[0,5,300,31999]}`, 200, 4},
		{"list of one token list", "/v1/completions", `{"prompt":[[7,8,9]]}`, 200, 3},
		{"chat string content", "/v1/chat/completions", `{"messages":[{"role":"user","content":` + string(quoted) + `}]}`, 200, chatTokens},
		{"chat text parts", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":` + string(quoted) + `}]}]}`, 200, chatTokens},
		{"chat without generation prompt", "/v1/chat/completions", `{"messages":[{"role":"user","content":` + string(quoted) + `}],"add_generation_prompt":false}`, 200, noGenPrompt},
		{"token id at vocab size", "/v1/completions", `{"prompt":[1,32000]}`, 400, 0},
		{"negative token id", "/v1/completions", `{"prompt":[-1]}`, 400, 0},
		{"two prompts", "/v1/completions", `{"prompt":["a","b"]}`, 400, 0},
		{"two token lists", "/v1/completions", `{"prompt":[[1],[2]]}`, 400, 0},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, 0},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := strings.TrimSuffix(tc.body, "}") + `,"max_tokens":3,"ignore_eos":true}`
			status, _, data := sim.do(http.MethodPost, tc.path, body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %s", status, tc.status, data)
			}
			if status != http.StatusOK {
				if e := apiError(t, data); e.Type != wire.TypeEngineBadRequest || e.Code != 400 {
					t.Errorf("error type %q code %v, want %s 400", e.Type, e.Code, wire.TypeEngineBadRequest)
				}
				return
			}
			res, err := wire.DecodeResponse(data)
			if err != nil {
				t.Fatal(err)
			}
			want := wire.Usage{PromptTokens: tc.prompt, CompletionTokens: 3, TotalTokens: tc.prompt + 3}
			if res.Usage == nil || *res.Usage != want {
				t.Errorf("usage = %+v, want %+v", res.Usage, want)
			}
		})
	}
}

func TestTokenize(t *testing.T) {
	sim := startSim(t, Config{})
	cases := []struct {
		name   string
		body   string
		status int
		count  int // -1: only check consistency
	}{
		{"empty string", `{"prompt":""}`, 200, 0},
		{"one word", `{"prompt":"hello"}`, 200, 2}, // "hell" "o": words split every four bytes
		{"words and punctuation", `{"prompt":"a b, c."}`, 200, 5},
		{"token ids", `{"prompt":[1,2,3]}`, 200, 3},
		{"messages", `{"messages":[{"role":"user","content":"hi"}]}`, 200, 3 + 1 + 2 + 3},
		{"long text", `{"prompt":"` + strings.Repeat("word ", 1000) + `"}`, 200, 1000 + 1},
		{"not JSON", `{"prompt":`, 400, 0},
		{"no prompt", `{}`, 400, 0},
		{"out of vocabulary", `{"prompt":[32000]}`, 400, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, data := sim.do(http.MethodPost, "/tokenize", tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %s", status, tc.status, data)
			}
			if status != http.StatusOK {
				apiError(t, data)
				return
			}
			var got struct {
				Count       int   `json:"count"`
				MaxModelLen int   `json:"max_model_len"`
				Tokens      []int `json:"tokens"`
			}
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if got.Count != tc.count || len(got.Tokens) != tc.count || got.MaxModelLen != 4096 {
				t.Errorf("got count %d, %d tokens, max_model_len %d; want %d, %d, 4096", got.Count, len(got.Tokens), got.MaxModelLen, tc.count, tc.count)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	sim := startSim(t, Config{MaxBodySize: 64 << 10})
	ids := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("42,", n), ",") + "]" }
	cases := []struct {
		name       string
		method     string
		path, body string
		header     http.Header
		status     int
		typ        string
		param      string // "" for null
	}{
		{"malformed JSON", "POST", "/v1/completions", `{"prompt": "hi",`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"not an object", "POST", "/v1/chat/completions", `[1,2]`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"missing messages", "POST", "/v1/chat/completions", `{"model":"sim-tiny"}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"unknown model", "POST", "/v1/completions", `{"model":"gpt-4","prompt":"hi"}`, nil, 404, wire.TypeEngineNotFound, "model"},
		{"unknown model chat", "POST", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}`, nil, 404, wire.TypeEngineNotFound, "model"},
		{"prompt plus max_tokens over max_model_len", "POST", "/v1/completions", `{"prompt":` + ids(4000) + `,"max_tokens":97}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"prompt alone at max_model_len", "POST", "/v1/completions", `{"prompt":` + ids(4096) + `,"max_tokens":1}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"stream_options without stream", "POST", "/v1/completions", `{"prompt":"hi","stream_options":{"include_usage":true}}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"continuous usage without stream", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"continuous_usage_stats":true}}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"n=2", "POST", "/v1/completions", `{"prompt":"hi","n":2}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"negative max_tokens", "POST", "/v1/completions", `{"prompt":"hi","max_tokens":-1}`, nil, 400, wire.TypeEngineBadRequest, ""},
		{"body too large", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 100<<10) + `"}`, nil, 413, wire.TypeEngineBadRequest, ""},
		{"bad fault header", "POST", "/v1/completions", `{"prompt":"hi"}`, http.Header{FaultHeader: {"stall_after=soon"}}, 400, wire.TypeEngineBadRequest, ""},
		{"unknown fault", "POST", "/v1/completions", `{"prompt":"hi"}`, http.Header{FaultHeader: {"explode"}}, 400, wire.TypeEngineBadRequest, ""},
		{"unknown path", "GET", "/v1/embeddings", "", nil, 404, wire.TypeEngineNotFound, ""},
		{"server info on vllm", "GET", "/get_server_info", "", nil, 404, wire.TypeEngineNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, h, data := sim.do(tc.method, tc.path, tc.body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %.300s", status, tc.status, data)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			e := apiError(t, data)
			if e.Type != tc.typ || e.Code != tc.status || deref(e.Param) != tc.param {
				t.Errorf("error = type %q code %v param %q, want %q %d %q", e.Type, e.Code, deref(e.Param), tc.typ, tc.status, tc.param)
			}
		})
	}
	// Refused requests never reach the engine.
	if st := sim.srv.Stats(); st.finishedTotal() != 0 || st.PromptTokens != 0 {
		t.Errorf("after refused requests the engine saw %d requests, %d prompt tokens", st.finishedTotal(), st.PromptTokens)
	}
}

// TestErrorsThroughSDK checks that the SDK sees the engine's errors as *openai.Error.
func TestErrorsThroughSDK(t *testing.T) {
	sim := startSim(t, Config{})
	long := make([]int64, 4000)
	cases := []struct {
		name   string
		call   func() error
		status int
		param  string
	}{
		{"unknown model", func() error {
			_, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
				Model: "gpt-3.5-turbo-instruct", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
			})
			return err
		}, 404, "model"},
		{"unknown model streaming chat", func() error {
			s := sim.client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			defer s.Close()
			for s.Next() {
			}
			return s.Err()
		}, 404, "model"},
		{"context too long", func() error {
			_, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
				Model: tinyModel, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: long}, MaxTokens: openai.Int(100),
			})
			return err
		}, 400, ""},
		{"stream_options without stream", func() error {
			_, err := sim.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: tinyModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			return err
		}, 400, ""},
		{"bad fault header", func() error {
			_, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
				Model: tinyModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
			}, option.WithHeader(FaultHeader, "rate=2"))
			return err
		}, 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call()
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v (%T), want *openai.Error", err, err)
			}
			if apiErr.StatusCode != tc.status || apiErr.Param != tc.param || apiErr.Message == "" {
				t.Errorf("error = status %d param %q message %q, want %d %q", apiErr.StatusCode, apiErr.Param, apiErr.Message, tc.status, tc.param)
			}
		})
	}
}
