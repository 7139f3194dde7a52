package enginesim

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/wire"
)

func TestStreamThroughSDK(t *testing.T) {
	sim := startSim(t, Config{})
	const prompt = "Explain continuous batching to a new engineer, briefly."
	promptTokens := sim.tokenize(map[string]any{"prompt": prompt})
	chatTokens := sim.tokenize(map[string]any{"messages": userMessages(prompt)})
	if promptTokens < 5 || chatTokens <= promptTokens {
		t.Fatalf("/tokenize: prompt %d tokens, chat %d; want a few, chat more (template)", promptTokens, chatTokens)
	}
	cases := []struct {
		name         string
		chat         bool
		includeUsage bool
		continuous   bool
	}{
		{"completions", false, false, false},
		{"completions include_usage", false, true, false},
		{"completions continuous_usage_stats", false, false, true},
		{"completions include_usage continuous_usage_stats", false, true, true},
		{"chat", true, false, false},
		{"chat include_usage", true, true, false},
		{"chat continuous_usage_stats", true, false, true},
		{"chat include_usage continuous_usage_stats", true, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := []option.RequestOption{option.WithJSONSet("ignore_eos", true)}
			if tc.continuous {
				opts = append(opts, option.WithJSONSet("stream_options.continuous_usage_stats", true))
			}
			var so openai.ChatCompletionStreamOptionsParam
			if tc.includeUsage {
				so.IncludeUsage = openai.Bool(true)
			}
			// The simulator is vLLM: continuous usage only together with include_usage.
			continuous := tc.continuous && tc.includeUsage
			var got sdkStream
			want := promptTokens
			if tc.chat {
				want = chatTokens
				got = readChatStream(t, sim.client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
					Model:         tinyModel,
					Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
					MaxTokens:     openai.Int(16),
					StreamOptions: so,
				}, opts...), want, continuous)
			} else {
				got = readCompletionStream(t, sim.client.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
					Model:         tinyModel,
					Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
					MaxTokens:     openai.Int(16),
					StreamOptions: so,
				}, opts...), want, continuous)
			}
			if got.tokenChunks != 16 {
				t.Errorf("chunks with output = %d, want 16 (one token per chunk)", got.tokenChunks)
			}
			if got.finish != "length" {
				t.Errorf("finish_reason = %q, want length", got.finish)
			}
			if n := sim.countText(got.text); n != 16 {
				t.Errorf("re-tokenised output %q has %d tokens, want 16", got.text, n)
			}
			wantUsage := 0
			if tc.includeUsage {
				wantUsage = 1
			}
			if len(got.usage) != wantUsage {
				t.Fatalf("usage-only chunks = %d, want %d", len(got.usage), wantUsage)
			}
			for _, u := range got.usage {
				if u.CompletionTokens != 16 || u.PromptTokens != int64(want) || u.TotalTokens != int64(want)+16 {
					t.Errorf("usage = %+v, want prompt %d, completion 16, total %d", u, want, want+16)
				}
			}
		})
	}
}

// sdkStream is what a test learns from reading a stream through the SDK.
type sdkStream struct {
	text        string
	tokenChunks int
	finish      string
	usage       []openai.CompletionUsage // of the usage-only chunks
}

// checkContinuous checks the usage of a chunk with choices: cumulative with
// continuous_usage_stats, absent otherwise.
func checkContinuous(t *testing.T, valid bool, u openai.CompletionUsage, prompt, sent int, continuous bool) {
	t.Helper()
	switch {
	case continuous && !valid:
		t.Errorf("chunk %d has no usage with continuous_usage_stats", sent)
	case continuous && (u.PromptTokens != int64(prompt) || u.CompletionTokens != int64(sent) || u.TotalTokens != int64(prompt+sent)):
		t.Errorf("continuous usage after %d tokens = %+v, want prompt %d completion %d", sent, u, prompt, sent)
	case !continuous && valid:
		t.Errorf("chunk %d carries usage without continuous_usage_stats", sent)
	}
}

