package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/slogate/slogate/wire"
)

// The functional gate (as in the published H20-3e rate scan, docs/simulator.md): before
// any load, the engine must show that it serves the model it claims and answers
// correctly. A failed check stops the run.

// Verdict of one gate check.
type Verdict string

// The verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	Skip Verdict = "skipped"
)

// Check is the result of one gate check.
type Check struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason,omitempty"`
}

// GatePassed reports whether no check failed.
func GatePassed(checks []Check) bool {
	for _, c := range checks {
		if c.Verdict == Fail {
			return false
		}
	}
	return true
}

// RunGate runs the gate's checks in order: the model id, a sum, a two-turn memory
// check, streaming integrity, and a tool call where the engine offers tools.
func (t *Target) RunGate(ctx context.Context) []Check {
	checks := []struct {
		name string
		run  func(context.Context) (Verdict, string)
	}{
		{"model_id", t.checkModel},
		{"arithmetic", t.checkSum},
		{"memory", t.checkMemory},
		{"streaming", t.checkStreaming},
		{"tool_call", t.checkTool},
	}
	out := make([]Check, 0, len(checks))
	for _, c := range checks {
		v, reason := c.run(ctx)
		out = append(out, Check{Name: c.name, Verdict: v, Reason: reason})
	}
	return out
}

func (t *Target) checkModel(ctx context.Context) (Verdict, string) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	status, body, err := t.call(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &list) != nil {
		return Fail, fmt.Sprintf("GET /v1/models: status %d, %v", status, err)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == t.Model {
			return Pass, ""
		}
		ids = append(ids, m.ID)
	}
	return Fail, fmt.Sprintf("model %q not served (serves %v)", t.Model, ids)
}

func (t *Target) checkSum(ctx context.Context) (Verdict, string) {
	answer, err := t.chat(ctx, []message{{"user", "What is 17 + 25? Answer with the number only."}}, nil)
	switch {
	case err != nil:
		return Fail, err.Error()
	case !strings.Contains(answer, "42"):
		return Fail, fmt.Sprintf("answered %q, want 42", clip(answer))
	}
	return Pass, ""
}

func (t *Target) checkMemory(ctx context.Context) (Verdict, string) {
	msgs := []message{
		{"user", "Remember the code word: heliotrope. Reply with OK."},
		{"assistant", "OK"},
		{"user", "What was the code word? Answer with the word only."},
	}
	answer, err := t.chat(ctx, msgs, nil)
	switch {
	case err != nil:
		return Fail, err.Error()
	case !strings.Contains(strings.ToLower(answer), "heliotrope"):
		return Fail, fmt.Sprintf("answered %q, want heliotrope", clip(answer))
	}
	return Pass, ""
}

// checkStreaming streams an answer and checks that it reassembles into what a
// non-streaming answer is made of: output, a finish reason, usage, and the end marker.
func (t *Target) checkStreaming(ctx context.Context) (Verdict, string) {
	s := t.send(ctx, prompt{route: t.Route, input: 32, output: 16, seed: 0x5eed}, farFuture)
	switch {
	case s.Failure != NoFailure:
		return Fail, "stream: " + s.Failure.String()
	case s.Res.FinishReason == "":
		return Fail, "stream: no finish_reason"
	case s.Text == "":
		return Fail, "stream: chunks carried no text"
	}
	return Pass, ""
}

func (t *Target) checkTool(ctx context.Context) (Verdict, string) {
	tools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "get_time", "description": "Current time in a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}}
	msgs := []message{{"user", "What time is it in Lisbon? Use the tool."}}
	status, body, err := t.chatRaw(ctx, msgs, tools)
	if err == nil && status == http.StatusBadRequest {
		return Skip, "the engine does not offer tools (400)"
	}
	if err != nil || status != http.StatusOK {
		return Fail, fmt.Sprintf("status %d, %v", status, err)
	}
	c, err := wire.DecodeResponse(body)
	if err != nil || len(c.Choices) == 0 || c.Choices[0].Message == nil || len(c.Choices[0].Message.ToolCalls) == 0 {
		return Fail, "no tool call in the answer"
	}
	return Pass, ""
}

// DiscoverModel sets t.Model to the first model the engine lists on /v1/models.
func (t *Target) DiscoverModel(ctx context.Context) error {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	status, body, err := t.call(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return fmt.Errorf("synth: %s lists no model on /v1/models (status %d, %v)", t.Redacted(), status, err)
	}
	t.Model = list.Data[0].ID
	return nil
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chat sends a non-streaming chat request at temperature 0 and returns the answer text.
func (t *Target) chat(ctx context.Context, msgs []message, tools []any) (string, error) {
	status, body, err := t.chatRaw(ctx, msgs, tools)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", status, clip(string(body)))
	}
	c, err := wire.DecodeResponse(body)
	if err != nil || len(c.Choices) == 0 || c.Choices[0].Message == nil || c.Choices[0].Message.Content == nil {
		return "", errors.New("an answer without a message")
	}
	return *c.Choices[0].Message.Content, nil
}

func (t *Target) chatRaw(ctx context.Context, msgs []message, tools []any) (int, []byte, error) {
	req := map[string]any{"model": t.Model, "messages": msgs, "temperature": 0, "max_tokens": 64}
	if tools != nil {
		req["tools"] = tools
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, nil, err
	}
	return t.call(ctx, http.MethodPost, "/v1/chat/completions", body)
}

// call sends one request and returns the status and (at most 1 MiB of) the body.
func (t *Target) call(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(t.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slogate-Priority", ProbeClass)
	t.addHeader(req.Header)
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	resp, err := t.client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// MaxModelLen returns the context length of t's model as /v1/models reports it (vLLM
// and the simulator do), or 0 when the engine does not say.
func (t *Target) MaxModelLen(ctx context.Context) (int, error) {
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	status, body, err := t.call(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &list) != nil {
		return 0, fmt.Errorf("synth: GET /v1/models: status %d, %v", status, err)
	}
	for _, m := range list.Data {
		if m.ID == t.Model {
			return m.MaxModelLen, nil
		}
	}
	return 0, nil
}
