package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestResponseModel reads the model of the first event of the engines' transcripts.
func TestResponseModel(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"vllm_chat_usage.sse", "Qwen/Qwen3-8B"},
		{"sglang_chat_usage.sse", "Qwen/Qwen3-8B"},
		{"vllm_responses_usage.sse", "Qwen/Qwen3-8B"}, // response.created carries the response object
		{"sglang_generate_usage.sse", ""},             // /generate names no model
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "streams", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ev, err := NewSSEReader(f, DefaultMaxEvent).Next()
			if err != nil {
				t.Fatal(err)
			}
			if got := ResponseModel(ev.Data); got != tc.want {
				t.Errorf("ResponseModel = %q, want %q", got, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{"model":5}`, `{"model":"x"`, `{"response":"x"}`} {
		if got := ResponseModel([]byte(bad)); got != "" {
			t.Errorf("ResponseModel(%q) = %q, want \"\"", bad, got)
		}
	}
}

// FuzzResponseModel: any input, no panic; a model is returned only from a JSON object
// that holds it as a string, as a generic decoding of the same bytes reads it.
func FuzzResponseModel(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"response":{"model":"m"}}`, `{"model":null,"response":{"model":"\u00e9"}}`, `{"model":1}`, `not json`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := ResponseModel(data)
		if m == "" {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("model %q from %q, which is not a JSON object: %v", m, data, err)
		}
		if top, _ := v["model"].(string); top != "" {
			if m != top {
				t.Fatalf("model %q, but the top-level model of %q is %q", m, data, top)
			}
			return
		}
		resp, _ := v["response"].(map[string]any)
		if inner, _ := resp["model"].(string); m != inner {
			t.Fatalf("model %q, but %q holds %q in its response", m, data, inner)
		}
	})
}
