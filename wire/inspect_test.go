package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestRouteOf(t *testing.T) {
	tests := []struct {
		path string
		want Route
		str  string
	}{
		{"/v1/completions", RouteCompletions, "completions"},
		{"/v1/chat/completions", RouteChatCompletions, "chat_completions"},
		{"/v1/completions/", RouteUnknown, "other"},
		{"/v1/models", RouteUnknown, "other"},
		{"/V1/completions", RouteUnknown, "other"},
		{"", RouteUnknown, "other"},
	}
	for _, tt := range tests {
		if got := RouteOf(tt.path); got != tt.want || got.String() != tt.str {
			t.Errorf("RouteOf(%q) = %v (%q), want %v (%q)", tt.path, got, got.String(), tt.want, tt.str)
		}
	}
}

func TestInspect(t *testing.T) {
	c, chat, other := RouteCompletions, RouteChatCompletions, RouteUnknown
	tests := []struct {
		name  string
		route Route
		body  string
		want  Request
	}{
		{"string prompt with stream options", c,
			`{"model":"m","prompt":"hello","max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`,
			Request{Model: "m", Stream: true, IncludeUsage: true, MaxTokens: 16, HasMaxTokens: true, N: 1,
				Prompt: PromptSize{TextBytes: 5, Prompts: 1}}},
		{"list of strings", c, `{"prompt":["ab","cde",""]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 5, Prompts: 3}}},
		{"token ids", c, `{"prompt":[1,2,3,0],"max_tokens":8,"ignore_eos":true}`,
			Request{N: 1, MaxTokens: 8, HasMaxTokens: true, IgnoreEOS: true, Prompt: PromptSize{TokenIDs: 4, Prompts: 1}}},
		{"lists of token ids", c, `{"prompt":[[1,2],[3],[]]}`,
			Request{N: 1, Prompt: PromptSize{TokenIDs: 3, Prompts: 3}}},
		{"integral floats accepted as integers", c, `{"prompt":[1.0,2e0],"max_tokens":1e3,"n":2.0}`,
			Request{N: 2, MaxTokens: 1000, HasMaxTokens: true, Prompt: PromptSize{TokenIDs: 2, Prompts: 1}}},
		{"chat string content", chat,
			`{"model":"llama","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"hi"}]}`,
			Request{Model: "llama", N: 1, Prompt: PromptSize{TextBytes: 9, Prompts: 2}}},
		{"chat text and image parts", chat,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"what is this"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"text":"ab"},{"type":"input_text","text":"c"}]}]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 15, Prompts: 1, Parts: 1}}},
		{"chat text field after type", chat,
			`{"messages":[{"content":[{"text":"xyz","type":"text"},{"type":"input_audio","input_audio":{"data":"..","format":"wav"}},{"image_url":{"url":"u"}}]}]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 3, Prompts: 1, Parts: 2}}},
		{"chat null content and tool messages", chat,
			`{"messages":[{"role":"user","content":"weather?"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{\"city\":\"Paris\"}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":"12C"}],"tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object"}}}]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 11, Prompts: 3}}},
		{"chat duplicate content: last wins", chat, `{"messages":[{"content":"abcdef","content":"ab"}]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 2, Prompts: 1}}},
		{"max_completion_tokens alone", chat, `{"messages":[],"max_completion_tokens":32}`,
			Request{N: 1, MaxTokens: 32, HasMaxTokens: true}},
		{"max_tokens wins over max_completion_tokens", chat, `{"messages":[],"max_completion_tokens":32,"max_tokens":7}`,
			Request{N: 1, MaxTokens: 7, HasMaxTokens: true}},
		{"nulls are absent", c,
			`{"model":null,"prompt":"x","stream":null,"max_tokens":null,"n":null,"stream_options":null,"ignore_eos":null}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"n and continuous usage in stream_options", c,
			`{"prompt":"x","n":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true,"other":[1]}}`,
			Request{N: 3, Stream: true, IncludeUsage: true, ContinuousUsage: true, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"top-level continuous_usage_stats", c, `{"prompt":"x","continuous_usage_stats":true}`,
			Request{N: 1, ContinuousUsage: true, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"escapes counted decoded", c, `{"prompt":"a\n\u00e9\ud83d\ude00\"\\\/\t"}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 1 + 1 + 2 + 4 + 1 + 1 + 1 + 1, Prompts: 1}}},
		{"raw UTF-8 counted in bytes", c, `{"prompt":"héllo 世界 😀"}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: len("héllo 世界 😀"), Prompts: 1}}},
		{"lone surrogates count as U+FFFD", c, `{"prompt":"\ud800x\udc00\ud800\u0041"}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 3 + 1 + 3 + 3 + 1, Prompts: 1}}},
		{"duplicate keys: last wins", c, `{"model":"a","prompt":"long prompt","model":"b","prompt":[1],"stream":true,"stream":false}`,
			Request{Model: "b", N: 1, Prompt: PromptSize{TokenIDs: 1, Prompts: 1}}},
		{"escaped keys and model", c, `{"mod\u0065l":"Qwen\/Qwen3-8B\u00e9","\u0070rompt":"xy"}`,
			Request{Model: "Qwen/Qwen3-8Bé", N: 1, Prompt: PromptSize{TextBytes: 2, Prompts: 1}}},
		{"keys are case sensitive", c, `{"Model":"a","prompt":"x","MAX_TOKENS":5}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"unknown fields skipped", c,
			`{"temperature":0.7,"top_p":1e-3,"logit_bias":{"50256":-100},"stop":["\n"],"seed":-1,"echo":false,"x":null,"prompt":"p"}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"whitespace everywhere", c, " \t\r\n{ \"prompt\" :\n[ 1 ,\t2 ] , \"stream\" : true }\n ",
			Request{N: 1, Stream: true, Prompt: PromptSize{TokenIDs: 2, Prompts: 1}}},
		{"prompt_embeds without prompt", c, `{"prompt_embeds":"AAAA"}`,
			Request{N: 1, Prompt: PromptSize{Parts: 1}}},
		{"chat route ignores prompt", chat, `{"prompt":5,"messages":[{"content":"x"}]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"completions route ignores messages", c, `{"messages":5,"prompt":"x"}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"unknown route measures messages", other, `{"messages":[{"content":"abc"}]}`,
			Request{N: 1, Prompt: PromptSize{TextBytes: 3, Prompts: 1}}},
		{"unknown route needs nothing", other, `{}`, Request{N: 1}},
		{"max int", c, `{"prompt":"x","max_tokens":2147483647}`,
			Request{N: 1, MaxTokens: 2147483647, HasMaxTokens: true, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
		{"negative zero", c, `{"prompt":"x","max_tokens":-0}`,
			Request{N: 1, HasMaxTokens: true, Prompt: PromptSize{TextBytes: 1, Prompts: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Inspect(tt.route, []byte(tt.body))
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			tt.want.Route = tt.route
			if got != tt.want {
				t.Errorf("Inspect =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

func TestPromptSizeExact(t *testing.T) {
	tests := []struct {
		name string
		p    PromptSize
		want bool
	}{
		{"token ids", PromptSize{TokenIDs: 5, Prompts: 1}, true},
		{"text", PromptSize{TextBytes: 5, Prompts: 1}, false},
		{"ids and parts", PromptSize{TokenIDs: 5, Parts: 1}, false},
		{"empty", PromptSize{}, false},
	}
	for _, tt := range tests {
		if got := tt.p.Exact(); got != tt.want {
			t.Errorf("%s: Exact() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	c, chat := RouteCompletions, RouteChatCompletions
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	tests := []struct {
		name  string
		route Route
		body  string
		want  error
		field string // for ErrInvalidField
	}{
		{"empty", c, ``, ErrMalformed, ""},
		{"whitespace only", c, " \n", ErrMalformed, ""},
		{"not an object", c, `[1,2]`, ErrInvalidField, ""},
		{"string body", c, `"prompt"`, ErrInvalidField, ""},
		{"malformed non-object", c, `[1,`, ErrMalformed, ""},
		{"trailing garbage", c, `{"prompt":"x"} x`, ErrMalformed, ""},
		{"two objects", c, `{"prompt":"x"}{}`, ErrMalformed, ""},
		{"trailing comma in object", c, `{"prompt":"x",}`, ErrMalformed, ""},
		{"trailing comma in array", c, `{"prompt":[1,]}`, ErrMalformed, ""},
		{"leading comma in array", c, `{"prompt":[,1]}`, ErrMalformed, ""},
		{"missing colon", c, `{"prompt" "x"}`, ErrMalformed, ""},
		{"missing comma", c, `{"prompt":"x" "n":1}`, ErrMalformed, ""},
		{"unquoted key", c, `{prompt:"x"}`, ErrMalformed, ""},
		{"single quotes", c, `{'prompt':'x'}`, ErrMalformed, ""},
		{"unterminated object", c, `{"prompt":"x"`, ErrMalformed, ""},
		{"unterminated string", c, `{"prompt":"x`, ErrMalformed, ""},
		{"unterminated escape", c, `{"prompt":"x\`, ErrMalformed, ""},
		{"invalid escape", c, `{"prompt":"\x41"}`, ErrMalformed, ""},
		{"short unicode escape", c, `{"prompt":"\u12"}`, ErrMalformed, ""},
		{"bad hex in unicode escape", c, `{"prompt":"\u12g4"}`, ErrMalformed, ""},
		{"bad escape after high surrogate", c, `{"prompt":"\ud800\uzzzz"}`, ErrMalformed, ""},
		{"control character in string", c, "{\"prompt\":\"a\tb\"}", ErrMalformed, ""},
		{"newline in string", c, "{\"prompt\":\"a\nb\"}", ErrMalformed, ""},
		{"invalid UTF-8", c, "{\"prompt\":\"\xff\"}", ErrMalformed, ""},
		{"truncated UTF-8", c, "{\"prompt\":\"\xe4\xb8\"}", ErrMalformed, ""},
		{"UTF-8 encoded surrogate", c, "{\"prompt\":\"\xed\xa0\x80\"}", ErrMalformed, ""},
		{"invalid UTF-8 in key", c, "{\"\xc3\":1,\"prompt\":\"x\"}", ErrMalformed, ""},
		{"leading zero", c, `{"prompt":[01]}`, ErrMalformed, ""},
		{"bare minus", c, `{"prompt":[-]}`, ErrMalformed, ""},
		{"dot without digits", c, `{"max_tokens":1.}`, ErrMalformed, ""},
		{"leading dot", c, `{"max_tokens":.5}`, ErrMalformed, ""},
		{"plus sign", c, `{"max_tokens":+1}`, ErrMalformed, ""},
		{"empty exponent", c, `{"max_tokens":1e}`, ErrMalformed, ""},
		{"NaN", c, `{"temperature":NaN}`, ErrMalformed, ""},
		{"Infinity", c, `{"temperature":-Infinity}`, ErrMalformed, ""},
		{"bad literal", c, `{"stream":tru}`, ErrMalformed, ""},
		{"literal with trailing letters", c, `{"stream":truex}`, ErrMalformed, ""},
		{"NUL byte", c, "{\"prompt\":\"x\"}\x00", ErrMalformed, ""},
		{"BOM", c, "\xef\xbb\xbf{\"prompt\":\"x\"}", ErrMalformed, ""},
		{"nesting at the limit", c, deep(MaxDepth-1) + "x", ErrMalformed, ""},
		{"nesting over the limit", c, deep(MaxDepth), ErrTooDeep, ""},
		{"deep nesting unterminated", c, `{"a":` + strings.Repeat("[", 10000), ErrTooDeep, ""},
		{"syntax error wins over field error", c, `{"max_tokens":-1,"prompt":"x"`, ErrMalformed, ""},
		{"stream not a bool", c, `{"prompt":"x","stream":"yes"}`, ErrInvalidField, "stream"},
		{"stream as number", c, `{"prompt":"x","stream":1}`, ErrInvalidField, "stream"},
		{"model not a string", c, `{"prompt":"x","model":5}`, ErrInvalidField, "model"},
		{"max_tokens negative", c, `{"prompt":"x","max_tokens":-1}`, ErrInvalidField, "max_tokens"},
		{"max_tokens fractional", c, `{"prompt":"x","max_tokens":1.5}`, ErrInvalidField, "max_tokens"},
		{"max_tokens string", c, `{"prompt":"x","max_tokens":"16"}`, ErrInvalidField, "max_tokens"},
		{"max_tokens too large", c, `{"prompt":"x","max_tokens":2147483648}`, ErrInvalidField, "max_tokens"},
		{"max_tokens huge", c, `{"prompt":"x","max_tokens":1e300}`, ErrInvalidField, "max_tokens"},
		{"max_completion_tokens negative", chat, `{"messages":[],"max_completion_tokens":-5}`, ErrInvalidField, "max_completion_tokens"},
		{"n zero", c, `{"prompt":"x","n":0}`, ErrInvalidField, "n"},
		{"ignore_eos not a bool", c, `{"prompt":"x","ignore_eos":"true"}`, ErrInvalidField, "ignore_eos"},
		{"stream_options not an object", c, `{"prompt":"x","stream_options":true}`, ErrInvalidField, "stream_options"},
		{"include_usage not a bool", c, `{"prompt":"x","stream_options":{"include_usage":1}}`, ErrInvalidField, "stream_options.include_usage"},
		{"continuous_usage_stats not a bool", c, `{"prompt":"x","continuous_usage_stats":{}}`, ErrInvalidField, "continuous_usage_stats"},
		{"prompt a number", c, `{"prompt":42}`, ErrInvalidField, "prompt"},
		{"prompt an object", c, `{"prompt":{"text":"x"}}`, ErrInvalidField, "prompt"},
		{"prompt empty list", c, `{"prompt":[]}`, ErrInvalidField, "prompt"},
		{"prompt mixed list", c, `{"prompt":[1,"a"]}`, ErrInvalidField, "prompt[1]"},
		{"prompt list of bools", c, `{"prompt":[true]}`, ErrInvalidField, "prompt[0]"},
		{"prompt negative id", c, `{"prompt":[1,-2]}`, ErrInvalidField, "prompt[1]"},
		{"prompt fractional id", c, `{"prompt":[1.5]}`, ErrInvalidField, "prompt[0]"},
		{"prompt nested negative id", c, `{"prompt":[[1],[-1]]}`, ErrInvalidField, "prompt[1][0]"},
		{"prompt nested strings", c, `{"prompt":[["a"]]}`, ErrInvalidField, "prompt[0][0]"},
		{"prompt strings then list", c, `{"prompt":["a",[1]]}`, ErrInvalidField, "prompt[1]"},
		{"missing prompt", c, `{"model":"m"}`, ErrInvalidField, "prompt"},
		{"null prompt", c, `{"prompt":null}`, ErrInvalidField, "prompt"},
		{"missing messages", chat, `{"model":"m","prompt":"x"}`, ErrInvalidField, "messages"},
		{"messages an object", chat, `{"messages":{"role":"user"}}`, ErrInvalidField, "messages"},
		{"message not an object", chat, `{"messages":[{"content":"x"},"hi"]}`, ErrInvalidField, "messages[1]"},
		{"content a number", chat, `{"messages":[{"content":5}]}`, ErrInvalidField, "messages[0].content"},
		{"content part not an object", chat, `{"messages":[{"content":["x"]}]}`, ErrInvalidField, "messages[0].content[0]"},
		{"text part without text", chat, `{"messages":[{"content":[{"type":"text"}]}]}`, ErrInvalidField, "messages[0].content[0]"},
		{"text part with numeric text", chat, `{"messages":[{"content":[{"type":"text","text":1}]}]}`, ErrInvalidField, "messages[0].content[0]"},
		{"part type not a string", chat, `{"messages":[{"content":[{"type":1}]}]}`, ErrInvalidField, "messages[0].content[0].type"},
		{"first field error wins", c, `{"stream":1,"max_tokens":-1,"prompt":"x"}`, ErrInvalidField, "stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Inspect(tt.route, []byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Inspect error = %v, want %v", err, tt.want)
			}
			if got != (Request{Route: tt.route}) {
				t.Errorf("Inspect returned %+v with an error, want only the route", got)
			}
			var fe *FieldError
			if errors.As(err, &fe) != (tt.want == ErrInvalidField) {
				t.Fatalf("error %T, want *FieldError only for ErrInvalidField", err)
			}
			if fe != nil && fe.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", fe.Field, tt.field, err)
			}
			var se *SyntaxError
			if errors.As(err, &se) && (se.Offset < 0 || se.Offset > len(tt.body)) {
				t.Errorf("offset %d outside the body", se.Offset)
			}
		})
	}
}

func TestInspectErrorMessages(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"field", `{"prompt":"x","max_tokens":-1}`, `wire: field "max_tokens": must be a non-negative integer`},
		{"nested field", `{"prompt":[[1],[2,"x"]]}`, `wire: field "prompt[1][1]": must be a token id (a non-negative integer)`},
		{"body", `[]`, `wire: request body: must be a JSON object`},
		{"syntax", `{"prompt":"\q"}`, `wire: malformed JSON at offset 11: invalid escape in string`},
		{"end", `{"prompt":"x"`, `wire: malformed JSON at offset 13: unexpected end of input, expected ',' or '}' after object member`},
		{"char", `{"prompt":x}`, `wire: malformed JSON at offset 10: invalid character 'x', expected beginning of value`},
		{"depth", `{"a":` + strings.Repeat("[", 70), `wire: JSON nested too deeply at offset 68: more than 64 levels`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Inspect(RouteCompletions, []byte(tt.body))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v\nwant    %s", err, tt.want)
			}
		})
	}
}

// largeBody returns a chat-free completions body whose prompt holds about n
// bytes of text with escapes and multi-byte characters, and the decoded size
// of that prompt.
func largeBody(n int) (body []byte, textBytes int) {
	const unit = `The quick brown fox \"jumps\" over the lazy dog; é 世界 \u00e9\n`
	const unitDecoded = "The quick brown fox \"jumps\" over the lazy dog; é 世界 é\n"
	reps := n / len(unit)
	var b strings.Builder
	b.WriteString(`{"model":"meta-llama/Llama-3.1-8B-Instruct","stream":true,"max_tokens":256,"prompt":"`)
	for range reps {
		b.WriteString(unit)
	}
	b.WriteString(`","temperature":0}`)
	return []byte(b.String()), reps * len(unitDecoded)
}

func TestInspectLargePromptAllocations(t *testing.T) {
	body, text := largeBody(1 << 20)
	req, err := Inspect(RouteCompletions, body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Prompt.TextBytes != text {
		t.Fatalf("TextBytes = %d, want %d", req.Prompt.TextBytes, text)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := Inspect(RouteCompletions, body); err != nil {
			t.Fatal(err)
		}
	})
	// Only the model name is copied; the 1 MB prompt must not be.
	if allocs > 2 {
		t.Errorf("Inspect of a 1 MB prompt made %.0f allocations, want at most 2", allocs)
	}
}

func TestInspectTokenIDAllocations(t *testing.T) {
	ids := strings.Repeat("128000,", 100000)
	body := []byte(`{"prompt":[` + ids + `1],"max_tokens":1}`)
	allocs := testing.AllocsPerRun(10, func() {
		req, err := Inspect(RouteCompletions, body)
		if err != nil || req.Prompt.TokenIDs != 100001 {
			t.Fatalf("Inspect = %+v, %v", req.Prompt, err)
		}
	})
	if allocs > 0 {
		t.Errorf("Inspect of 100k token ids made %.0f allocations, want 0", allocs)
	}
}

func BenchmarkInspect1MB(b *testing.B) {
	body, _ := largeBody(1 << 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inspect(RouteCompletions, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInspectChat(b *testing.B) {
	body := []byte(`{"model":"Qwen/Qwen3-8B","stream":true,"stream_options":{"include_usage":true},` +
		`"max_completion_tokens":512,"messages":[{"role":"system","content":"You are a helpful assistant."},` +
		`{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("Describe this image in detail. ", 60) +
		`"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}],"temperature":0.6}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inspect(RouteChatCompletions, body); err != nil {
			b.Fatal(err)
		}
	}
}
