package enginesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/slogate/slogate/wire"
)

// raw posts body to path and returns the status, the body as far as it came, and the
// error that ended reading it (nil at a clean end).
func (e *simEnv) raw(path, body string, header http.Header) (int, []byte, error) {
	e.t.Helper()
	resp := e.post(context.Background(), path, body, header)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// streamSummary is what a client measures of a stream of route.
type streamSummary struct {
	events, outputs, tokens, input int
	done, end, failed              bool
	names                          []string // the "event:" names, for typed streams
	lastText                       string
}

func summarise(t *testing.T, route wire.Route, body []byte) streamSummary {
	t.Helper()
	var s streamSummary
	r := wire.NewSSEReader(bytes.NewReader(body), wire.DefaultMaxEvent)
	prevTokens := 0
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return s
		}
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if ev.IsDone() {
			s.done = true
			continue
		}
		s.events++
		c, err := wire.ScanFor(route, ev.Data)
		if err != nil {
			t.Fatalf("event %q: %v", ev.Data, err)
		}
		if ev.Name != "" {
			s.names = append(s.names, ev.Name)
			var typed struct{ Type string }
			if json.Unmarshal(ev.Data, &typed); typed.Type != ev.Name {
				t.Errorf("event %q carries type %q", ev.Name, typed.Type)
			}
		}
		switch {
		case c.Cumulative && c.Usage.CompletionTokens > prevTokens:
			s.outputs++
			prevTokens = c.Usage.CompletionTokens
			var g struct{ Text string }
			_ = json.Unmarshal(ev.Data, &g)
			s.lastText = g.Text
		case !c.Cumulative && c.OutputBytes > 0:
			s.outputs++
		}
		if c.HasUsage {
			s.tokens, s.input = c.Usage.CompletionTokens, c.Usage.PromptTokens
		}
		s.end = s.end || c.End
		s.failed = s.failed || c.IsError
	}
}

func TestResponsesStream(t *testing.T) {
	e := startSim(t, Config{})
	prompt := e.tokenize(map[string]any{"messages": userMessages("Name the capital of France.")})
	for _, tc := range []struct {
		name, fault         string
		outputs, tokens     int
		end, failed, broken bool
	}{
		{"complete", "", 6, 6, true, false, false},
		// vLLM cannot send its error as a Responses event: the body breaks off.
		{"error_after", "error_after=3", 3, 0, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.fault != "" {
				h.Set(FaultHeader, tc.fault)
			}
			status, body, err := e.raw("/v1/responses", `{"model":"`+tinyModel+`","input":"Name the capital of France.","max_output_tokens":6,"ignore_eos":true,"stream":true}`, h)
			if status != http.StatusOK || (err != nil) != tc.broken {
				t.Fatalf("status %d, read error %v (want broken=%v)", status, err, tc.broken)
			}
			s := summarise(t, wire.RouteResponses, body)
			if s.outputs != tc.outputs || s.tokens != tc.tokens || s.end != tc.end || s.failed != tc.failed || s.done {
				t.Errorf("outputs %d tokens %d end %v failed %v [DONE] %v; want %d %d %v %v false", s.outputs, s.tokens, s.end, s.failed, s.done, tc.outputs, tc.tokens, tc.end, tc.failed)
			}
			if len(s.names) < 2 || s.names[0] != "response.created" || s.names[1] != "response.in_progress" {
				t.Errorf("the stream opens with %v", s.names)
			}
			if tc.end && (s.input != prompt || s.names[len(s.names)-1] != "response.completed") {
				t.Errorf("input tokens %d (want %d), last event %s", s.input, prompt, s.names[len(s.names)-1])
			}
		})
	}
}

