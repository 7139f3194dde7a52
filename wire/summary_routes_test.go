package wire

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// Events in the shapes vLLM writes for /v1/responses (model_dump_json: compact, fields in
// declaration order, which for openai-python's event types puts "type" last).
const (
	respDeltaEvent     = `{"content_index":0,"delta":" Hello","item_id":"msg_1","logprobs":[],"output_index":0,"sequence_number":4,"type":"response.output_text.delta"}`
	respReasoningEvent = `{"content_index":0,"delta":"think","item_id":"rs_1","output_index":0,"sequence_number":3,"type":"response.reasoning_text.delta"}`
	respCompletedEvent = `{"response":{"id":"resp_1","created_at":1,"incomplete_details":null,"instructions":null,"metadata":null,"model":"m","object":"response","output":[{"id":"msg_1","content":[{"annotations":[],"text":" Hello world","type":"output_text","logprobs":null}],"role":"assistant","status":"completed","type":"message"}],"status":"completed","usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":4,"input_tokens_per_turn":[],"cached_tokens_per_turn":[]},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0,"tool_output_tokens":0},"total_tokens":14},"user":null},"sequence_number":9,"type":"response.completed"}`
)

func TestScanResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want ChunkSummary
	}{
		{"created", `{"response":{"id":"r","status":"in_progress","usage":null,"output":[]},"sequence_number":0,"type":"response.created"}`, ChunkSummary{}},
		{"text delta", respDeltaEvent, ChunkSummary{OutputBytes: 6}},
		{"reasoning delta", respReasoningEvent, ChunkSummary{OutputBytes: 5}},
		{"empty delta", `{"delta":"","type":"response.output_text.delta"}`, ChunkSummary{}},
		{"function arguments", `{"type":"response.function_call_arguments.delta","delta":"{\"a\""}`, ChunkSummary{OutputBytes: 4}},
		{"text done repeats the text", `{"text":" Hello world","type":"response.output_text.done"}`, ChunkSummary{}},
		{"completed", respCompletedEvent, ChunkSummary{End: true, HasUsage: true, FinishReason: "stop",
			Usage: Usage{PromptTokens: 12, CompletionTokens: 2, TotalTokens: 14, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 4}}}},
		{"completed at max_output_tokens", `{"type":"response.completed","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":8,"total_tokens":11}}}`,
			ChunkSummary{End: true, HasUsage: true, FinishReason: "length", Usage: Usage{PromptTokens: 3, CompletionTokens: 8, TotalTokens: 11}}},
		{"incomplete", `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"},"usage":null}}`,
			ChunkSummary{End: true, FinishReason: "content_filter"}},
		{"failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"},"usage":null}}`,
			ChunkSummary{End: true, IsError: true, FinishReason: "error"}},
		{"error event", `{"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":5}`, ChunkSummary{End: true, IsError: true}},
		{"bare error object", `{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`, ChunkSummary{IsError: true}},
		{"response body", `{"id":"resp_1","object":"response","output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"hmm"}],"summary":[]},{"type":"message","content":[{"type":"output_text","text":"Hi!"}]}],"status":"completed","usage":{"input_tokens":5,"output_tokens":4,"total_tokens":9}}`,
			ChunkSummary{OutputBytes: 6, HasUsage: true, FinishReason: "stop", Usage: Usage{PromptTokens: 5, CompletionTokens: 4, TotalTokens: 9}}},
		{"failed body", `{"object":"response","output":[],"status":"failed","usage":null}`, ChunkSummary{IsError: true, FinishReason: "error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ScanResponses([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !sameSummary(got, tc.want) {
				t.Errorf("ScanResponses =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestScanGenerate(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want ChunkSummary
	}{
		{"first token", `{"text":"Hel","output_ids":[9906],"meta_info":{"id":"a","finish_reason":null,"prompt_tokens":7,"weight_version":"default","completion_tokens":1,"cached_tokens":3}}`,
			ChunkSummary{OutputBytes: 3, HasUsage: true, CachedTokens: 3, Usage: Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}}},
		{"length", `{"text":"Hello there","output_ids":[1,2],"meta_info":{"finish_reason":{"type":"length","length":2},"prompt_tokens":7,"completion_tokens":2,"cached_tokens":0,"e2e_latency":0.5}}`,
			ChunkSummary{OutputBytes: 11, HasUsage: true, FinishReason: "length", Usage: Usage{PromptTokens: 7, CompletionTokens: 2, TotalTokens: 9}}},
		{"stop", `{"text":"x","meta_info":{"finish_reason":{"type":"stop","matched":151645},"completion_tokens":1}}`,
			ChunkSummary{OutputBytes: 1, HasUsage: true, FinishReason: "stop", Usage: Usage{CompletionTokens: 1, TotalTokens: 1}}},
		{"abort", `{"text":"Hel","meta_info":{"finish_reason":{"type":"abort","message":"Abort before prefill","status_code":503,"err_type":null},"prompt_tokens":7,"completion_tokens":1}}`,
			ChunkSummary{OutputBytes: 3, HasUsage: true, IsError: true, FinishReason: "abort", Usage: Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}}},
		{"error", `{"error":{"message":"The input (40000 tokens) is longer than the model's context length"}}`, ChunkSummary{IsError: true}},
		{"null text", `{"text":null,"meta_info":{"completion_tokens":0}}`, ChunkSummary{HasUsage: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ScanGenerate([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Cumulative = true
			if !sameSummary(got, tc.want) {
				t.Errorf("ScanGenerate =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
	if _, err := ScanGenerate([]byte(`[{"text":"a"}]`)); !errors.Is(err, ErrUnexpectedShape) {
		t.Errorf("a batch answer: %v, want ErrUnexpectedShape", err)
	}
	if _, err := ScanGenerate([]byte(`{"text":"a",}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("malformed JSON: %v, want ErrMalformed", err)
	}
}

// The per-event scan is on the proxy's hot path: it must not allocate.
func TestScanForAllocs(t *testing.T) {
	for _, tc := range []struct {
		route Route
		data  string
	}{
		{RouteResponses, respDeltaEvent},
		{RouteResponses, respReasoningEvent},
		{RouteGenerate, `{"text":"Hello there, how","output_ids":[1,2,3,4],"meta_info":{"id":"a","finish_reason":null,"prompt_tokens":7,"completion_tokens":4,"cached_tokens":3}}`},
	} {
		data := []byte(tc.data)
		if n := testing.AllocsPerRun(100, func() { _, _ = ScanFor(tc.route, data) }); n != 0 {
			t.Errorf("%v: ScanFor allocates %v times per event", tc.route, n)
		}
	}
}

func BenchmarkScanFor(b *testing.B) {
	for _, tc := range []struct {
		name  string
		route Route
		data  string
	}{
		{"responses_delta", RouteResponses, respDeltaEvent},
		{"responses_completed", RouteResponses, respCompletedEvent},
		{"generate", RouteGenerate, `{"text":"Hello there, how are you doing today?","output_ids":[1,2,3,4,5,6,7,8,9],"meta_info":{"id":"0123456789abcdef","finish_reason":null,"prompt_tokens":2048,"weight_version":"default","completion_tokens":9,"cached_tokens":0}}`},
	} {
		data := []byte(tc.data)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = ScanFor(tc.route, data)
			}
		})
	}
}

// FuzzScanFor checks the route scanners against encoding/json: they accept exactly the
// valid JSON objects of the shapes they read, and measure deltas and text as decoded.
func FuzzScanFor(f *testing.F) {
	for _, s := range []string{respDeltaEvent, respReasoningEvent, respCompletedEvent,
		`{"type":"error","code":"x","message":"y"}`, `{"text":"a\u00e9","meta_info":{"finish_reason":{"type":"abort"},"completion_tokens":1}}`,
		`{"error":null,"object":"response","output":[{"content":[{"text":"x"}]}]}`, `[1]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data) && utf8.Valid(data) // the scanners also refuse invalid UTF-8
		for _, route := range []Route{RouteResponses, RouteGenerate} {
			c, err := ScanFor(route, data)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrUnexpectedShape) {
					t.Fatalf("%v: unexpected error kind: %v", route, err)
				}
				if valid && errors.Is(err, ErrMalformed) {
					t.Fatalf("%v: valid JSON reported malformed: %v", route, err)
				}
				continue
			}
			if !json.Valid(data) {
				t.Fatalf("%v: invalid JSON accepted", route)
			}
			// The reference reads the keys exactly, as the engines' JSON does: encoding/json
			// would also take "teXt" for "text".
			var obj map[string]json.RawMessage
			if json.Unmarshal(data, &obj) != nil {
				continue // not an object
			}
			var ref struct{ Type, Delta, Text string }
			typed := true
			for key, dst := range map[string]*string{"type": &ref.Type, "delta": &ref.Delta, "text": &ref.Text} {
				if raw, ok := obj[key]; ok && json.Unmarshal(raw, dst) != nil {
					typed = false // a field of another type than the reference's
				}
			}
			if !typed {
				continue
			}
			if route == RouteGenerate && c.OutputBytes != len(ref.Text) {
				t.Fatalf("generate: OutputBytes %d, want %d", c.OutputBytes, len(ref.Text))
			}
			if route == RouteResponses && eventType([]byte(ref.Type)) == respDelta && c.OutputBytes != len(ref.Delta) {
				t.Fatalf("responses: OutputBytes %d, want %d", c.OutputBytes, len(ref.Delta))
			}
		}
	})
}
