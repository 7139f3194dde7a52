package enginesim

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestScriptedAnswers(t *testing.T) {
	tok := tokenizer{vocab: 32000}
	cases := []struct {
		name      string
		messages  []map[string]string
		tools     bool
		want      string // the whole scripted answer; "" for none
		wantTools bool
	}{
		{name: "sum", messages: []map[string]string{{"role": "user", "content": "What is 17 + 25? Answer with the number only."}}, want: "42"},
		{name: "sum without spaces", messages: []map[string]string{{"role": "user", "content": "what is 1+2"}}, want: "3"},
		{name: "code word", messages: []map[string]string{
			{"role": "user", "content": "Remember the code word: heliotrope. Reply with OK."},
			{"role": "assistant", "content": "OK"},
			{"role": "user", "content": "What was the code word? Answer with the word only."},
		}, want: "heliotrope"},
		{name: "code word never given", messages: []map[string]string{{"role": "user", "content": "What was the code word?"}}},
		{name: "anything else", messages: []map[string]string{{"role": "user", "content": "Tell me a story."}}},
		{name: "tools are refused", messages: []map[string]string{{"role": "user", "content": "What is 1 + 1?"}}, tools: true, wantTools: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"messages": tc.messages}
			if tc.tools {
				body["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}
			}
			raw, _ := json.Marshal(body)
			pieces, tools := tok.script(raw)
			if tools != tc.wantTools || strings.Join(pieces, "") != tc.want {
				t.Errorf("script = %q, tools %v; want %q, tools %v", strings.Join(pieces, ""), tools, tc.want, tc.wantTools)
			}
		})
	}
}

func TestSpeedMustBePositive(t *testing.T) {
	for _, speed := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := NewServer(Config{Profile: tiny, Speed: speed}); err == nil {
			t.Errorf("speed %v accepted", speed)
		}
	}
	if _, err := NewServer(Config{Profile: tiny, Speed: 50}); err != nil {
		t.Errorf("speed 50 refused: %v", err)
	}
}