func TestResponsesBody(t *testing.T) {
	e := startSim(t, Config{})
	var got struct {
		Object, Status    string
		IncompleteDetails struct{ Reason string } `json:"incomplete_details"`
		Usage             struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
		Output []struct {
			Content []struct{ Text, Type string }
		}
	}
	e.postJSON("/v1/responses", map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hi"}}}}, "max_output_tokens": 5, "ignore_eos": true}, &got)
	if got.Object != "response" || got.Status != "incomplete" || got.IncompleteDetails.Reason != "max_output_tokens" || got.Usage.OutputTokens != 5 || got.Usage.InputTokens == 0 {
		t.Errorf("response %+v", got)
	}
	if len(got.Output) != 1 || len(got.Output[0].Content) != 1 || got.Output[0].Content[0].Type != "output_text" || got.Output[0].Content[0].Text == "" {
		t.Errorf("output %+v", got.Output)
	}
}

func TestGenerateStream(t *testing.T) {
	e := startSim(t, Config{Flavor: FlavorSGLang})
	prompt := e.countText("Name the capital of France.")
	for _, tc := range []struct {
		name, fault     string
		outputs, tokens int
		failed          bool
	}{
		{"complete", "", 5, 5, false},
		{"error_after", "error_after=2", 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.fault != "" {
				h.Set(FaultHeader, tc.fault)
			}
			status, body, err := e.raw("/generate", `{"text":"Name the capital of France.","sampling_params":{"max_new_tokens":5,"ignore_eos":true},"stream":true}`, h)
			if status != http.StatusOK || err != nil {
				t.Fatalf("status %d, read error %v", status, err)
			}
			s := summarise(t, wire.RouteGenerate, body)
			if s.outputs != tc.outputs || s.tokens != tc.tokens || s.input != prompt || !s.done || s.failed != tc.failed {
				t.Errorf("outputs %d tokens %d input %d [DONE] %v failed %v; want %d %d %d true %v", s.outputs, s.tokens, s.input, s.done, s.failed, tc.outputs, tc.tokens, prompt, tc.failed)
			}
			if !tc.failed && e.countText(s.lastText) == 0 {
				t.Errorf("the last event's text %q is not the whole answer", s.lastText)
			}
		})
	}
}

func TestGenerateBody(t *testing.T) {
	e := startSim(t, Config{Flavor: FlavorSGLang})
	var got struct {
		Text     string
		MetaInfo struct {
			PromptTokens     int                   `json:"prompt_tokens"`
			CompletionTokens int                   `json:"completion_tokens"`
			FinishReason     struct{ Type string } `json:"finish_reason"`
		} `json:"meta_info"`
	}
	e.postJSON("/generate", map[string]any{"input_ids": []int{300, 301, 302}, "sampling_params": map[string]any{"max_new_tokens": 4, "ignore_eos": true}}, &got)
	if got.Text == "" || got.MetaInfo.PromptTokens != 3 || got.MetaInfo.CompletionTokens != 4 || got.MetaInfo.FinishReason.Type != "length" {
		t.Errorf("answer %+v", got)
	}
}

// Each flavor serves its own engine's native route only.
func TestRoutesByFlavor(t *testing.T) {
	for _, tc := range []struct {
		flavor Flavor
		path   string
		status int
	}{
		{FlavorVLLM, "/generate", http.StatusNotFound},
		{FlavorSGLang, "/v1/responses", http.StatusNotFound},
		{FlavorVLLM, "/v1/embeddings", http.StatusOK},
		{FlavorSGLang, "/v1/embeddings", http.StatusOK},
		{FlavorVLLM, "/v1/rerank", http.StatusOK},
	} {
		t.Run(string(tc.flavor)+tc.path, func(t *testing.T) {
			e := startSim(t, Config{Flavor: tc.flavor})
			body := `{"input":"some text","text":"x","query":"q","documents":["a b c"]}`
			if status, data, _ := e.raw(tc.path, body, nil); status != tc.status {
				t.Errorf("status %d (%s), want %d", status, data, tc.status)
			}
		})
	}
}

func TestPoolingUsage(t *testing.T) {
	e := startSim(t, Config{})
	want := e.countText("embed these words")
	var emb struct {
		Data  []struct{ Embedding []float64 }
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	e.postJSON("/v1/embeddings", map[string]any{"model": tinyModel, "input": "embed these words"}, &emb)
	if len(emb.Data) != 1 || len(emb.Data[0].Embedding) == 0 || emb.Usage.PromptTokens != want || emb.Usage.TotalTokens != want {
		t.Errorf("embeddings answer %+v, want %d prompt tokens", emb, want)
	}
	if status, _, _ := e.raw("/v1/embeddings", `{"input":""}`, nil); status != http.StatusBadRequest {
		t.Errorf("an empty input: status %d, want 400", status)
	}
}
