package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestScanChunk(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want ChunkSummary
		err  error
	}{
		{"completion text", `{"id":"c","object":"text_completion","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`,
			ChunkSummary{OutputBytes: 3, Choices: 1}, nil},
		{"escaped text counts decoded bytes", `{"choices":[{"text":"a\nb\u00e9"}]}`, ChunkSummary{OutputBytes: 5, Choices: 1}, nil},
		{"chat role chunk", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, ChunkSummary{Choices: 1}, nil},
		{"reasoning and content", `{"choices":[{"delta":{"reasoning_content":"ab","reasoning":"c","content":"de"}}]}`, ChunkSummary{OutputBytes: 5, Choices: 1}, nil},
		{"tool call", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"get","arguments":"{\"a\":1}"}}]}}]}`,
			ChunkSummary{OutputBytes: 10, Choices: 1}, nil},
		{"finish", `{"choices":[{"delta":{},"finish_reason":"length","stop_reason":null}]}`, ChunkSummary{Choices: 1, FinishReason: "length"}, nil},
		{"rare finish reason", `{"choices":[{"text":"","finish_reason":"custom"}]}`, ChunkSummary{Choices: 1, FinishReason: "custom"}, nil},
		{"usage only", `{"choices":[],"usage":{"prompt_tokens":7,"total_tokens":11,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":3}}}`,
			ChunkSummary{HasUsage: true, Usage: Usage{PromptTokens: 7, TotalTokens: 11, CompletionTokens: 4, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 3}}}, nil},
		{"non-streaming message", `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hello","tool_calls":[]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
			ChunkSummary{OutputBytes: 5, Choices: 1, FinishReason: "stop", HasUsage: true, Usage: Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}, nil},
		{"nested error", `{"error":{"message":"x","type":"BadRequestError","code":400}}`, ChunkSummary{IsError: true}, nil},
		{"flat error", `{"object":"error","message":"x"}`, ChunkSummary{IsError: true}, nil},
		{"null error", `{"error":null,"choices":[]}`, ChunkSummary{}, nil},
		{"not an object", `[1]`, ChunkSummary{}, ErrUnexpectedShape},
		{"text of the wrong type", `{"choices":[{"text":5}]}`, ChunkSummary{}, ErrUnexpectedShape},
		{"usage of the wrong type", `{"usage":"many"}`, ChunkSummary{}, ErrUnexpectedShape},
		{"malformed wins over shape", `{"choices":5,`, ChunkSummary{}, ErrMalformed},
		{"trailing data", `{"choices":[]} x`, ChunkSummary{}, ErrMalformed},
		{"empty", ``, ChunkSummary{}, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ScanChunk([]byte(tc.in))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ScanChunk = %+v, %v; want an error wrapping %v", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameSummary(got, tc.want) {
				t.Errorf("ScanChunk = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func sameSummary(a, b ChunkSummary) bool {
	da, db := a.Usage.PromptTokensDetails, b.Usage.PromptTokensDetails
	a.Usage.PromptTokensDetails, b.Usage.PromptTokensDetails = nil, nil
	return a == b && (da == nil) == (db == nil) && (da == nil || *da == *db)
}

// summaryOf is what ScanChunk must report for a chunk DecodeChunk decoded.
func summaryOf(c *Chunk) ChunkSummary {
	s := ChunkSummary{OutputBytes: c.OutputBytes(), Choices: len(c.Choices), IsError: c.Error != nil}
	s.FinishReason, _ = c.Finished()
	if c.Usage != nil {
		s.Usage, s.HasUsage = *c.Usage, true
	}
	return s
}

// TestScanChunkAllocs: the per-chunk path of the proxy allocates nothing.
func TestScanChunkAllocs(t *testing.T) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = ScanChunk(data) }); n != 0 {
		t.Errorf("ScanChunk allocates %v times per chunk, want 0", n)
	}
}

// FuzzScanChunk: ScanChunk never panics, succeeds only on valid JSON, and agrees with
// DecodeChunk on every chunk in the canonical form the engines write.
func FuzzScanChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"text":" hi","finish_reason":null}],"usage":null}`,
		`{"choices":[{"delta":{"reasoning_content":"x","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1}}}`,
		`{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"a"},"finish_reason":"length"}]}`,
		`{"error":{"message":"bad","code":400}}`, `{"object":"error","message":"flat"}`, `[]`, `{"choices":5,`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ScanChunk(data)
		if err == nil && !json.Valid(data) {
			t.Fatalf("ScanChunk accepted invalid JSON %q: %+v", data, got)
		}
		c, derr := DecodeChunk(data)
		if derr != nil || c.Error != nil {
			return
		}
		canonical, merr := json.Marshal(c)
		if merr != nil {
			return
		}
		c2, derr := DecodeChunk(canonical)
		if derr != nil {
			t.Fatalf("re-decoding %s: %v", canonical, derr)
		}
		got, err = ScanChunk(canonical)
		if err != nil {
			t.Fatalf("ScanChunk(%s) failed: %v", canonical, err)
		}
		if want := summaryOf(&c2); !sameSummary(got, want) {
			t.Fatalf("ScanChunk(%s) = %+v, DecodeChunk says %+v", canonical, got, want)
		}
	})
}

func BenchmarkScanChunk(b *testing.B) {
	data := []byte(`{"id":"cmpl-2545f4914f6cdd1d","object":"text_completion","created":1796026530,"model":"sim-tiny","choices":[{"index":0,"text":" all","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScanChunk(data); err != nil {
			b.Fatal(err)
		}
	}
}
