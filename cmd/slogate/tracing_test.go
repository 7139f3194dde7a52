package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every export request as the
// protocol defines it (go.opentelemetry.io/proto/otlp) and keeps the spans, each with
// its resource's service.name.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	bad   []string // requests that were not a valid export
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readOTLP(r)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		o.bad = append(o.bad, fmt.Sprintf("%s %s (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err))
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, receivedSpan{service, s})
			}
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func readOTLP(r *http.Request) ([]byte, error) {
	var src io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		src = zr
	}
	return io.ReadAll(src)
}

// trace returns the spans received of trace id (hex).
func (o *otlpReceiver) trace(id string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if hex.EncodeToString(s.span.TraceId) == id {
			out = append(out, s.span)
		}
	}
	return out
}

// traceparents records the W3C traceparent of every request the engine received.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (tp *traceparents) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Traceparent"); v != "" {
			tp.mu.Lock()
			tp.seen = append(tp.seen, v)
			tp.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// all returns every traceparent the engine received, in order.
func (tp *traceparents) all() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.seen)
}

// of returns the traceparents the engine received in trace id.
func (tp *traceparents) of(id string) []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	for _, v := range tp.seen {
		if strings.Contains(v, "-"+id+"-") {
			out = append(out, v)
		}
	}
	return out
}

// tracingTiers: short prompts with a TTFT SLO a delayed first byte misses, and long
// ones whose rate admits one request and turns the next away.
const tracingTiers = `tiers:
  - name: short
    max_input_tokens: 200
    max_in_flight: 64
    max_queue: 8
    slo: {ttft: 400ms, tpot: 1s}
  - name: long
    rate: 0.001
    burst: 1
    max_in_flight: 4
    max_queue: 4
    slo: {ttft: 10s, tpot: 1s}
`

