package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestInputContent(t *testing.T) {
	user := func(s ...string) []Content {
		var out []Content
		for _, x := range s {
			out = append(out, Content{Role: "user", Parts: []Part{textPart(x)}})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		route Route
		body  string
		want  []Content
	}{
		{"chat, string contents", RouteChatCompletions, `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`,
			[]Content{{Role: "system", Parts: []Part{textPart("be brief")}}, {Role: "user", Parts: []Part{textPart("hi")}}}},
		{"chat, text parts and an image", RouteChatCompletions, `{"messages":[{"role":"user","content":[{"type":"text","text":"what is"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"this"}]}]}`,
			[]Content{{Role: "user", Parts: []Part{textPart("what is"), textPart("this")}}}},
		{"chat, a tool call without content", RouteChatCompletions, `{"messages":[{"role":"assistant","content":null}]}`,
			[]Content{{Role: "assistant"}}},
		{"completion, one prompt", RouteCompletions, `{"prompt":"once upon"}`, user("once upon")},
		{"completion, a batch", RouteCompletions, `{"prompt":["a","b"]}`, user("a", "b")},
		{"completion, token ids", RouteCompletions, `{"prompt":[1,2,3]}`, nil},
		{"generate", RouteGenerate, `{"text":"the capital of France is"}`, user("the capital of France is")},
		{"responses, a string", RouteResponses, `{"input":"hello"}`, user("hello")},
		{"responses, messages", RouteResponses, `{"input":[{"role":"user","content":[{"type":"input_text","text":"hello"}]}]}`,
			[]Content{{Role: "user", Parts: []Part{textPart("hello")}}}},
		{"embeddings", RouteEmbeddings, `{"input":"x"}`, nil},
		{"not JSON", RouteChatCompletions, `{"messages":`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InputContent(tc.route, []byte(tc.body)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("InputContent = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOutputTextConformance: the text OutputText reads from the engines' transcripts is
// as long as the output ScanFor counts in them, read by a different decoder (these
// transcripts carry no reasoning or tool calls, which ScanFor counts as output too).
func TestOutputTextConformance(t *testing.T) {
	for _, tc := range []struct {
		file  string
		route Route
	}{
		{"vllm_chat_usage.sse", RouteChatCompletions},
		{"sglang_chat_usage.sse", RouteChatCompletions},
		{"vllm_chat_no_usage.sse", RouteChatCompletions},
		{"vllm_completions_spec_chunks.sse", RouteCompletions},
		{"vllm_responses_usage.sse", RouteResponses},
		{"sglang_generate_usage.sse", RouteGenerate},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "streams", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := NewSSEReader(f, DefaultMaxEvent)
			text, counted := "", 0
			for {
				ev, err := r.Next()
				if err != nil {
					break
				}
				if ev.Comment || ev.IsDone() {
					continue
				}
				s, cumulative := OutputText(tc.route, ev.Data)
				c, err := ScanFor(tc.route, ev.Data)
				if err != nil {
					t.Fatalf("ScanFor: %v", err)
				}
				if cumulative {
					text, counted = s, c.OutputBytes
				} else {
					text += s
					counted += c.OutputBytes
				}
			}
			if text == "" || len(text) != counted {
				t.Errorf("OutputText read %d bytes (%q), ScanFor counted %d", len(text), text, counted)
			}
		})
	}
}

// FuzzContent: any input, no panic, and text only out of valid JSON.
func FuzzContent(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"hi"}]}`, `{"prompt":["a"]}`, `{"choices":[{"delta":{"content":"x"}}]}`,
		`{"type":"response.output_text.delta","delta":"y"}`, `{"text":"z"}`, `{"output":[{"content":[{"type":"output_text","text":"w"}]}]}`} {
		for r := RouteCompletions; r <= RouteGenerate; r++ {
			f.Add(uint8(r), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, data []byte) {
		r := Route(route % uint8(numRoutes))
		in := InputContent(r, data)
		text, _ := OutputText(r, data)
		if (len(in) > 0 || text != "") && !json.Valid(data) {
			t.Fatalf("content %+v / %q from invalid JSON %q", in, text, data)
		}
	})
}
