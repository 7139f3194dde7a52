package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/slogate/slogate/enginesim"
)

// brokenEngine is an engine that answers some of the gate's questions its own way and
// passes everything else to a simulator: a real handler in front of a real one.
type brokenEngine struct {
	sim         http.Handler
	sum, word   string // the answers to the sum and the code word, "" to let the simulator answer
	models      string // the /v1/models body, "" to let the simulator answer
	tools       string // the answer to a request with tools: "call", "text" or "" (the simulator's 400)
	completions atomic.Int64
}

func (e *brokenEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/completions":
		e.completions.Add(1)
	case "/v1/models":
		if e.models != "" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, e.models)
			return
		}
	case "/v1/chat/completions":
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case e.sum != "" && strings.Contains(string(body), "17 + 25"):
			chatAnswer(w, e.sum, false)
			return
		case e.word != "" && strings.Contains(string(body), "code word?"):
			chatAnswer(w, e.word, false)
			return
		case e.tools != "" && strings.Contains(string(body), `"tools"`):
			chatAnswer(w, "It is noon.", e.tools == "call")
			return
		}
	}
	e.sim.ServeHTTP(w, r)
}

// chatAnswer writes a chat completion with content, and a tool call when call is set.
func chatAnswer(w http.ResponseWriter, content string, call bool) {
	msg := map[string]any{"role": "assistant", "content": content}
	if call {
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_time", "arguments": `{"city":"Lisbon"}`}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "sim-tiny",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
	})
}

// verdicts renders checks as "name=verdict" pairs.
func verdicts(checks []Check) string {
	var parts []string
	for _, c := range checks {
		parts = append(parts, c.Name+"="+string(c.Verdict))
	}
	return strings.Join(parts, " ")
}

func TestGate(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	simHandler := func() http.Handler { return runSim(t, enginesim.Config{}).Handler() }
	tests := []struct {
		name   string
		target func(t *testing.T) *Target
		want   string // verdicts
		reason map[string]string
	}{
		{
			// The simulator has no tool parser: it answers 400 to tools, and the check is skipped.
			name:   "the simulator passes",
			target: func(t *testing.T) *Target { return s.target(t, "sim-tiny") },
			want:   "model_id=pass arithmetic=pass memory=pass streaming=pass tool_call=skipped",
			reason: map[string]string{"tool_call": "does not offer tools (400)"},
		},
		{
			name:   "a model that is not served",
			target: func(t *testing.T) *Target { return s.target(t, "gpt-nope") },
			want:   "model_id=fail arithmetic=fail memory=fail streaming=fail tool_call=fail",
			reason: map[string]string{"model_id": `model "gpt-nope" not served (serves [sim-tiny])`, "arithmetic": "status 404", "streaming": "http_status"},
		},
		{
			name:   "a wrong sum",
			target: brokenTarget(&brokenEngine{sum: "41"}, simHandler),
			want:   "model_id=pass arithmetic=fail memory=pass streaming=pass tool_call=skipped",
			reason: map[string]string{"arithmetic": `answered "41", want 42`},
		},
		{
			name:   "a forgotten code word",
			target: brokenTarget(&brokenEngine{word: "sunflower"}, simHandler),
			want:   "model_id=pass arithmetic=pass memory=fail streaming=pass tool_call=skipped",
			reason: map[string]string{"memory": "want heliotrope"},
		},
		{
			name:   "an engine with tools",
			target: brokenTarget(&brokenEngine{tools: "call"}, simHandler),
			want:   "model_id=pass arithmetic=pass memory=pass streaming=pass tool_call=pass",
		},
		{
			name:   "tools offered but not called",
			target: brokenTarget(&brokenEngine{tools: "text"}, simHandler),
			want:   "model_id=pass arithmetic=pass memory=pass streaming=pass tool_call=fail",
			reason: map[string]string{"tool_call": "no tool call"},
		},
		{
			name:   "a broken model list",
			target: brokenTarget(&brokenEngine{models: "not json"}, simHandler),
			want:   "model_id=fail arithmetic=pass memory=pass streaming=pass tool_call=skipped",
			reason: map[string]string{"model_id": "GET /v1/models"},
		},
		{
			name:   "a stream that breaks off",
			target: func(t *testing.T) *Target { return faulty(s.target(t, "sim-tiny"), "drop_after=3") },
			want:   "model_id=pass arithmetic=fail memory=fail streaming=fail tool_call=skipped",
			reason: map[string]string{"streaming": "stream: transport"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checks := tc.target(t).RunGate(context.Background())
			if got := verdicts(checks); got != tc.want {
				t.Errorf("gate: %s\nwant: %s\n%+v", got, tc.want, checks)
			}
			for _, c := range checks {
				if want, ok := tc.reason[c.Name]; ok && !strings.Contains(c.Reason, want) {
					t.Errorf("%s: reason %q, want it to mention %q", c.Name, c.Reason, want)
				}
			}
			if GatePassed(checks) != !strings.Contains(tc.want, "=fail") {
				t.Errorf("GatePassed = %v", GatePassed(checks))
			}
		})
	}
}