// TestServeTraces runs `slogate serve` in front of the simulator with its OTLP exporter
// pointed at a receiver in the test, sends requests that succeed, miss their SLO, are
// rejected and fail mid-stream, each under a client's traceparent, and checks what was
// exported: which traces (the head rule follows the client's sampled flag, the tail rule
// keeps every failure and SLO miss, the sample ratio is 0), every span's parentage and
// attributes, that the engine received slogate's traceparent, and that the latency
// histograms carry the exported traces' ids as OpenMetrics exemplars.
func TestServeTraces(t *testing.T) {
	tr := startTraced(t, "--admission", "enforce", "--trace-sample-ratio", "0")
	recv, seen, engineSpans, data, admin := tr.recv, &tr.seen, tr.engineSpans, tr.data, tr.admin

	long := strings.Repeat("a long prompt for the long tier ", 60)
	cases := []struct {
		name    string
		sampled bool   // the client's traceparent says sampled
		fault   string // the simulator's fault header
		prompt  string
		kept    bool   // the trace is exported
		outcome string // slogate.outcome
		tier    string
		reason  string // slogate.admission.reason
		met     string // slogate.slo.met: "true", "false", or "" for none
		engine  bool   // the request reached the engine
	}{
		{name: "ok, client sampled", sampled: true, prompt: "hello", kept: true, outcome: "ok", tier: "short", met: "true", engine: true},
		{name: "ok, not sampled", prompt: "hello", outcome: "ok", tier: "short", engine: true},
		{name: "missed the TTFT SLO", fault: "delay=800ms", prompt: "hello", kept: true, outcome: "ok", tier: "short", met: "false", engine: true},
		{name: "long, admitted", prompt: long, outcome: "ok", tier: "long", engine: true},
		{name: "long, rejected by the tier's rate", prompt: long, kept: true, outcome: "rejected", tier: "long", reason: "tier-rate"},
		{name: "engine error mid-stream", fault: "error_after=3", prompt: "hello", kept: true, outcome: "engine_error", tier: "short", engine: true},
		{name: "connection lost mid-stream", fault: "drop_after=3", prompt: "hello", kept: true, outcome: "aborted_midstream", tier: "short", engine: true},
	}
	ids := make([]string, len(cases))
	parents := make([]string, len(cases))
	for i, tc := range cases {
		ids[i], parents[i] = randomHex(t, 16), randomHex(t, 8)
		flags := "00"
		if tc.sampled {
			flags = "01"
		}
		opts := []option.RequestOption{option.WithHeader("traceparent", "00-"+ids[i]+"-"+parents[i]+"-"+flags)}
		if tc.fault != "" {
			opts = append(opts, option.WithHeader(enginesim.FaultHeader, tc.fault))
		}
		chat(t, "http://"+data, tc.prompt, opts...)
	}
	exemplars := scrapeExemplars(t, "http://"+admin+"/metrics")
	// A request without a traceparent, not sampled: the engine is told "not sampled" of a
	// new trace, so that it does not start one of its own.
	before := len(seen.all())
	chat(t, "http://"+data, "hello")
	if tps := seen.all()[before:]; len(tps) != 1 || !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-00$`).MatchString(tps[0]) {
		t.Errorf("without a client traceparent the engine received %v; want one unsampled traceparent", tps)
	}

	tr.stop(t)

	kept := map[string]bool{}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spans := recv.trace(ids[i])
			if !tc.kept {
				if len(spans) > 0 {
					t.Fatalf("%d spans exported of a trace neither rule keeps: %v", len(spans), names(spans))
				}
				if tc.engine && len(seen.of(ids[i])) != 1 {
					t.Errorf("the engine received traceparents %v in the trace, want one", seen.of(ids[i]))
				}
				return
			}
			kept[ids[i]] = true
			root, queue, call := spanNamed(spans, "chat sim-tiny"), spanNamed(spans, "slogate.queue"), spanNamed(spans, "POST /v1/chat/completions")
			if root == nil || queue == nil || (call == nil) == tc.engine || len(spans) != 2+btoi(tc.engine) {
				t.Fatalf("exported spans %v; want the request's, its queue's and (if it reached the engine) its engine exchange's", names(spans))
			}
			if hex.EncodeToString(root.ParentSpanId) != parents[i] || root.Kind != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("the request's span has parent %x and kind %v; want the client's span %s, server", root.ParentSpanId, root.Kind, parents[i])
			}
			for _, child := range []*tracepb.Span{queue, call} {
				if child != nil && !bytes.Equal(child.ParentSpanId, root.SpanId) {
					t.Errorf("span %q has parent %x, want the request's span %x", child.Name, child.ParentSpanId, root.SpanId)
				}
			}
			want := map[string]string{
				"gen_ai.operation.name": "chat", "gen_ai.request.model": "sim-tiny", "slogate.outcome": tc.outcome,
				"slogate.tier": tc.tier, "slogate.admission.reason": tc.reason, "slogate.slo.met": tc.met,
			}
			if tc.outcome != "ok" {
				want["error.type"] = tc.outcome
			}
			decision := "admitted"
			if tc.outcome == "rejected" {
				decision = "rejected"
			}
			want["slogate.admission.decision"] = decision
			got := attrs(root.Attributes)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, got[k], v)
				}
			}
			if attrs(queue.Attributes)["slogate.admission.decision"] != decision {
				t.Errorf("the queue span's decision is %q, want %q", attrs(queue.Attributes)["slogate.admission.decision"], decision)
			}
			events := eventNames(root)
			wantEvents := []string{"slogate.admission", "slogate.end"}
			if tc.engine {
				wantEvents = []string{"slogate.admission", "slogate.dispatch", "slogate.first_token", "slogate.end"}
				need := []string{"gen_ai.usage.output_tokens", "gen_ai.server.time_to_first_token", "slogate.engine.kv_usage", "slogate.engine.waiting", "gen_ai.provider.name"}
				if got["gen_ai.response.model"] != "sim-tiny" {
					t.Errorf("gen_ai.response.model = %q, want the model the engine's chunks name, sim-tiny", got["gen_ai.response.model"])
				}
				if tc.outcome == "ok" { // a stream cut short has no usage report and no finish reason
					need = append(need, "gen_ai.usage.input_tokens", "gen_ai.response.finish_reasons")
				}
				for _, k := range need {
					if got[k] == "" {
						t.Errorf("attribute %s is missing", k)
					}
				}
				// Sampled: slogate's engine span is the engine's parent. Not sampled: the
				// engine gets the client's traceparent as it came, which says so.
				wantTP := "00-" + ids[i] + "-" + parents[i] + "-00"
				if tc.sampled {
					wantTP = "00-" + ids[i] + "-" + hex.EncodeToString(call.SpanId) + "-01"
				}
				if tps := seen.of(ids[i]); len(tps) != 1 || tps[0] != wantTP {
					t.Errorf("the engine received traceparents %v, want [%s]", tps, wantTP)
				}
				// The engine's own span hangs under slogate's engine exchange when the head
				// rule sampled the request, and is not written when it did not.
				var eng []sdktrace.ReadOnlySpan
				if tc.sampled {
					simtest.WaitFor(t, "the engine's span", 10*time.Second, func() bool { return len(engineSpansOf(engineSpans, ids[i])) > 0 })
				}
				eng = engineSpansOf(engineSpans, ids[i])
				switch {
				case !tc.sampled && len(eng) > 0:
					t.Errorf("the engine wrote %d spans of a trace the head rule did not sample", len(eng))
				case tc.sampled && (len(eng) != 1 || eng[0].Name() != "llm_request" || eng[0].Parent().SpanID().String() != hex.EncodeToString(call.SpanId)):
					t.Errorf("the engine's spans %v; want one llm_request, the child of slogate's engine span %x", eng, call.SpanId)
				}
			} else if len(seen.of(ids[i])) != 0 {
				t.Errorf("a rejected request reached the engine: %v", seen.of(ids[i]))
			}
			if strings.Join(events, ",") != strings.Join(wantEvents, ",") {
				t.Errorf("events %v, want %v", events, wantEvents)
			}
			for k := range got {
				if strings.Contains(k, "prompt") && k != "slogate.prompt.estimated_tokens" || strings.Contains(k, "completion") || strings.Contains(k, "messages") {
					t.Errorf("attribute %s may carry the prompt or the completion", k)
				}
			}
		})
	}

	t.Run("exemplars", func(t *testing.T) {
		if len(exemplars) == 0 {
			t.Fatal("no exemplars in the OpenMetrics exposition")
		}
		for metric, traces := range exemplars {
			for id := range traces {
				if !kept[id] {
					t.Errorf("%s has an exemplar of trace %s, which was not exported", metric, id)
				}
			}
		}
		// The sampled request and the slow one are the requests that ended ok with an
		// exported trace; they fall in different TTFT buckets.
		for _, i := range []int{0, 2} {
			for _, m := range []string{"slogate_time_to_first_token_seconds", "slogate_e2e_request_duration_seconds"} {
				if !exemplars[m][ids[i]] {
					t.Errorf("%s has no exemplar of the trace of %q (%s); exemplars: %v", m, cases[i].name, ids[i], exemplars[m])
				}
			}
		}
	})
}

// engineSpansOf returns the spans the engine wrote in trace id (hex).
func engineSpansOf(e *tracetest.InMemoryExporter, id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.GetSpans().Snapshots() {
		if s.SpanContext().TraceID().String() == id {
			out = append(out, s)
		}
	}
	return out
}

// traced is `slogate serve` in front of the simulator, exporting its traces to a
// receiver in the test; the simulator traces as vLLM does (enginesim/trace.go), with the
// SDK's default sampler, which follows the parent's flag.
type traced struct {
	recv        *otlpReceiver
	seen        traceparents
	engineSpans *tracetest.InMemoryExporter
	data, admin string // the listeners' host:port
	cmd         *exec.Cmd
	stderr      bytes.Buffer
}

// startTraced starts slogate serve with the tiers of tracingTiers and args, and waits
// until it is ready.
func startTraced(t *testing.T, args ...string) *traced {
	t.Helper()
	tr := &traced{recv: &otlpReceiver{}, engineSpans: tracetest.NewInMemoryExporter()}
	otlp := httptest.NewServer(tr.recv)
	t.Cleanup(otlp.Close)
	engineTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tr.engineSpans))
	t.Cleanup(func() { engineTP.Shutdown(context.Background()) })
	p, _ := enginesim.LookupProfile("tiny")
	up := simtest.WrappedEngine(t, enginesim.Config{Profile: p, Tracer: engineTP.Tracer("enginesim")}, tr.seen.wrap)
	tiers := filepath.Join(t.TempDir(), "tiers.yaml")
	if err := os.WriteFile(tiers, []byte(tracingTiers), 0o600); err != nil {
		t.Fatal(err)
	}
	tr.data, tr.admin = simtest.FreeAddr(t), simtest.FreeAddr(t)
	tr.cmd = exec.Command(os.Args[0], append([]string{"serve", "--upstream", up.URL, "--listen", tr.data, "--admin-listen", tr.admin,
		"--tiers-file", tiers, "--log-level", "error"}, args...)...)
	tr.cmd.Env = append(os.Environ(), runMainEnv+"=1",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_BSP_SCHEDULE_DELAY=50")
	tr.cmd.Stderr = &tr.stderr
	if err := tr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.cmd.Process.Kill() })
	simtest.WaitFor(t, "slogate serve to be ready", 10*time.Second, func() bool { return simtest.Status("http://"+tr.admin+"/readyz") == http.StatusOK })
	return tr
}

// stop sends slogate SIGTERM and waits for it to exit: the drain exports what is queued.
func (tr *traced) stop(t *testing.T) {
	t.Helper()
	if err := tr.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("slogate serve exited with %v; stderr:\n%s", err, tr.stderr.String())
	}
	if len(tr.recv.bad) > 0 {
		t.Errorf("the receiver got exports it could not decode: %v", tr.recv.bad)
	}
}

// TestServeTraceContent: with --trace-content the request's span holds the prompt and
// the text the client received, in the GenAI conventions' message form. With admission
// off there is no decision to record: no queue span, no tier.
func TestServeTraceContent(t *testing.T) {
	tr := startTraced(t, "--trace-content", "--trace-sample-ratio", "1", "--admission", "off")
	id := randomHex(t, 16)
	got := chat(t, "http://"+tr.data, "what is the capital of France?", option.WithHeader("traceparent", "00-"+id+"-"+randomHex(t, 8)+"-01"))
	tr.stop(t)
	root := spanNamed(tr.recv.trace(id), "chat sim-tiny")
	if root == nil || got == "" {
		t.Fatalf("no request span (spans %v), or no text received (%q)", names(tr.recv.trace(id)), got)
	}
	if q := spanNamed(tr.recv.trace(id), "slogate.queue"); q != nil {
		t.Errorf("a queue span with admission off: %v", attrs(q.Attributes))
	}
	a := attrs(root.Attributes)
	if _, ok := a["slogate.tier"]; ok {
		t.Errorf("slogate.tier = %q with admission off", a["slogate.tier"])
	}
	var in, out []struct {
		Role  string `json:"role"`
		Parts []struct {
			Type, Content string
		} `json:"parts"`
		FinishReason string `json:"finish_reason"`
	}
	if err := json.Unmarshal([]byte(a["gen_ai.input.messages"]), &in); err != nil || len(in) != 1 || in[0].Role != "user" || len(in[0].Parts) != 1 || in[0].Parts[0].Content != "what is the capital of France?" {
		t.Errorf("gen_ai.input.messages = %s (%v); want the user's message", a["gen_ai.input.messages"], err)
	}
	if err := json.Unmarshal([]byte(a["gen_ai.output.messages"]), &out); err != nil || len(out) != 1 || out[0].Role != "assistant" || len(out[0].Parts) != 1 || out[0].Parts[0].Content != got || out[0].FinishReason == "" {
		t.Errorf("gen_ai.output.messages = %s (%v); want the assistant's answer as the client got it, %q, with its finish reason", a["gen_ai.output.messages"], err, got)
	}
}

// chat sends one streamed chat completion through the OpenAI client and reads it to its
// end, whatever the end (an error is what some cases expect), and returns the text it
// received.
func chat(t *testing.T, base, prompt string, opts ...option.RequestOption) string {
	t.Helper()
	c := openai.NewClient(append([]option.RequestOption{option.WithBaseURL(base + "/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "sim-tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens: openai.Int(16),
	})
	var text strings.Builder
	for s.Next() {
		if c := s.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	s.Close()
	return text.String()
}

// exemplarLine matches a histogram bucket with an exemplar in the OpenMetrics text
// format: name_bucket{labels} value # {trace_id="..."} value [timestamp].
var exemplarLine = regexp.MustCompile(`^(\w+)_bucket\{[^}]*\} \S+ # \{trace_id="([0-9a-f]{32})"\} \S+( \S+)?$`)

// scrapeExemplars reads url in the OpenMetrics format and returns, by histogram, the
// trace ids its buckets' exemplars carry.
func scrapeExemplars(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	status, body := simtest.Send(t, req)
	if status != http.StatusOK || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("GET /metrics as OpenMetrics: %d, ends %q", status, body[max(len(body)-20, 0):])
	}
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if !strings.Contains(line, " # {") {
			continue
		}
		m := exemplarLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("an exemplar line not in the OpenMetrics format: %s", line)
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]bool{}
		}
		out[m[1]][m[2]] = true
	}
	return out
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func spanNamed(spans []*tracepb.Span, name string) *tracepb.Span {
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func eventNames(s *tracepb.Span) []string {
	var out []string
	for _, e := range s.Events {
		out = append(out, e.Name)
	}
	return out
}

// attrs renders a span's attributes as strings: a list as its elements joined by ",".
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key] = value(kv.Value)
	}
	return out
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, value(e))
		}
		return strings.Join(parts, ",")
	}
	return ""
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
