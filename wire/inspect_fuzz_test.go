package wire

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"unicode/utf8"
)

// inspectSeeds are realistic request bodies for FuzzInspect (more seeds live
// in testdata/fuzz/FuzzInspect).
var inspectSeeds = []string{
	`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"Once upon a time","max_tokens":128,"temperature":0.8}`,
	`{"model":"m","prompt":[101,2023,2003,102],"max_tokens":256,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"prompt":[[1,2,3],[4,5]],"n":2,"max_tokens":null}`,
	`{"prompt":["a","b\u00e9"],"stop":["\n"],"logit_bias":{"50256":-100}}`,
	`{"model":"Qwen/Qwen3-8B","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hi \ud83d\ude00"}],"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"max_completion_tokens":64}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}}]}]}`,
	`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"}],"tools":[]}`,
	`{"mod\u0065l":"x","model":"y","prompt":"dup","prompt":[1]}`,
	`{"prompt":"x","max_tokens":1e3,"n":1.0,"continuous_usage_stats":true}`,
	`[{"prompt":"x"}]`,
	`{"prompt":"\ud800\udc00\ud800"}`,
}

// refRequest is what encoding/json says about a body, with exact (case
// sensitive) keys and the last duplicate winning, as Inspect does.
type refRequest struct {
	fields map[string]json.RawMessage
}

func (r refRequest) raw(key string) (json.RawMessage, bool) {
	v, ok := r.fields[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// int returns the value of an integer field, and whether the reference could
// read it as one.
func (r refRequest) int(key string) (int, bool) {
	raw, ok := r.raw(key)
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

func (r refRequest) bool(key string) bool {
	raw, _ := r.raw(key)
	var b bool
	_ = json.Unmarshal(raw, &b)
	return b
}

// refMessages measures "messages" with encoding/json.
func refMessages(raw json.RawMessage) (p PromptSize, ok bool) {
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return p, false
	}
	p.Prompts = len(msgs)
	for _, m := range msgs {
		content := m["content"]
		var text string
		var parts []map[string]json.RawMessage
		switch {
		case content == nil || string(content) == "null":
		case json.Unmarshal(content, &text) == nil:
			p.TextBytes += len(text)
		case json.Unmarshal(content, &parts) == nil:
			for _, part := range parts {
				var typ, txt string
				_ = json.Unmarshal(part["type"], &typ)
				hasText := json.Unmarshal(part["text"], &txt) == nil && string(part["text"]) != "null"
				if typ == "text" || typ == "input_text" || part["type"] == nil && hasText {
					p.TextBytes += len(txt)
				} else {
					p.Parts++
				}
			}
		default:
			return p, false
		}
	}
	return p, true
}

// refPrompt measures "prompt" with encoding/json.
func refPrompt(raw json.RawMessage) (p PromptSize, ok bool) {
	var s string
	var ss []string
	var ids []float64
	var lists [][]float64
	switch {
	case json.Unmarshal(raw, &s) == nil:
		return PromptSize{TextBytes: len(s), Prompts: 1}, true
	case json.Unmarshal(raw, &ss) == nil:
		for _, s := range ss {
			p.TextBytes += len(s)
		}
		p.Prompts = len(ss)
	case json.Unmarshal(raw, &ids) == nil:
		p.TokenIDs, p.Prompts = len(ids), 1
	case json.Unmarshal(raw, &lists) == nil:
		for _, l := range lists {
			p.TokenIDs += len(l)
		}
		p.Prompts = len(lists)
	default:
		return p, false
	}
	return p, true
}

// checkAgainstReference compares a successful Inspect with encoding/json.
func checkAgainstReference(t *testing.T, route Route, body []byte, got Request) {
	t.Helper()
	var ref refRequest
	if err := json.Unmarshal(body, &ref.fields); err != nil {
		t.Fatalf("Inspect accepted a body encoding/json cannot read as an object: %v", err)
	}
	if raw, ok := ref.raw("model"); ok {
		var model string
		if err := json.Unmarshal(raw, &model); err != nil || model != got.Model {
			t.Errorf("Model = %q, encoding/json says %q (%v)", got.Model, model, err)
		}
	} else if got.Model != "" {
		t.Errorf("Model = %q for an absent model", got.Model)
	}
	if got.Stream != ref.bool("stream") || got.IgnoreEOS != ref.bool("ignore_eos") {
		t.Errorf("Stream/IgnoreEOS = %v/%v, disagree with encoding/json", got.Stream, got.IgnoreEOS)
	}
	want, has := ref.int("max_tokens")
	if _, present := ref.raw("max_tokens"); !present {
		want, has = ref.int("max_completion_tokens")
	}
	if has && (got.MaxTokens != want || !got.HasMaxTokens) {
		t.Errorf("MaxTokens = %d (%v), encoding/json says %d", got.MaxTokens, got.HasMaxTokens, want)
	}
	if n, ok := ref.int("n"); ok && got.N != n || !ok && got.N != 1 {
		t.Errorf("N = %d, encoding/json says %d (%v)", got.N, n, ok)
	}
	checkPromptReference(t, route, ref, got.Prompt)
}

func checkPromptReference(t *testing.T, route Route, ref refRequest, got PromptSize) {
	t.Helper()
	var want PromptSize
	var ok bool
	prompt, hasPrompt := ref.raw("prompt")
	messages, hasMessages := ref.raw("messages")
	_, hasEmbeds := ref.raw("prompt_embeds")
	switch {
	case route != RouteChatCompletions && hasPrompt:
		want, ok = refPrompt(prompt)
	case route != RouteChatCompletions && hasEmbeds:
		ok = true
	case route != RouteCompletions && hasMessages:
		want, ok = refMessages(messages)
	default:
		ok = true
	}
	if route != RouteChatCompletions && hasEmbeds {
		want.Parts++
	}
	if ok && got != want {
		t.Errorf("Prompt = %+v, encoding/json says %+v", got, want)
	}
}

func FuzzInspect(f *testing.F) {
	for _, s := range inspectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		valid := json.Valid(body)
		for _, route := range []Route{RouteCompletions, RouteChatCompletions, RouteUnknown} {
			got, err := Inspect(route, body)
			switch {
			case err == nil && !valid:
				t.Fatalf("Inspect(%v) accepted invalid JSON", route)
			case err == nil:
				checkAgainstReference(t, route, body, got)
			case errors.Is(err, ErrMalformed) && valid && utf8.Valid(body):
				t.Fatalf("Inspect(%v) called valid JSON malformed: %v", route, err)
			case !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrInvalidField):
				t.Fatalf("Inspect(%v) error wraps no sentinel: %v", route, err)
			}
		}
	})
}
