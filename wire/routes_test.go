package wire

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

func TestRouteOfEveryRoute(t *testing.T) {
	for _, tc := range []struct {
		path  string
		route Route
		label string
	}{
		{"/v1/completions", RouteCompletions, "completions"},
		{"/v1/chat/completions", RouteChatCompletions, "chat_completions"},
		{"/v1/responses", RouteResponses, "responses"},
		{"/generate", RouteGenerate, "generate"},
		{"/v1/embeddings", RouteEmbeddings, "embeddings"},
		{"/pooling", RoutePooling, "pooling"},
		{"/score", RouteScore, "score"},
		{"/v1/score", RouteScore, "score"},
		{"/rerank", RouteRerank, "rerank"},
		{"/v1/rerank", RouteRerank, "rerank"},
		{"/v2/rerank", RouteRerank, "rerank"},
		{"/classify", RouteClassify, "classify"},
		{"/v1/responses/resp_1", RouteUnknown, "other"},
		{"/v1/responses/", RouteUnknown, "other"},
		{"/generate_stream", RouteUnknown, "other"},
		{"/health_generate", RouteUnknown, "other"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := RouteOf(tc.path)
			if r != tc.route || r.String() != tc.label {
				t.Errorf("RouteOf(%q) = %v %q, want %v %q", tc.path, r, r.String(), tc.route, tc.label)
			}
		})
	}
	if got := len(Routes()); got != int(numRoutes)-1 {
		t.Errorf("Routes() has %d routes, want %d", got, numRoutes-1)
	}
	if Route(200).String() != "other" {
		t.Error("an unknown route value must label as other")
	}
}

