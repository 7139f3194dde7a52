package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func ptr[T any](v T) *T { return &v }

func TestDecodeChunk(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		output    int
		finish    string // "" when not finished
		usageOnly bool
		usage     *Usage
		check     func(t *testing.T, c Chunk)
	}{
		{name: "vLLM completions token",
			data:   `{"id":"cmpl-a1","object":"text_completion","created":1735689600,"model":"m","choices":[{"index":0,"text":" Paris","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`,
			output: 6},
		{name: "vLLM completions final",
			data:   `{"id":"cmpl-a1","object":"text_completion","created":1735689600,"model":"m","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}`,
			finish: "length"},
		{name: "newer vLLM completions token without usage",
			data:   `{"id":"cmpl-a1","object":"text_completion","created":1735689600,"model":"m","choices":[{"index":0,"text":"!","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}`,
			output: 1},
		{name: "vLLM chat role chunk",
			data: `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			check: func(t *testing.T, c Chunk) {
				if d := c.Choices[0].Delta; d == nil || d.Role != "assistant" || d.Content == nil || *d.Content != "" {
					t.Errorf("delta = %+v", d)
				}
			}},
		{name: "vLLM chat content",
			data:   `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"Bonjour é"},"logprobs":null,"finish_reason":null}]}`,
			output: len("Bonjour é")},
		{name: "reasoning_content",
			data:   `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"Let me think"},"logprobs":null,"finish_reason":null}]}`,
			output: 12},
		{name: "reasoning (newer vLLM name)",
			data:   `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning":"hmm"},"logprobs":null,"finish_reason":null}]}`,
			output: 3},
		{name: "tool call start",
			data:   `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-1","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
			output: len("get_weather")},
		{name: "tool call arguments",
			data:   `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null}]}`,
			output: len(`{"city": `)},
		{name: "vLLM chat final",
			data:   `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`,
			finish: "stop"},
		{name: "usage-only final chunk",
			data:      `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":20,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":4}}}`,
			usageOnly: true,
			usage:     &Usage{PromptTokens: 12, TotalTokens: 20, CompletionTokens: 8, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 4}}},
		{name: "continuous usage",
			data:   `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2}}`,
			output: 2,
			usage:  &Usage{PromptTokens: 3, TotalTokens: 5, CompletionTokens: 2}},
		{name: "SGLang chat chunk with nulls",
			data:   `{"id":"0b5e","object":"chat.completion.chunk","created":1735689600,"model":"default","choices":[{"index":0,"delta":{"role":null,"content":"Hi","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
			output: 2},
		{name: "SGLang completions final with matched stop",
			data:   `{"id":"x","object":"text_completion","created":1,"model":"default","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"stop","matched_stop":128009}],"usage":null}`,
			finish: "stop"},
		{name: "stop token id",
			data:   `{"id":"x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"stop","stop_reason":128009}]}`,
			finish: "stop",
			check: func(t *testing.T, c Chunk) {
				if c.Choices[0].StopReason != float64(128009) {
					t.Errorf("StopReason = %#v", c.Choices[0].StopReason)
				}
			}},
		{name: "two choices, second finished",
			data:   `{"id":"x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"a","finish_reason":null},{"index":1,"text":"bc","finish_reason":"length"}]}`,
			output: 3, finish: "length"},
		{name: "logprobs kept raw",
			data:   `{"id":"x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"a","logprobs":{"tokens":["a"],"token_logprobs":[-0.1]},"finish_reason":null}]}`,
			output: 1,
			check: func(t *testing.T, c Chunk) {
				if string(c.Choices[0].Logprobs) != `{"tokens":["a"],"token_logprobs":[-0.1]}` {
					t.Errorf("Logprobs = %s", c.Choices[0].Logprobs)
				}
			}},
		{name: "vLLM chat response",
			data:   `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":10,"total_tokens":13,"completion_tokens":3,"prompt_tokens_details":null},"prompt_logprobs":null,"kv_transfer_params":null}`,
			output: 6, finish: "stop",
			usage: &Usage{PromptTokens: 10, TotalTokens: 13, CompletionTokens: 3}},
		{name: "chat response with tool calls only",
			data:   `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"total_tokens":2,"completion_tokens":1}}`,
			output: 3, finish: "tool_calls",
			usage: &Usage{PromptTokens: 1, TotalTokens: 2, CompletionTokens: 1}},
		{name: "error inside a stream",
			data: `{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`,
			check: func(t *testing.T, c Chunk) {
				if c.Error == nil || c.Error.Message != "boom" || c.Error.Code != 500 {
					t.Errorf("Error = %+v", c.Error)
				}
			}},
		{name: "flat error inside a stream",
			data: `{"object":"error","message":"too long","type":"BadRequestError","param":"prompt","code":400}`,
			check: func(t *testing.T, c Chunk) {
				if e := c.Error; e == nil || e.Message != "too long" || e.Code != 400 || e.Param == nil || *e.Param != "prompt" {
					t.Errorf("Error = %+v", c.Error)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeChunk([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.OutputBytes(); got != tt.output {
				t.Errorf("OutputBytes() = %d, want %d", got, tt.output)
			}
			reason, ok := c.Finished()
			if reason != tt.finish || ok != (tt.finish != "") {
				t.Errorf("Finished() = %q, %v; want %q", reason, ok, tt.finish)
			}
			if c.UsageOnly() != tt.usageOnly {
				t.Errorf("UsageOnly() = %v", c.UsageOnly())
			}
			if (c.Usage == nil) != (tt.usage == nil) || c.Usage != nil && !usageEqual(*c.Usage, *tt.usage) {
				t.Errorf("Usage = %+v, want %+v", c.Usage, tt.usage)
			}
			for i, ch := range c.Choices {
				if string(ch.Logprobs) == "null" {
					t.Errorf("choice %d: Logprobs is a raw null, want nil", i)
				}
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func usageEqual(a, b Usage) bool {
	if (a.PromptTokensDetails == nil) != (b.PromptTokensDetails == nil) {
		return false
	}
	if a.PromptTokensDetails != nil && *a.PromptTokensDetails != *b.PromptTokensDetails {
		return false
	}
	a.PromptTokensDetails, b.PromptTokensDetails = nil, nil
	return a == b
}

func TestDecodeChunkErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want error
	}{
		{"empty", ``, ErrMalformed},
		{"truncated", `{"id":"x",`, ErrMalformed},
		{"DONE marker", `[DONE]`, ErrMalformed},
		{"array", `[]`, ErrUnexpectedShape},
		{"null", `null`, ErrUnexpectedShape},
		{"string", ` "x"`, ErrUnexpectedShape},
		{"choices not a list", `{"choices":"x"}`, ErrUnexpectedShape},
		{"created not a number", `{"created":"now"}`, ErrUnexpectedShape},
		{"flat error with bad message", `{"object":"error","message":5}`, ErrUnexpectedShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeChunk([]byte(tt.data)); !errors.Is(err, tt.want) {
				t.Errorf("DecodeChunk error = %v, want %v", err, tt.want)
			}
		})
	}
}

// goldenChunks are the chunks and responses the engine simulator writes.
func goldenChunks() []struct {
	name string
	c    Chunk
} {
	const id, created, model = "cmpl-7d3f", 1735689600, "meta-llama/Llama-3.1-8B-Instruct"
	cmpl := func(choices []Choice, usage *Usage) Chunk {
		return Chunk{ID: id, Object: "text_completion", Created: created, Model: model, Choices: choices, Usage: usage}
	}
	chat := func(object string, choices []Choice, usage *Usage) Chunk {
		return Chunk{ID: "chat" + id, Object: object, Created: created, Model: model, Choices: choices, Usage: usage}
	}
	delta := func(d Delta, finish *string) []Choice { return []Choice{{Delta: &d, FinishReason: finish}} }
	usage := &Usage{PromptTokens: 12, TotalTokens: 20, CompletionTokens: 8}
	return []struct {
		name string
		c    Chunk
	}{
		{"completions token", cmpl([]Choice{{Text: " Paris"}}, nil)},
		{"completions final", cmpl([]Choice{{Text: ".", FinishReason: ptr("length")}}, nil)},
		{"completions stop string", cmpl([]Choice{{Text: "", FinishReason: ptr("stop"), StopReason: "\n\n"}}, nil)},
		{"completions continuous usage", cmpl([]Choice{{Text: " a"}}, &Usage{PromptTokens: 12, TotalTokens: 13, CompletionTokens: 1})},
		{"completions usage only", cmpl(nil, &Usage{PromptTokens: 12, TotalTokens: 20, CompletionTokens: 8,
			PromptTokensDetails: &PromptTokensDetails{CachedTokens: 8}})},
		{"completions response", cmpl([]Choice{{Text: " Paris.", FinishReason: ptr("stop")}}, usage)},
		{"chat role", chat("chat.completion.chunk", delta(Delta{Role: "assistant", Content: ptr("")}, nil), nil)},
		{"chat content", chat("chat.completion.chunk", delta(Delta{Content: ptr("Hello")}, nil), nil)},
		{"chat reasoning", chat("chat.completion.chunk", delta(Delta{ReasoningContent: ptr("Let me think")}, nil), nil)},
		{"chat think tag", chat("chat.completion.chunk", delta(Delta{Content: ptr("<think>a & b")}, nil), nil)},
		{"chat tool call", chat("chat.completion.chunk", delta(Delta{ToolCalls: []ToolCall{{ID: "chatcmpl-tool-1", Type: "function",
			Function: ToolFunction{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}}, nil), nil)},
		{"chat final", chat("chat.completion.chunk", delta(Delta{Content: ptr("")}, ptr("stop")), nil)},
		{"chat usage only", chat("chat.completion.chunk", []Choice{}, usage)},
		{"chat response", chat("chat.completion", []Choice{{Message: &Message{Role: "assistant", Content: ptr("Hello!")},
			FinishReason: ptr("stop")}}, usage)},
		{"error", Chunk{Error: &APIError{Message: "The model `x` does not exist.", Type: TypeEngineNotFound, Param: ptr("model"), Code: 404}}},
	}
}

func TestChunkEncodeGolden(t *testing.T) {
	var out bytes.Buffer
	for _, g := range goldenChunks() {
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(g.c); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		data := bytes.TrimSuffix(enc.Bytes(), []byte("\n"))
		fmt.Fprintf(&out, "# %s\n%s\n", g.name, data)
		back, err := DecodeChunk(data)
		if err != nil {
			t.Fatalf("%s: decoding what was encoded: %v", g.name, err)
		}
		again, err := back.MarshalJSON()
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("%s: round trip changed the bytes:\n%s\n%s", g.name, data, again)
		}
		if back.OutputBytes() != g.c.OutputBytes() {
			t.Errorf("%s: OutputBytes %d after round trip, %d before", g.name, back.OutputBytes(), g.c.OutputBytes())
		}
	}
	golden := filepath.Join("testdata", "chunks.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("encoded chunks differ from %s (run go test -update after checking):\n%s", golden, out.Bytes())
	}
}

// TestChunkEncodeVLLMShape pins the two shapes the simulator must reproduce
// byte for byte, independently of the golden file.
func TestChunkEncodeVLLMShape(t *testing.T) {
	tests := []struct {
		name string
		c    Chunk
		want string
	}{
		{"completions", Chunk{ID: "cmpl-1", Object: "text_completion", Created: 1, Model: "m", Choices: []Choice{{Text: "x"}}},
			`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`},
		{"chat", Chunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1, Model: "m",
			Choices: []Choice{{Delta: &Delta{Role: "assistant", Content: ptr("")}}}},
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.c)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s:\n got  %s (%v)\n want %s", tt.name, got, err, tt.want)
		}
	}
}

func TestChunkEncodeHTML(t *testing.T) {
	c := Chunk{Choices: []Choice{{Delta: &Delta{Content: ptr("<think>")}}}}
	escaped, err := json.Marshal(c)
	if err != nil || !bytes.Contains(escaped, []byte(`"\u003cthink\u003e"`)) {
		t.Errorf("json.Marshal = %s, %v; want HTML escaped", escaped, err)
	}
	raw, err := c.MarshalJSON()
	if err != nil || !bytes.Contains(raw, []byte(`"<think>"`)) {
		t.Errorf("MarshalJSON = %s, %v; want <think> as is", raw, err)
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	data := bytes.TrimSuffix(bytes.TrimPrefix(vllmEvent, []byte("data: ")), []byte("\n\n"))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := DecodeChunk(data)
		if err != nil || c.OutputBytes() == 0 {
			b.Fatal(err)
		}
	}
}
