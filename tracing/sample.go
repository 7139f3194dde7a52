package tracing

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The attributes the tail rule reads on a request's span.
const (
	// ErrorType is the semantic conventions' error.type, which the proxy sets to the
	// outcome of a request that did not end ok.
	ErrorType = attribute.Key("error.type")
	// SLOMet is whether the request met both SLOs of its tier as its client saw them; set
	// only on requests an SLO judges.
	SLOMet = attribute.Key("slogate.slo.met")
)

// Keep is the tail rule: a request's span whose attributes attrs carry ErrorType (it
// failed, was rejected or was cut short) or SLOMet false is kept, with every span under
// it, whatever the head rule decided.
func Keep(attrs []attribute.KeyValue) bool {
	for _, a := range attrs {
		switch a.Key {
		case ErrorType:
			return true
		case SLOMet:
			if !a.Value.AsBool() {
				return true
			}
		}
	}
	return false
}

// Sampler returns the head rule: a span whose parent is sampled is sampled, one whose
// parent is not is not, and a root is sampled for a fraction ratio of trace ids. Where
// the head rule does not sample, the span is still recorded (not exported, and its
// traceparent says not sampled) so that the tail rule can keep it at its end.
func Sampler(ratio float64) sdktrace.Sampler {
	return recordAll{sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))}
}

// recordAll turns the head sampler's drops into RecordOnly.
type recordAll struct{ head sdktrace.Sampler }

func (s recordAll) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	r := s.head.ShouldSample(p)
	if r.Decision == sdktrace.Drop {
		r.Decision = sdktrace.RecordOnly
	}
	return r
}

func (s recordAll) Description() string { return "RecordAll{" + s.head.Description() + "}" }

// tail is the span processor of the tail rule in front of the exporting one (next).
// Spans the head rule sampled pass at once. The others are held by trace until their
// local root (a span without a parent in this process) ends; then the root and the
// spans under it pass, marked sampled, if Keep says so of the root, and are dropped if
// not. A span that would pass max held spans is dropped at once and counted.
//
// Every span under a local root must end before it, as the proxy's do: one that ends
// after finds nothing to join and is held until the bound drops others.
type tail struct {
	next    sdktrace.SpanProcessor
	max     int
	dropped atomic.Uint64

	mu      sync.Mutex
	held    map[trace.TraceID][]sdktrace.ReadOnlySpan
	holding int
}

func (t *tail) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { t.next.OnStart(ctx, s) }

func (t *tail) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		t.next.OnEnd(s)
		return
	}
	id := s.SpanContext().TraceID()
	if p := s.Parent(); p.IsValid() && !p.IsRemote() {
		t.hold(id, s)
		return
	}
	under := t.take(id, s.SpanContext().SpanID())
	if !Keep(s.Attributes()) {
		return
	}
	for _, c := range under {
		t.next.OnEnd(kept{c})
	}
	t.next.OnEnd(kept{s})
}

// hold keeps s until its local root ends.
func (t *tail) hold(id trace.TraceID, s sdktrace.ReadOnlySpan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.holding >= t.max {
		t.dropped.Add(1)
		return
	}
	if t.held == nil {
		t.held = make(map[trace.TraceID][]sdktrace.ReadOnlySpan)
	}
	t.held[id] = append(t.held[id], s)
	t.holding++
}

// take removes and returns the spans held of trace id under the span root: its children,
// their children and so on. Spans of the trace under other roots (a client that sent
// several requests under one parent) stay held.
func (t *tail) take(id trace.TraceID, root trace.SpanID) []sdktrace.ReadOnlySpan {
	t.mu.Lock()
	defer t.mu.Unlock()
	spans := t.held[id]
	if len(spans) == 0 {
		return nil
	}
	under := map[trace.SpanID]bool{root: true}
	var out []sdktrace.ReadOnlySpan
	for moved := true; moved; {
		moved = false
		rest := spans[:0]
		for _, s := range spans {
			if under[s.Parent().SpanID()] {
				under[s.SpanContext().SpanID()] = true
				out = append(out, s)
				moved = true
				continue
			}
			rest = append(rest, s)
		}
		spans = rest
	}
	t.holding -= len(out)
	if len(spans) == 0 {
		delete(t.held, id)
	} else {
		clear(t.held[id][len(spans):])
		t.held[id] = spans
	}
	return out
}

func (t *tail) Shutdown(ctx context.Context) error   { return t.next.Shutdown(ctx) }
func (t *tail) ForceFlush(ctx context.Context) error { return t.next.ForceFlush(ctx) }

// kept is a span the tail rule keeps: sampled from now on, so the exporter takes it.
type kept struct{ sdktrace.ReadOnlySpan }

func (k kept) SpanContext() trace.SpanContext {
	sc := k.ReadOnlySpan.SpanContext()
	return sc.WithTraceFlags(sc.TraceFlags().WithSampled(true))
}
