package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
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
	attrSLOMet        = attribute.Key("slogate.slo.met") // whether an SLO-judged request met its tier's SLO
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
//
// Of a request the head rule samples, the request's span starts when the request
// arrives and the engine's when it is dispatched (the engine's traceparent names it);
// the rest is written when the request ends. Of any other request only times and the
// engine's state are kept, and its spans are written, with those times, only if the tail
// rule keeps it when it ends: a request neither rule keeps costs no span.
type requestSpan struct {
	tracer trace.Tracer
	engine EngineState
	parent context.Context // the client's trace context (Extract), if it sent one
	head   bool            // the head rule sampled the request
	root   trace.Span      // the request's span, once started
	ctx    context.Context // carries root
	call   trace.Span      // the engine exchange's span of a sampled request, from dispatch

	name                 string
	op                   attribute.KeyValue
	arrived              time.Time
	queued, admitted     time.Time // admission's call and decision; zero without admission
	dispatched           time.Time
	kind                 engine.Kind
	waiting, running, kv float64  // the engine's state at dispatch
	target               *url.URL // the engine's request's

	first []byte // the answer's first event (or its body), where its model is named

	// With Config.TraceContent: the request's body (the exchange's, kept until the
	// request ends anyway), and the answer's text as it streams.
	content bool
	body    []byte
	output  strings.Builder
	cut     bool // the output passed maxContent
	req     wire.Request
}

// maxContent bounds the text of the prompt and of the answer a span records, each.
const maxContent = 64 << 10

// startSpan begins the request's trace, continuing the client's traceparent when it
// sent one, and starts its span at once if the head rule samples it.
func (p *Proxy) startSpan(ex *exchange) {
	t := p.cfg.Tracing
	if t == nil || ex.class == admission.Probe { // probes are the prober's to measure
		return
	}
	parent := ex.r.Context()
	if _, ok := ex.r.Header["Traceparent"]; ok {
		parent = tracing.Propagator.Extract(parent, propagation.HeaderCarrier(ex.r.Header))
	}
	op := operation(ex.req.Route)
	s := &requestSpan{
		tracer: t.Tracer(), engine: p.cfg.Engine, parent: parent, head: t.Head(trace.SpanContextFromContext(parent)),
		name: op.Value.AsString(), op: op, arrived: p.cfg.Clock.Now(), content: p.cfg.TraceContent,
	}
	if s.head {
		s.startRoot()
	}
	ex.span = s
}

