package proxy

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/tracing"
	"github.com/slogate/slogate/wire"
)

// Judge says whether a request an SLO judges met its tier's SLO as its client saw it
// (exporter.Metrics.Judge), for the span's slogate.slo.met and so the tail rule.
type Judge interface {
	Judge(res measure.Result) (judged, met bool)
}

// EngineState is the engine's last scraped state, read when a request is dispatched.
type EngineState interface {
	Latest() engine.Snapshot
}

// slogate's own span attributes. Durations are in seconds, as the GenAI conventions
// have them.
const (
	attrTier          = attribute.Key("slogate.tier")
	attrTenant        = attribute.Key("slogate.tenant")
	attrClass         = attribute.Key("slogate.class")
	attrDecision      = attribute.Key("slogate.admission.decision")
	attrReason        = attribute.Key("slogate.admission.reason")
	attrShadow        = attribute.Key("slogate.admission.shadow")
	attrQueueWait     = attribute.Key("slogate.queue_wait")
	attrOutcome       = attribute.Key("slogate.outcome")
	attrEstimated     = attribute.Key("slogate.prompt.estimated_tokens")
	attrEngineWaiting = attribute.Key("slogate.engine.waiting")
	attrEngineRunning = attribute.Key("slogate.engine.running")
	attrEngineKV      = attribute.Key("slogate.engine.kv_usage")
	attrTPOT          = attribute.Key("slogate.time_per_output_token")
	attrE2E           = attribute.Key("slogate.e2e")
	attrTokensFrom    = attribute.Key("slogate.output_tokens.from")
	// The GenAI conventions name TTFT as a metric (gen_ai.server.time_to_first_token);
	// slogate puts the request's own on its span under the same name.
	attrTTFT = attribute.Key("gen_ai.server.time_to_first_token")
)

// The span events.
const (
	eventAdmission  = "slogate.admission"
	eventDispatch   = "slogate.dispatch"
	eventFirstToken = "slogate.first_token"
	eventEnd        = "slogate.end"
)

// requestSpan is an inference request's trace: its span (kind server, named by the
// GenAI conventions "{operation} {model}"), the span of its time in admission (queue)
// and that of its exchange with the engine (kind client). nil when tracing is off; every
// method does nothing then. It belongs to the request's goroutine.
type requestSpan struct {
	tracer trace.Tracer
	engine EngineState
	ctx    context.Context // carries root
	root   trace.Span
	queue  trace.Span // while the request is in admission
	call   trace.Span // from dispatch until the request ends
	attrs  []attribute.KeyValue
	model  string // the model the answer names
	read   bool   // the answer's model was looked for

	// With Config.TraceContent: the request's text, and the answer's as it streams.
	content bool
	input   []wire.Content
	output  strings.Builder
	cut     bool // the output passed maxContent
}

// maxContent bounds the text of the prompt and of the answer a span records, each.
const maxContent = 64 << 10

// startSpan opens the request's span, continuing the trace of the client's traceparent
// when it sent one.
func (p *Proxy) startSpan(ex *exchange) {
	if p.cfg.Tracer == nil || ex.class == admission.Probe { // probes are the prober's to measure
		return
	}
	ctx := propagation.TraceContext{}.Extract(ex.r.Context(), propagation.HeaderCarrier(ex.r.Header))
	op := operation(ex.req.Route)
	ctx, root := p.cfg.Tracer.Start(ctx, op.Value.AsString(),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(p.cfg.Clock.Now()),
		trace.WithAttributes(op, semconv.HTTPRequestMethodPost, semconv.URLPath(ex.r.URL.Path)))
	ex.span = &requestSpan{tracer: p.cfg.Tracer, engine: p.cfg.Engine, ctx: ctx, root: root, content: p.cfg.TraceContent}
}

// operation is the GenAI operation of a route.
func operation(r wire.Route) attribute.KeyValue {
	switch r {
	case wire.RouteChatCompletions, wire.RouteResponses:
		return semconv.GenAIOperationNameChat
	case wire.RouteCompletions, wire.RouteGenerate:
		return semconv.GenAIOperationNameTextCompletion
	case wire.RouteEmbeddings:
		return semconv.GenAIOperationNameEmbeddings
	}
	return semconv.GenAIOperationNameKey.String(r.String())
}