func TestInspectRoutes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route Route
		body  string
		want  Request
		field string // the field of the expected FieldError; "" for success
	}{
		{"responses string", RouteResponses, `{"model":"m","input":"hello","max_output_tokens":32,"stream":true}`,
			Request{Model: "m", Stream: true, MaxTokens: 32, HasMaxTokens: true, Prompt: PromptSize{TextBytes: 5, Prompts: 1}}, ""},
		{"responses items and instructions", RouteResponses,
			`{"instructions":"be brief","input":[{"role":"user","content":"hi"},{"type":"message","role":"user","content":[{"type":"input_text","text":"abc"},{"type":"input_image","image_url":"x"}]}],"prompt":{"id":"p"}}`,
			Request{Prompt: PromptSize{TextBytes: 8 + 2 + 3, Prompts: 2, Parts: 1}}, ""},
		{"responses ignores max_tokens", RouteResponses, `{"input":"x","max_tokens":9}`, Request{Prompt: PromptSize{TextBytes: 1, Prompts: 1}}, ""},
		{"responses without input", RouteResponses, `{"model":"m"}`, Request{}, "input"},
		{"responses bad input", RouteResponses, `{"input":5}`, Request{}, "input"},
		{"responses bad item", RouteResponses, `{"input":["x"]}`, Request{}, "input[0]"},
		{"responses bad max", RouteResponses, `{"input":"x","max_output_tokens":-1}`, Request{}, "max_output_tokens"},
		{"generate text", RouteGenerate, `{"text":"hello world","sampling_params":{"max_new_tokens":16,"ignore_eos":true,"temperature":0},"stream":true}`,
			Request{Stream: true, MaxTokens: 16, HasMaxTokens: true, IgnoreEOS: true, Prompt: PromptSize{TextBytes: 11, Prompts: 1}}, ""},
		{"generate input_ids", RouteGenerate, `{"input_ids":[1,2,3,4],"sampling_params":{"max_new_tokens":8}}`,
			Request{MaxTokens: 8, HasMaxTokens: true, Prompt: PromptSize{TokenIDs: 4, Prompts: 1}}, ""},
		{"generate batch text", RouteGenerate, `{"text":["ab","cd"]}`, Request{Prompt: PromptSize{TextBytes: 4, Prompts: 2}}, ""},
		{"generate ignores top-level limits", RouteGenerate, `{"text":"a","max_tokens":5,"ignore_eos":true}`, Request{Prompt: PromptSize{TextBytes: 1, Prompts: 1}}, ""},
		{"generate embeds", RouteGenerate, `{"input_embeds":[[0.1,0.2]]}`, Request{Prompt: PromptSize{Parts: 1}}, ""},
		{"generate nothing", RouteGenerate, `{"sampling_params":{}}`, Request{}, "text"},
		{"generate ids as text", RouteGenerate, `{"text":[1,2]}`, Request{}, "text"},
		{"generate text as ids", RouteGenerate, `{"input_ids":"abc"}`, Request{}, "input_ids"},
		{"generate bad sampling", RouteGenerate, `{"text":"a","sampling_params":{"max_new_tokens":"9"}}`, Request{}, "sampling_params.max_new_tokens"},
		{"embeddings strings", RouteEmbeddings, `{"model":"e","input":["abc","de"],"encoding_format":"float"}`,
			Request{Model: "e", Prompt: PromptSize{TextBytes: 5, Prompts: 2}}, ""},
		{"embeddings ids", RouteEmbeddings, `{"input":[5,6,7]}`, Request{Prompt: PromptSize{TokenIDs: 3, Prompts: 1}}, ""},
		{"embeddings messages", RouteEmbeddings, `{"messages":[{"role":"user","content":"abcd"}]}`, Request{Prompt: PromptSize{TextBytes: 4, Prompts: 1}}, ""},
		{"embeddings without input", RouteEmbeddings, `{"model":"e"}`, Request{}, "input"},
		{"embeddings bad input", RouteEmbeddings, `{"input":{}}`, Request{}, "input"},
		{"pooling", RoutePooling, `{"input":"abc"}`, Request{Prompt: PromptSize{TextBytes: 3, Prompts: 1}}, ""},
		{"classify", RouteClassify, `{"input":["a","bc"]}`, Request{Prompt: PromptSize{TextBytes: 3, Prompts: 2}}, ""},
		{"classify ignores messages", RouteClassify, `{"messages":[{"content":"abc"}]}`, Request{}, "input"},
		{"rerank", RouteRerank, `{"query":"q?","documents":["abc","de",{"type":"image_url"}],"top_n":2}`,
			Request{Prompt: PromptSize{TextBytes: 7, Prompts: 4, Parts: 1}}, ""},
		{"rerank without documents", RouteRerank, `{"query":"q"}`, Request{}, "documents"},
		{"rerank bad document", RouteRerank, `{"query":"q","documents":[1]}`, Request{}, "documents[0]"},
		{"score texts", RouteScore, `{"text_1":"abc","text_2":["de","f"]}`, Request{Prompt: PromptSize{TextBytes: 6, Prompts: 3}}, ""},
		{"score queries", RouteScore, `{"queries":"abc","documents":"de"}`, Request{Prompt: PromptSize{TextBytes: 5, Prompts: 2}}, ""},
		{"score duplicate key", RouteScore, `{"text_1":"abcdef","text_1":"a","text_2":"b"}`, Request{Prompt: PromptSize{TextBytes: 2, Prompts: 2}}, ""},
		{"score without pair", RouteScore, `{"text_1":"abc"}`, Request{}, "text_2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Inspect(tc.route, []byte(tc.body))
			if tc.field != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("Inspect = %+v, %v; want a field error on %q", got, err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			tc.want.Route, tc.want.N = tc.route, 1
			if got != tc.want {
				t.Errorf("Inspect =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestInspectRoutesMalformed(t *testing.T) {
	for _, r := range Routes() {
		_, err := Inspect(r, []byte(`{"input":"x","text":"y","query":"q","documents":["d"],"text_1":"a","text_2":"b",}`))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%v: Inspect of malformed JSON = %v, want a syntax error", r, err)
		}
	}
}

// FuzzInspectRoutes runs Inspect for every route beyond completions and chat: it must
// accept only valid JSON, report only its own error kinds, and never count less text
// than a plain string input holds.
func FuzzInspectRoutes(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hello","max_output_tokens":32,"stream":true}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"abc"}]}],"instructions":"x"}`,
		`{"text":"hi","sampling_params":{"max_new_tokens":16,"ignore_eos":true},"stream":true}`,
		`{"input_ids":[[1,2],[3]]}`, `{"input":["a","b"],"encoding_format":"float"}`,
		`{"query":"q","documents":["a",{"type":"image_url"}]}`, `{"text_1":"a","text_2":["b"]}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ref map[string]json.RawMessage
		refOK := json.Unmarshal(body, &ref) == nil && utf8.Valid(body)
		for r := RouteResponses; r < numRoutes; r++ {
			got, err := Inspect(r, body)
			var se *SyntaxError
			var fe *FieldError
			switch {
			case err == nil:
				if !json.Valid(body) {
					t.Fatalf("%v: accepted invalid JSON", r)
				}
			case errors.As(err, &se):
				if refOK && !errors.Is(err, ErrTooDeep) {
					t.Fatalf("%v: valid JSON refused as malformed: %v", r, err)
				}
				continue
			case errors.As(err, &fe):
				continue
			default:
				t.Fatalf("%v: unexpected error %v", r, err)
			}
			p := got.Prompt
			if p.TextBytes < 0 || p.TokenIDs < 0 || p.Prompts < 0 || p.Parts < 0 || got.MaxTokens < 0 {
				t.Fatalf("%v: negative sizes %+v", r, got)
			}
			field := map[Route]string{RouteResponses: "input", RouteGenerate: "text", RouteEmbeddings: "input", RoutePooling: "input", RouteClassify: "input", RouteRerank: "query"}[r]
			var text string
			if raw, ok := ref[field]; ok && json.Unmarshal(raw, &text) == nil && p.TextBytes < len(text) {
				t.Fatalf("%v: TextBytes %d below the %d bytes of %q", r, p.TextBytes, len(text), field)
			}
		}
	})
}