// startRoot starts the request's span, at its arrival, to be exported.
func (s *requestSpan) startRoot() {
	s.ctx, s.root = s.tracer.Start(tracing.Export(s.parent), s.name,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(s.arrived))
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

// inspected names the span after the request's model, keeps what the request asks,
// and its text when content is recorded.
func (s *requestSpan) inspected(req wire.Request, body []byte) {
	if s == nil {
		return
	}
	s.req = req
	if req.Model != "" {
		s.name = s.op.Value.AsString() + " " + req.Model
		if s.root != nil {
			s.root.SetName(s.name)
		}
	}
	if s.content {
		s.body = body
	}
}

// enterQueue and leaveQueue record the request's time in admission.
func (s *requestSpan) enterQueue(now time.Time) { s.queued = now }
func (s *requestSpan) leaveQueue(now time.Time) { s.admitted = now }

// dispatch records the engine's state as last scraped and writes the engine's
// traceparent into out, in place of the client's: that of the engine exchange's span,
// started now, for a request the head rule sampled, so that the engine's spans are
// children of slogate's; for another, the client's own (unsampled) traceparent, or one
// of a new trace that says "not sampled" when it sent none, so that an engine tracing
// by its parent's flag writes nothing of it.
func (s *requestSpan) dispatch(out *http.Request, now time.Time) {
	if s == nil {
		return
	}
	s.dispatched, s.target = now, out.URL
	s.kind, s.waiting, s.running, s.kv = engine.KindAuto, math.NaN(), math.NaN(), math.NaN()
	if s.engine != nil {
		snap := s.engine.Latest()
		s.kind, s.waiting, s.running, s.kv = snap.Kind, snap.Waiting, snap.Running, snap.KVUsage
	}
	if !s.head {
		if !trace.SpanContextFromContext(s.parent).IsValid() {
			out.Header.Set("Traceparent", tracing.UnsampledParent())
			out.Header.Del("Tracestate")
		}
		return
	}
	var ctx context.Context
	ctx, s.call = s.startCall()
	out.Header.Del("Traceparent")
	out.Header.Del("Tracestate")
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
}

// startCall starts the span of the engine exchange, at dispatch.
func (s *requestSpan) startCall() (context.Context, trace.Span) {
	return s.tracer.Start(s.ctx, http.MethodPost+" "+s.target.Path,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(s.dispatched),
		trace.WithAttributes(semconv.HTTPRequestMethodPost, semconv.ServerAddress(s.target.Hostname()), semconv.URLFull(s.target.Scheme+"://"+s.target.Host+s.target.Path)))
}

// answered keeps the engine's first event, which names the model the answer comes
// from, to be read if the spans are written (data is the tap's parser's, and reused: a
// copy), and reads the text of every event when content is recorded: of every request,
// sampled or not, so that a request the tail rule keeps has it.
func (s *requestSpan) answered(route wire.Route, data []byte) {
	if s == nil {
		return
	}
	if s.first == nil {
		s.first = bytes.Clone(data)
	}
	s.text(route, data)
}

// answeredBody is answered for a whole non-streaming body, which is the request's own
// and not reused: it is kept as it is.
func (s *requestSpan) answeredBody(route wire.Route, body []byte) {
	if s == nil {
		return
	}
	s.first = body
	s.text(route, body)
}

// text adds the answer's text that data carries, up to maxContent bytes.
func (s *requestSpan) text(route wire.Route, data []byte) {
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
// gen_ai.input.messages and gen_ai.output.messages, JSON of at most about maxContent
// bytes each (slogate.content.truncated says where the bound cut); the answer only of a
// request that reached the engine.
func (s *requestSpan) contentAttrs(res *measure.Result) []attribute.KeyValue {
	in, cut := boundContent(wire.InputContent(s.req.Route, s.body), maxContent)
	attrs := []attribute.KeyValue{semconv.GenAIInputMessagesKey.String(encodeJSON(in))}
	if !s.dispatched.IsZero() {
		out := []wire.Content{{Role: "assistant", Parts: []wire.Part{{Type: "text", Content: s.output.String()}}, FinishReason: res.FinishReason}}
		attrs = append(attrs, semconv.GenAIOutputMessagesKey.String(encodeJSON(out)))
		cut = cut || s.cut
	}
	if cut {
		attrs = append(attrs, attribute.Bool("slogate.content.truncated", true))
	}
	return attrs
}

// encodeJSON writes v as JSON without escaping <, > and & (text, not HTML).
func encodeJSON(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v) // strings and slices of them: it cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// jsonLen returns the length of s as encodeJSON writes it.
func jsonLen(s string) int { return len(encodeJSON(s)) }

// Bounds of boundContent: what a message and a part cost in JSON beyond their text, at
// most, and the longest role kept.
const (
	messageJSON = len(`{"role":"","parts":[]},`)
	partJSON    = len(`{"type":"text","content":""},`)
	maxRole     = 64
)

// boundContent returns msgs cut so that their JSON (encodeJSON) takes at most about n
// bytes: the messages and parts in order while they fit, the one that passes the bound
// cut on a character, the rest dropped; and whether it cut.
func boundContent(msgs []wire.Content, n int) ([]wire.Content, bool) {
	out := make([]wire.Content, 0, min(len(msgs), 64))
	for _, m := range msgs {
		m.Role = cutUTF8(m.Role, maxRole)
		if n -= messageJSON + jsonLen(m.Role); n < 0 {
			return out, true
		}
		parts := make([]wire.Part, 0, len(m.Parts))
		for _, p := range m.Parts {
			room := n - partJSON
			if l := jsonLen(p.Content); l <= room {
				n -= partJSON + l
				parts = append(parts, p)
				continue
			}
			// Escapes make the JSON longer than the text: cut until it fits.
			c := cutUTF8(p.Content, room)
			for c != "" && jsonLen(c) > room {
				c = cutUTF8(c, len(c)-(jsonLen(c)-room))
			}
			p.Content = c
			m.Parts = append(parts, p)
			return append(out, m), true
		}
		m.Parts = parts
		out = append(out, m)
	}
	return out, false
}

// end writes the request's spans with its measurement if its trace is exported: the
// head rule sampled it, or the tail rule keeps it because it did not end ok (rejected,
// failed, cut short) or missed its SLO (j). It returns the exported trace's context.
func (s *requestSpan) end(ex *exchange, res *measure.Result, j Judge, now time.Time) (trace.SpanContext, bool) {
	if s == nil {
		return trace.SpanContext{}, false
	}
	failed := res.Outcome != measure.OK
	judged, met := false, false
	if j != nil {
		judged, met = j.Judge(*res)
	}
	if !s.head && !failed && (!judged || met) {
		return trace.SpanContext{}, false
	}
	if s.root == nil {
		s.startRoot()
	}
	decision, decided := s.decisionAttrs(ex)
	if decided {
		_, q := s.tracer.Start(s.ctx, "slogate.queue", trace.WithTimestamp(s.queued), trace.WithAttributes(decision...))
		q.End(trace.WithTimestamp(s.admitted))
		s.root.AddEvent(eventAdmission, trace.WithTimestamp(s.admitted), trace.WithAttributes(decision...))
	}
	attrs := append(decision, s.op, semconv.HTTPRequestMethodPost, semconv.URLPath(ex.r.URL.Path),
		attribute.Bool("slogate.stream", s.req.Stream),
		attrOutcome.String(res.Outcome.String()), semconv.HTTPResponseStatusCode(res.Status))
	if s.req.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(s.req.Model))
	}
	if s.req.HasMaxTokens {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(s.req.MaxTokens))
	}
	if s.req.N > 1 {
		attrs = append(attrs, semconv.GenAIRequestChoiceCount(s.req.N))
	}
	if !s.dispatched.IsZero() {
		call := s.call
		if call == nil {
			_, call = s.startCall()
		}
		call.SetAttributes(semconv.HTTPResponseStatusCode(res.Status))
		if failed {
			call.SetStatus(codes.Error, res.Outcome.String())
		}
		call.End(trace.WithTimestamp(res.Start.Add(res.E2E)))
		state := make([]attribute.KeyValue, 0, 4)
		if s.kind != engine.KindAuto {
			state = append(state, semconv.GenAIProviderNameKey.String(s.kind.String()))
		}
		state = appendFinite(state, attrEngineWaiting, s.waiting)
		state = appendFinite(state, attrEngineRunning, s.running)
		state = appendFinite(state, attrEngineKV, s.kv)
		s.root.AddEvent(eventDispatch, trace.WithTimestamp(s.dispatched), trace.WithAttributes(state...))
		attrs = append(attrs, state...)
	}
	if model := wire.ResponseModel(s.first); model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(model))
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
	if !s.dispatched.IsZero() {
		attrs = append(attrs, attrE2E.Float64(res.E2E.Seconds()))
	}
	if s.content {
		attrs = append(attrs, s.contentAttrs(res)...)
	}
	if judged {
		attrs = append(attrs, attrSLOMet.Bool(met))
	}
	if failed {
		attrs = append(attrs, semconv.ErrorTypeKey.String(res.Outcome.String()))
		s.root.SetStatus(codes.Error, res.Outcome.String())
	}
	s.root.SetAttributes(attrs...)
	s.root.AddEvent(eventEnd, trace.WithTimestamp(now), trace.WithAttributes(attrOutcome.String(res.Outcome.String())))
	s.root.End(trace.WithTimestamp(now))
	return s.root.SpanContext(), true
}

// decisionAttrs returns what admission decided of the request, and whether it decided:
// not without admission, in its Off mode (a ticket without a tier), or for a request
// refused before it.
func (s *requestSpan) decisionAttrs(ex *exchange) ([]attribute.KeyValue, bool) {
	attrs := make([]attribute.KeyValue, 0, 32)
	decided := true
	switch tk := ex.ticket; {
	case s.queued.IsZero(), tk != nil && tk.Tier() == "":
		decided = false
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
	return attrs, decided
}

// appendFinite appends k=v unless v is unknown (NaN) or infinite.
func appendFinite(attrs []attribute.KeyValue, k attribute.Key, v float64) []attribute.KeyValue {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return attrs
	}
	return append(attrs, k.Float64(v))
}