// inspected names the span after the request's model and records what the request
// asks, and its text when content is recorded.
func (s *requestSpan) inspected(req wire.Request, body []byte) {
	if s == nil {
		return
	}
	if s.content {
		s.input = wire.InputContent(req.Route, body)
	}
	if req.Model != "" {
		s.root.SetName(operation(req.Route).Value.AsString() + " " + req.Model)
	}
	s.root.SetAttributes(semconv.GenAIRequestModel(req.Model), attribute.Bool("slogate.stream", req.Stream))
	if req.HasMaxTokens {
		s.root.SetAttributes(semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if req.N > 1 {
		s.root.SetAttributes(semconv.GenAIRequestChoiceCount(req.N))
	}
}

// enterQueue opens the span of the request's time in admission.
func (s *requestSpan) enterQueue(now time.Time) {
	if s == nil {
		return
	}
	_, s.queue = s.tracer.Start(s.ctx, "slogate.queue", trace.WithTimestamp(now))
}

// leaveQueue closes the queue's span with admission's decision, which the request's span
// carries too.
func (s *requestSpan) leaveQueue(ex *exchange, now time.Time) {
	if s == nil || s.queue == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	switch tk := ex.ticket; {
	case tk != nil:
		d := tk.Decision()
		attrs = append(attrs, attrTier.String(tk.Tier()), attrDecision.String(d.Verdict.String()),
			attrQueueWait.Float64(tk.Wait().Seconds()), attrEstimated.Int(tk.EstimatedTokens()),
			attrClass.String(tk.Class().String()))
		if d.Reason != admission.NoReason {
			attrs = append(attrs, attrReason.String(d.Reason.String()))
		}
		if d.Shadow {
			attrs = append(attrs, attrShadow.Bool(true))
		}
	case ex.reject != nil:
		attrs = append(attrs, attrTier.String(ex.reject.Tier), attrDecision.String(admission.Rejected.String()),
			attrReason.String(ex.reject.Reason.String()))
	}
	if ex.tenant != "" {
		attrs = append(attrs, attrTenant.String(ex.tenant))
	}
	s.queue.SetAttributes(attrs...)
	s.queue.End(trace.WithTimestamp(now))
	s.root.AddEvent(eventAdmission, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	s.attrs = append(s.attrs, attrs...)
}

// dispatch opens the span of the exchange with the engine and writes its traceparent
// into the engine's request out, in place of the client's, so the engine's spans are
// children of slogate's. The span records the engine's state as last scraped.
func (s *requestSpan) dispatch(out *http.Request, now time.Time) {
	if s == nil {
		return
	}
	var ctx context.Context
	ctx, s.call = s.tracer.Start(s.ctx, http.MethodPost+" "+out.URL.Path,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(now),
		trace.WithAttributes(semconv.HTTPRequestMethodPost, semconv.ServerAddress(out.URL.Hostname()), semconv.URLFull(out.URL.String())))
	out.Header.Del("Traceparent")
	out.Header.Del("Tracestate")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(out.Header))
	attrs := make([]attribute.KeyValue, 0, 4)
	if s.engine != nil {
		snap := s.engine.Latest()
		if snap.Kind != engine.KindAuto {
			attrs = append(attrs, semconv.GenAIProviderNameKey.String(snap.Kind.String()))
		}
		attrs = appendFinite(attrs, attrEngineWaiting, snap.Waiting)
		attrs = appendFinite(attrs, attrEngineRunning, snap.Running)
		attrs = appendFinite(attrs, attrEngineKV, snap.KVUsage)
	}
	s.root.AddEvent(eventDispatch, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	s.attrs = append(s.attrs, attrs...)
}

func appendFinite(attrs []attribute.KeyValue, k attribute.Key, v float64) []attribute.KeyValue {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return attrs
	}
	return append(attrs, k.Float64(v))
}

// answered reads the model the engine's answer names from its first event (or its
// body), once, and the text of every event when content is recorded.
func (s *requestSpan) answered(route wire.Route, data []byte) {
	if s == nil {
		return
	}
	if !s.read {
		s.read, s.model = true, wire.ResponseModel(data)
	}
	if !s.content || s.cut {
		return
	}
	text, cumulative := wire.OutputText(route, data)
	if cumulative {
		s.output.Reset()
	}
	if room := maxContent - s.output.Len(); len(text) > room {
		text, s.cut = cutUTF8(text, room), true
	}
	s.output.WriteString(text)
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on a character.
func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// contentAttrs returns the prompt's and the answer's text as the GenAI conventions'
// gen_ai.input.messages and gen_ai.output.messages (JSON), each bounded by maxContent
// (slogate.content.truncated says where the bound cut).
func (s *requestSpan) contentAttrs(finish string) []attribute.KeyValue {
	in, cutIn := boundContent(s.input, maxContent)
	out := []wire.Content{{Role: "assistant", Parts: []wire.Part{{Type: "text", Content: s.output.String()}}, FinishReason: finish}}
	inJSON, _ := json.Marshal(in)
	outJSON, _ := json.Marshal(out)
	attrs := []attribute.KeyValue{semconv.GenAIInputMessagesKey.String(string(inJSON)), semconv.GenAIOutputMessagesKey.String(string(outJSON))}
	if cutIn || s.cut {
		attrs = append(attrs, attribute.Bool("slogate.content.truncated", true))
	}
	return attrs
}

// boundContent returns msgs with at most n bytes of text in all, the part that passes
// the bound cut and the rest dropped, and whether it cut.
func boundContent(msgs []wire.Content, n int) ([]wire.Content, bool) {
	out := make([]wire.Content, 0, len(msgs))
	for _, m := range msgs {
		parts := make([]wire.Part, 0, len(m.Parts))
		for _, p := range m.Parts {
			if len(p.Content) > n {
				p.Content = cutUTF8(p.Content, n)
				out = append(out, wire.Content{Role: m.Role, Parts: append(parts, p)})
				return out, true
			}
			n -= len(p.Content)
			parts = append(parts, p)
		}
		m.Parts = parts
		out = append(out, m)
	}
	return out, false
}

// end closes the request's spans with its measurement and says whether its trace is
// exported: sampled by the head rule, or kept by the tail rule (tracing.Keep).
func (s *requestSpan) end(res *measure.Result, j Judge, now time.Time) (trace.SpanContext, bool) {
	if s == nil {
		return trace.SpanContext{}, false
	}
	failed := res.Outcome != measure.OK
	if s.call != nil {
		s.call.SetAttributes(semconv.HTTPResponseStatusCode(res.Status))
		if failed {
			s.call.SetStatus(codes.Error, res.Outcome.String())
		}
		s.call.End(trace.WithTimestamp(res.Start.Add(res.E2E)))
	}
	attrs := append(s.attrs, attrOutcome.String(res.Outcome.String()), semconv.HTTPResponseStatusCode(res.Status))
	if s.model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(s.model))
	}
	if res.InputTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(res.InputTokens))
	}
	if res.CachedTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(res.CachedTokens))
	}
	if res.Tokens != measure.TokensNone {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(res.OutputTokens), attrTokensFrom.String(res.Tokens.String()))
	}
	if res.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(res.FinishReason))
	}
	if res.TTFT > 0 {
		attrs = append(attrs, attrTTFT.Float64(res.TTFT.Seconds()))
		s.root.AddEvent(eventFirstToken, trace.WithTimestamp(res.Start.Add(res.TTFT)))
	}
	if res.TPOT > 0 {
		attrs = append(attrs, attrTPOT.Float64(res.TPOT.Seconds()))
	}
	if !res.Start.IsZero() {
		attrs = append(attrs, attrE2E.Float64(res.E2E.Seconds()))
	}
	if s.content {
		attrs = append(attrs, s.contentAttrs(res.FinishReason)...)
	}
	if j != nil {
		if judged, met := j.Judge(*res); judged {
			attrs = append(attrs, tracing.SLOMet.Bool(met))
		}
	}
	if failed {
		attrs = append(attrs, tracing.ErrorType.String(res.Outcome.String()))
		s.root.SetStatus(codes.Error, res.Outcome.String())
	}
	s.root.SetAttributes(attrs...)
	s.root.AddEvent(eventEnd, trace.WithTimestamp(now), trace.WithAttributes(attrOutcome.String(res.Outcome.String())))
	s.root.End(trace.WithTimestamp(now))
	sc := s.root.SpanContext()
	return sc, sc.IsSampled() || tracing.Keep(attrs)
}
