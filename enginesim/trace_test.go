package enginesim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanShape is the shape of vLLM's span as testdata/traces/vllm-llm-request.json
// records it.
type spanShape struct {
	Source []string `json:"source"`
	Read   string   `json:"read"`
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Start  string   `json:"start"`
	Parent string   `json:"parent"`
	Abort  struct {
		FinishReasons string `json:"finish_reasons"`
		Status        string `json:"status"`
	} `json:"abort"`
	Attributes map[string]struct {
		Type     string `json:"type"` // OTLP's value kinds: double, int, string
		Optional bool   `json:"optional"`
		Note     string `json:"note"`
	} `json:"attributes"`
}

// loadSpanShape reads the recorded shape, strictly.
func loadSpanShape(t *testing.T) spanShape {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "traces", "vllm-llm-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s spanShape
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("vllm-llm-request.json: %v", err)
	}
	if len(s.Source) == 0 || s.Name == "" || len(s.Attributes) == 0 {
		t.Fatalf("vllm-llm-request.json records no source, name or attributes: %+v", s)
	}
	return s
}

// check reports where span leaves the shape: its name, its kind, an attribute the shape
// does not list, one of another type, or a required one missing.
func (s spanShape) check(t *testing.T, span tracetest.SpanStub) {
	t.Helper()
	if span.Name != s.Name {
		t.Errorf("span name %q, want %q", span.Name, s.Name)
	}
	if !strings.EqualFold(span.SpanKind.String(), s.Kind) {
		t.Errorf("span kind %v, want %s", span.SpanKind, s.Kind)
	}
	kinds := map[attribute.Type]string{attribute.FLOAT64: "double", attribute.INT64: "int", attribute.STRING: "string", attribute.BOOL: "bool"}
	seen := map[string]bool{}
	for _, kv := range span.Attributes {
		name := string(kv.Key)
		seen[name] = true
		want, ok := s.Attributes[name]
		switch {
		case !ok:
			t.Errorf("attribute %s is not in vLLM's span", name)
		case kinds[kv.Value.Type()] != want.Type:
			t.Errorf("attribute %s is %v, want %s", name, kv.Value.Type(), want.Type)
		}
	}
	for name, want := range s.Attributes {
		if !want.Optional && !seen[name] {
			t.Errorf("attribute %s is missing", name)
		}
	}
}

// tracedSim is a simulator whose tracer records every span it exports, synchronously.
type tracedSim struct {
	*simEnv
	spans *tracetest.InMemoryExporter
}

// startTracedSim starts a simulator of flavor with a tracer of an SDK provider under its
// default sampler, ParentBased(AlwaysSample), as vLLM's Python provider.
func startTracedSim(t *testing.T, flavor Flavor) tracedSim {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return tracedSim{startSim(t, Config{Flavor: flavor, Tracer: tp.Tracer("enginesim-test")}), exp}
}

// awaitSpans returns the spans exported once every request the scheduler took has
// ended its span: its HTTP exchange is over and the scheduler has finished it.
func (e tracedSim) awaitSpans() tracetest.SpanStubs {
	e.t.Helper()
	e.await("every request's span ended", func() (bool, string) {
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		return len(e.srv.traces) == 0, fmt.Sprintf("%d spans to end", len(e.srv.traces))
	})
	return e.spans.GetSpans()
}

// answerSummary is what an answer reported about itself: its id, token counts and
// finish reason ("stop" or "length").
type answerSummary struct {
	id             string
	prompt, tokens int
	reason         string
}

// summarize reads an answer, an event stream or one JSON object, of any generation route.
func summarize(t *testing.T, body []byte) answerSummary {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		objs = append(objs, m)
	}
	if len(objs) == 0 {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("answer %q: %v", body, err)
		}
		objs = append(objs, m)
	}
	var s answerSummary
	num := func(v any) int { f, _ := v.(float64); return int(f) }
	for _, m := range objs {
		switch {
		case m["type"] == "response.completed": // /v1/responses
			r := m["response"].(map[string]any)
			u := r["usage"].(map[string]any)
			s.id, s.prompt, s.tokens, s.reason = r["id"].(string), num(u["input_tokens"]), num(u["output_tokens"]), "stop"
			if r["status"] == "incomplete" {
				s.reason = "length"
			}
		case m["meta_info"] != nil: // /generate
			mi := m["meta_info"].(map[string]any)
			s.id, s.prompt, s.tokens = mi["id"].(string), num(mi["prompt_tokens"]), num(mi["completion_tokens"])
			if fr, ok := mi["finish_reason"].(map[string]any); ok {
				s.reason = fr["type"].(string)
			}
		case m["id"] != nil: // completions and chat, chunks or whole
			s.id, _ = m["id"].(string)
			if u, ok := m["usage"].(map[string]any); ok {
				s.prompt, s.tokens = num(u["prompt_tokens"]), num(u["completion_tokens"])
			}
			if cs, ok := m["choices"].([]any); ok && len(cs) > 0 {
				if fr, ok := cs[0].(map[string]any)["finish_reason"].(string); ok {
					s.reason = fr
				}
			}
		}
	}
	return s
}