// brokenTarget serves e in front of a fresh simulator.
func brokenTarget(e *brokenEngine, sim func() http.Handler) func(t *testing.T) *Target {
	return func(t *testing.T) *Target {
		e.sim = sim()
		return newTarget(t, upstream(t, e.ServeHTTP), "sim-tiny")
	}
}

// Acceptance: the gate passes against the simulator and the run goes on; it fails against
// an engine that answers the sum wrongly, or one that does not serve the model, and Run
// returns an error with the gate's checks and no cells, having sent no load.
func TestAcceptanceGate(t *testing.T) {
	w := Workload{Name: "gated", Kind: Shapes, Shapes: []Shape{{"s", 32, 8}}, Concurrency: []int{1, 2}, Requests: 1}
	sim := func() http.Handler { return runSim(t, enginesim.Config{}).Handler() }
	tests := []struct {
		name   string
		engine *brokenEngine
		model  string
		pass   bool
		failed string
	}{
		{"the simulator", &brokenEngine{}, "sim-tiny", true, ""},
		{"a wrong sum", &brokenEngine{sum: "41"}, "sim-tiny", false, "arithmetic"},
		{"a model that is not served", &brokenEngine{}, "gpt-nope", false, "model_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.engine.sim = sim()
			tg := newTarget(t, upstream(t, tc.engine.ServeHTTP), tc.model)
			rep, err := Run(context.Background(), tg, w, Options{Gate: true})
			if len(rep.Gate) != 5 {
				t.Fatalf("%d gate checks, want 5", len(rep.Gate))
			}
			if tc.pass {
				if err != nil || len(rep.Cells) != 2 || !GatePassed(rep.Gate) {
					t.Errorf("err %v, %d cells, gate %s; want a run", err, len(rep.Cells), verdicts(rep.Gate))
				}
				return
			}
			if !errors.Is(err, ErrGateFailed) || len(rep.Cells) != 0 || rep.Finished.IsZero() {
				t.Errorf("err %v, %d cells; want ErrGateFailed and no cells", err, len(rep.Cells))
			}
			if !strings.Contains(verdicts(rep.Gate), tc.failed+"=fail") {
				t.Errorf("gate %s, want %s to fail", verdicts(rep.Gate), tc.failed)
			}
			// The streaming check is the only completions request: no load was sent.
			if n := tc.engine.completions.Load(); n != 1 {
				t.Errorf("%d completions requests, want the streaming check's 1", n)
			}
		})
	}
}

// A gate cut short by the end of ctx reports the context's error, not a failed gate.
func TestGateCancelled(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Run(ctx, s.target(t, "sim-tiny"), quickWorkload, Options{Gate: true})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrGateFailed) || len(rep.Cells) != 0 {
		t.Errorf("err %v, %d cells; want context.Canceled and no cells", err, len(rep.Cells))
	}
}
