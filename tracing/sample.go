package tracing

import (
	"context"
	"encoding/hex"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Head is the head rule for a request whose client sent parent (invalid when it sent
// none): the parent's sampled flag when there is a parent, else a draw of SampleRatio.
// Safe for concurrent use.
func (t *Tracing) Head(parent trace.SpanContext) bool {
	if parent.IsValid() {
		return parent.IsSampled()
	}
	return t.ratio > 0 && rand.Float64() < t.ratio
}

// exportKey marks a context whose spans are to be exported.
type exportKey struct{}

// Export returns ctx marked so that the spans started under it, and under the contexts
// those spans make, are sampled: the proxy starts a request's spans under it once one
// of the rules says the request's trace is exported.
func Export(ctx context.Context) context.Context { return context.WithValue(ctx, exportKey{}, true) }

// exportSampler samples the spans started under Export and drops every other: the
// decision is the proxy's (Tracing.Head and the tail rule), taken before a span exists.
type exportSampler struct{}

func (exportSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	if p.ParentContext != nil && p.ParentContext.Value(exportKey{}) != nil {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: ts}
}

func (exportSampler) Description() string { return "slogate: the proxy's head and tail rules" }

// UnsampledParent returns a W3C traceparent of a new trace that says "not sampled", for
// the engine's request of a request that came without one and that the head rule did
// not sample: an engine tracing by its parent's flag (vLLM) then writes no span of it,
// as of any request slogate did not sample, where without a traceparent it would start
// a trace of its own.
func UnsampledParent() string {
	var ids [24]byte // trace id, span id
	for i := 0; i < len(ids); i += 8 {
		v := rand.Uint64()
		for j := range 8 {
			ids[i+j] = byte(v >> (8 * j))
		}
	}
	ids[15] |= 1 // all-zero ids are invalid: one bit set in each rules them out
	ids[23] |= 1
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], ids[:16])
	b[35] = '-'
	hex.Encode(b[36:52], ids[16:])
	copy(b[52:], "-00")
	return string(b[:])
}