// attrs returns a span's attributes by name.
func attrs(span tracetest.SpanStub) map[string]attribute.Value {
	out := map[string]attribute.Value{}
	for _, kv := range span.Attributes {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

// TestTraces: with a Tracer, a generation request ends with the one span vLLM emits for
// it, in the shape testdata/traces/vllm-llm-request.json records, parented by the
// request's traceparent, with latencies and counts that agree with the answer.
func TestTraces(t *testing.T) {
	shape := loadSpanShape(t)
	const (
		traceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpan = "00f067aa0ba902b7"
	)
	sampled := http.Header{"Traceparent": {"00-" + traceID + "-" + parentSpan + "-01"}, "Tracestate": {"vendor=value"}}
	unsampled := http.Header{"Traceparent": {"00-" + traceID + "-" + parentSpan + "-00"}}
	withFault := func(h http.Header, fault string) http.Header {
		h = h.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set(FaultHeader, fault)
		return h
	}
	chat := func(extra string) string {
		return `{"model":"sim-tiny","messages":[{"role":"user","content":"hello there"}],"max_tokens":8,"ignore_eos":true` + extra + `}`
	}
	streamed := `,"stream":true,"stream_options":{"include_usage":true}`
	defaults := map[string]any{attrTopP: 1.0, attrTemperature: 1.0, attrN: int64(1)}
	cases := []struct {
		name   string
		flavor Flavor
		path   string
		body   string
		header http.Header
		// want is the span expected: "parent" (the child of the sampled traceparent),
		// "root", or "none" (nothing exported).
		want   string
		reason string         // the finish reason the span reports
		params map[string]any // the sampling attributes, nil for one that must be absent
	}{
		{name: "streamed chat, sampled traceparent", flavor: FlavorVLLM, path: "/v1/chat/completions", body: chat(streamed),
			header: sampled, want: "parent", reason: "length", params: defaults},
		{name: "streamed chat that stops, no traceparent, greedy", flavor: FlavorVLLM, path: "/v1/chat/completions",
			body:   `{"model":"sim-tiny","messages":[{"role":"user","content":"What is 2 + 3?"}],"temperature":0,"top_p":0.5` + streamed + `}`,
			header: nil, want: "root", reason: "stop", params: map[string]any{attrTemperature: nil, attrTopP: 0.5, attrN: int64(1)}},
		{name: "chat, unsampled traceparent", flavor: FlavorVLLM, path: "/v1/chat/completions", body: chat(""),
			header: unsampled, want: "none"},
		{name: "completions, not streamed", flavor: FlavorVLLM, path: "/v1/completions",
			body:   `{"model":"sim-tiny","prompt":"hello there","max_tokens":5,"ignore_eos":true,"temperature":0.7}`,
			header: sampled, want: "parent", reason: "length", params: map[string]any{attrTemperature: 0.7, attrMaxTokens: int64(5)}},
		{name: "responses, streamed", flavor: FlavorVLLM, path: "/v1/responses",
			body:   `{"model":"sim-tiny","input":"hello there","max_output_tokens":6,"ignore_eos":true,"stream":true}`,
			header: sampled, want: "parent", reason: "length", params: defaults},
		{name: "sglang generate", flavor: FlavorSGLang, path: "/generate",
			body:   `{"text":"hello there","sampling_params":{"max_new_tokens":7,"ignore_eos":true,"temperature":0.3}}`,
			header: nil, want: "root", reason: "length", params: map[string]any{attrTemperature: 0.3, attrMaxTokens: int64(7)}},
		{name: "streamed chat failed by error_after", flavor: FlavorVLLM, path: "/v1/chat/completions", body: chat(streamed),
			header: withFault(sampled, "error_after=2"), want: "parent", reason: "abort"},
		{name: "streamed chat dropped by drop_after", flavor: FlavorVLLM, path: "/v1/chat/completions", body: chat(streamed),
			header: withFault(sampled, "drop_after=2"), want: "parent", reason: "abort"},
		{name: "chat failed by error_after, not streamed", flavor: FlavorVLLM, path: "/v1/chat/completions", body: chat(""),
			header: withFault(nil, "error_after=2"), want: "root", reason: "abort"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := startTracedSim(t, tc.flavor)
			before := time.Now()
			resp := sim.post(context.Background(), tc.path, tc.body, tc.header)
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			after := time.Now()
			spans := sim.awaitSpans()
			if tc.want == "none" {
				if len(spans) != 0 {
					t.Fatalf("%d spans exported for an unsampled traceparent, want none: %+v", len(spans), spans)
				}
				return
			}
			if len(spans) != 1 {
				t.Fatalf("%d spans exported, want 1: %+v", len(spans), spans)
			}
			span := spans[0]
			shape.check(t, span)
			a := attrs(span)

			parent := span.Parent
			switch tc.want {
			case "parent":
				if parent.TraceID().String() != traceID || parent.SpanID().String() != parentSpan || !parent.IsRemote() {
					t.Errorf("parent %s/%s (remote %v), want the traceparent's %s/%s", parent.TraceID(), parent.SpanID(), parent.IsRemote(), traceID, parentSpan)
				}
				if span.SpanContext.TraceID() != parent.TraceID() {
					t.Errorf("span in trace %s, want its parent's %s", span.SpanContext.TraceID(), parent.TraceID())
				}
				if got := span.SpanContext.TraceState().String(); got != "vendor=value" {
					t.Errorf("trace state %q, want the tracestate header's vendor=value", got)
				}
			case "root":
				if parent.IsValid() {
					t.Errorf("span has parent %s/%s, want a root span", parent.TraceID(), parent.SpanID())
				}
			}

			// The times: from the request's arrival, which the exchange brackets, to its
			// finish, e2e later; the phases add up.
			sec := func(name string) float64 { return a[name].AsFloat64() }
			ttft, e2e, queue := sec(attrTTFT), sec(attrE2E), sec(attrQueue)
			prefill, decode, inference := sec(attrPrefill), sec(attrDecode), sec(attrInference)
			if span.StartTime.Before(before) || span.StartTime.After(after) {
				t.Errorf("span starts at %v, outside the exchange [%v, %v]", span.StartTime, before, after)
			}
			if d := span.EndTime.Sub(span.StartTime).Seconds(); math.Abs(d-e2e) > 1e-6 {
				t.Errorf("span lasts %.6fs, e2e is %.6fs", d, e2e)
			}
			const eps = 1e-9
			if ttft < 0 || queue < 0 || prefill < 0 || decode < 0 || ttft > e2e+eps || queue+prefill > ttft+eps || math.Abs(prefill+decode-inference) > eps {
				t.Errorf("inconsistent latencies: ttft %g, e2e %g, queue %g, prefill %g, decode %g, inference %g", ttft, e2e, queue, prefill, decode, inference)
			}

			reasons := a[attrFinishReasons].AsString()
			if want := `["` + tc.reason + `"]`; reasons != want {
				t.Errorf("%s = %s, want %s", attrFinishReasons, reasons, want)
			}
			completion, prompt := int(a[attrCompletionTokens].AsInt64()), int(a[attrPromptTokens].AsInt64())
			if tc.reason == "abort" {
				if reasons != shape.Abort.FinishReasons || !strings.EqualFold(span.Status.Code.String(), shape.Abort.Status) || span.Status.Code != codes.Error {
					t.Errorf("aborted span: finish reasons %s, status %v, want %s and %s", reasons, span.Status, shape.Abort.FinishReasons, shape.Abort.Status)
				}
				if len(span.Events) != 1 || span.Events[0].Name != "exception" {
					t.Errorf("aborted span events %+v, want the recorded error", span.Events)
				}
				if completion < 2 {
					t.Errorf("%s = %d, want at least the 2 tokens before the fault", attrCompletionTokens, completion)
				}
				return
			}
			if readErr != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, reading: %v; body %s", resp.StatusCode, readErr, body)
			}
			if span.Status.Code != codes.Unset || len(span.Events) != 0 {
				t.Errorf("span of a complete answer has status %v and events %+v, want neither", span.Status, span.Events)
			}
			got := summarize(t, body)
			if a[attrRequestID].AsString() != got.id {
				t.Errorf("%s = %q, the answer's id is %q", attrRequestID, a[attrRequestID].AsString(), got.id)
			}
			if completion != got.tokens || prompt != got.prompt || tc.reason != got.reason {
				t.Errorf("span: %d prompt, %d completion tokens, %s; the answer reported %d, %d, %q",
					prompt, completion, reasons, got.prompt, got.tokens, got.reason)
			}
			for name, want := range tc.params {
				v, ok := a[name]
				switch {
				case want == nil && ok:
					t.Errorf("%s = %v, want it absent", name, v.Emit())
				case want != nil && (!ok || v.AsInterface() != want):
					t.Errorf("%s = %v (set %v), want %v", name, v.AsInterface(), ok, want)
				}
			}
		})
	}
}

// TestTracesOnePerRequest: concurrent requests each end with their own span, the child
// of their own traceparent.
func TestTracesOnePerRequest(t *testing.T) {
	sim := startTracedSim(t, FlavorVLLM)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			h := http.Header{"Traceparent": {fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)}}
			body := fmt.Sprintf(`{"model":"sim-tiny","prompt":"request %d","max_tokens":%d,"ignore_eos":true,"stream":true}`, i, 3+i)
			resp := sim.post(context.Background(), "/v1/completions", body, h)
			_, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	spans := sim.awaitSpans()
	if len(spans) != n {
		t.Fatalf("%d spans for %d requests", len(spans), n)
	}
	seen := map[trace.SpanID]bool{}
	for _, span := range spans {
		p := span.Parent.SpanID()
		var i int
		if _, err := fmt.Sscanf(p.String(), "%016x", &i); err != nil || seen[p] {
			t.Fatalf("span with parent %s: not one of the requests', or twice", p)
		}
		seen[p] = true
		if got := attrs(span)[attrCompletionTokens].AsInt64(); got != int64(3+i-1) {
			t.Errorf("the child of request %d's traceparent reports %d completion tokens, want %d", i-1, got, 3+i-1)
		}
	}
}