func readCompletionStream(t *testing.T, s interface {
	Next() bool
	Current() openai.Completion
	Err() error
	Close() error
}, prompt int, continuous bool) sdkStream {
	t.Helper()
	defer s.Close()
	var out sdkStream
	var text strings.Builder
	for s.Next() {
		c := s.Current()
		if len(c.Choices) == 0 {
			if !c.JSON.Usage.Valid() {
				t.Errorf("chunk with neither choices nor usage: %s", c.RawJSON())
			}
			out.usage = append(out.usage, c.Usage)
			continue
		}
		ch := c.Choices[0]
		if ch.Text != "" {
			out.tokenChunks++
			text.WriteString(ch.Text)
		}
		if ch.FinishReason != "" {
			out.finish = string(ch.FinishReason)
		}
		checkContinuous(t, c.JSON.Usage.Valid(), c.Usage, prompt, out.tokenChunks, continuous)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	out.text = text.String()
	return out
}

func readChatStream(t *testing.T, s interface {
	Next() bool
	Current() openai.ChatCompletionChunk
	Err() error
	Close() error
}, prompt int, continuous bool) sdkStream {
	t.Helper()
	defer s.Close()
	var out sdkStream
	var text strings.Builder
	first := true
	for s.Next() {
		c := s.Current()
		if len(c.Choices) == 0 {
			if !c.JSON.Usage.Valid() {
				t.Errorf("chunk with neither choices nor usage: %s", c.RawJSON())
			}
			out.usage = append(out.usage, c.Usage)
			continue
		}
		d := c.Choices[0].Delta
		if first && (d.Role != "assistant" || d.Content != "") {
			t.Errorf("first chat chunk delta = role %q content %q, want the assistant role and no content", d.Role, d.Content)
		}
		first = false
		if d.Content != "" {
			out.tokenChunks++
			text.WriteString(d.Content)
		}
		if fr := c.Choices[0].FinishReason; fr != "" {
			out.finish = fr
		}
		checkContinuous(t, c.JSON.Usage.Valid(), c.Usage, prompt, out.tokenChunks, continuous)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	out.text = text.String()
	return out
}

// TestStreamEndsWithDone reads the raw event stream, which the SDK hides the end of.
func TestStreamEndsWithDone(t *testing.T) {
	sim := startSim(t, Config{})
	const prompt = "Count the blocks of a paged KV cache."
	completions := sim.tokenize(map[string]any{"prompt": prompt})
	chat := sim.tokenize(map[string]any{"messages": userMessages(prompt)})
	cases := []struct {
		name       string
		path, body string
		prompt     int
		usage      bool
	}{
		{"completions", "/v1/completions",
			`{"model":"sim-tiny","prompt":"` + prompt + `","max_tokens":16,"ignore_eos":true,"stream":true}`, completions, false},
		{"completions include_usage", "/v1/completions",
			`{"model":"sim-tiny","prompt":"` + prompt + `","max_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, completions, true},
		{"chat", "/v1/chat/completions",
			`{"model":"sim-tiny","messages":[{"role":"user","content":"` + prompt + `"}],"max_tokens":16,"ignore_eos":true,"stream":true}`, chat, false},
		{"chat include_usage", "/v1/chat/completions",
			`{"model":"sim-tiny","messages":[{"role":"user","content":"` + prompt + `"}],"max_completion_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, chat, true},
		{"no model field", "/v1/completions",
			`{"prompt":"` + prompt + `","max_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, completions, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := sim.stream(context.Background(), tc.path, tc.body, nil, nil)
			if got.err != nil || !got.done {
				t.Fatalf("stream ended with err %v, [DONE] %v; want a clean end after [DONE]", got.err, got.done)
			}
			text, chunks := got.output()
			if chunks != 16 || sim.countText(text) != 16 {
				t.Errorf("%d chunks with output, %d tokens; want 16 and 16", chunks, sim.countText(text))
			}
			usage := got.usageOnly()
			if tc.usage != (len(usage) == 1) || len(usage) > 1 {
				t.Fatalf("%d usage-only chunks, want include_usage=%v", len(usage), tc.usage)
			}
			if tc.usage {
				if last := got.chunks[len(got.chunks)-1]; !last.UsageOnly() {
					t.Errorf("the usage-only chunk is not the last one before [DONE]")
				}
				want := wire.Usage{PromptTokens: tc.prompt, CompletionTokens: 16, TotalTokens: tc.prompt + 16}
				if u := *usage[0].Usage; u != want {
					t.Errorf("usage = %+v, want %+v", u, want)
				}
			}
			for _, c := range got.chunks {
				if c.Model != tinyModel || c.ID == "" || c.ID != got.chunks[0].ID {
					t.Errorf("chunk model %q id %q; want %q and one id per stream", c.Model, c.ID, tinyModel)
				}
			}
		})
	}
}

func TestNonStreamingThroughSDK(t *testing.T) {
	sim := startSim(t, Config{})
	const prompt = "What limits decode throughput?"
	ignoreEOS := option.WithJSONSet("ignore_eos", true)
	t.Run("completions", func(t *testing.T) {
		res, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model:     tinyModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens: openai.Int(16),
		}, ignoreEOS)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(sim.tokenize(map[string]any{"prompt": prompt}))
		if res.Usage.CompletionTokens != 16 || res.Usage.PromptTokens != want || res.Usage.TotalTokens != want+16 {
			t.Errorf("usage = %+v, want prompt %d completion 16", res.Usage, want)
		}
		if len(res.Choices) != 1 || res.Choices[0].FinishReason != "length" {
			t.Fatalf("choices = %+v, want one finished by length", res.Choices)
		}
		if n := sim.countText(res.Choices[0].Text); n != 16 {
			t.Errorf("re-tokenised text has %d tokens, want 16", n)
		}
		if res.Model != tinyModel || !strings.HasPrefix(res.ID, "cmpl-") || res.Object != "text_completion" {
			t.Errorf("envelope = model %q id %q object %q", res.Model, res.ID, res.Object)
		}
	})
	t.Run("chat", func(t *testing.T) {
		res, err := sim.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:               tinyModel,
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(prompt)},
			MaxCompletionTokens: openai.Int(16),
		}, ignoreEOS)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(sim.tokenize(map[string]any{"messages": []map[string]any{
			{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt},
		}}))
		if res.Usage.CompletionTokens != 16 || res.Usage.PromptTokens != want {
			t.Errorf("usage = %+v, want prompt %d completion 16", res.Usage, want)
		}
		if len(res.Choices) != 1 || res.Choices[0].FinishReason != "length" || res.Choices[0].Message.Role != "assistant" {
			t.Fatalf("choices = %+v, want one assistant message finished by length", res.Choices)
		}
		if n := sim.countText(res.Choices[0].Message.Content); n != 16 {
			t.Errorf("re-tokenised content has %d tokens, want 16", n)
		}
		if !strings.HasPrefix(res.ID, "chatcmpl-") || res.Object != "chat.completion" {
			t.Errorf("envelope = id %q object %q", res.ID, res.Object)
		}
	})
}

// TestContinuousUsageAlone checks what each engine does with continuous_usage_stats sent
// without include_usage: vLLM ignores it (should_include_usage in
// vllm/entrypoints/serve/utils/api_utils.py), SGLang puts usage on every chunk
// (python/sglang/srt/entrypoints/openai/utils.py); neither sends a usage-only chunk.
func TestContinuousUsageAlone(t *testing.T) {
	for _, tc := range []struct {
		flavor Flavor
		usage  bool // chunks carry usage
	}{{FlavorVLLM, false}, {FlavorSGLang, true}} {
		t.Run(string(tc.flavor), func(t *testing.T) {
			sim := startSim(t, Config{Flavor: tc.flavor})
			got := sim.stream(context.Background(), "/v1/completions",
				`{"prompt":"hi","max_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"continuous_usage_stats":true}}`, nil, nil)
			if len(got.chunks) == 0 || !got.done {
				t.Fatalf("stream: %d chunks, [DONE] %v", len(got.chunks), got.done)
			}
			for i, c := range got.chunks {
				if (c.Usage != nil) != tc.usage {
					t.Errorf("chunk %d usage %+v; want usage on chunks: %v", i, c.Usage, tc.usage)
				}
			}
			if n := len(got.usageOnly()); n != 0 {
				t.Errorf("%d usage-only chunks, want none", n)
			}
		})
	}
}
