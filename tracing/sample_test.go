package tracing

import (
	"context"
	"math"
	"regexp"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// exporting returns a Tracing of ratio whose spans go to an in-memory exporter, at once.
func exporting(t *testing.T, ratio float64) (*Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(exportSampler{}), sdktrace.WithSyncer(mem))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return &Tracing{tp: tp, tracer: tp.Tracer(Name), ratio: ratio}, mem
}

func remote(t *testing.T, sampled bool) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	ts, _ := trace.ParseTraceState("congo=t61rcWkgMzE")
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: ts, Remote: true})
}

// TestHead: a parent's flag decides; without a parent, the ratio does.
func TestHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ratio  float64
		parent func(*testing.T) trace.SpanContext
		want   float64 // the share of draws sampled
	}{
		{"sampled parent, ratio 0", 0, func(t *testing.T) trace.SpanContext { return remote(t, true) }, 1},
		{"unsampled parent, ratio 1", 1, func(t *testing.T) trace.SpanContext { return remote(t, false) }, 0},
		{"no parent, ratio 0", 0, func(*testing.T) trace.SpanContext { return trace.SpanContext{} }, 0},
		{"no parent, ratio 1", 1, func(*testing.T) trace.SpanContext { return trace.SpanContext{} }, 1},
		{"no parent, ratio 0.25", 0.25, func(*testing.T) trace.SpanContext { return trace.SpanContext{} }, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := exporting(t, tc.ratio)
			const n = 20000
			hits := 0
			for range n {
				if tr.Head(tc.parent(t)) {
					hits++
				}
			}
			// Binomial: 5 standard deviations of 20,000 draws at 0.25 are 0.015.
			if got := float64(hits) / n; math.Abs(got-tc.want) > 0.015 {
				t.Errorf("sampled %.4f of draws, want %.2f", got, tc.want)
			}
		})
	}
}

// TestExportSampler: spans started under Export, and their children, are sampled and
// keep the parent's trace and tracestate; every other span is dropped, not recorded.
func TestExportSampler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ctx    func(*testing.T) context.Context
		export bool
	}{
		{"no parent, not marked", func(*testing.T) context.Context { return context.Background() }, false},
		{"no parent, marked", func(*testing.T) context.Context { return Export(context.Background()) }, true},
		{"an unsampled remote parent, marked (kept by the tail rule)", func(t *testing.T) context.Context {
			return Export(trace.ContextWithRemoteSpanContext(context.Background(), remote(t, false)))
		}, true},
		{"a sampled remote parent, not marked", func(t *testing.T) context.Context {
			return trace.ContextWithRemoteSpanContext(context.Background(), remote(t, true))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, mem := exporting(t, 1)
			ctx := tc.ctx(t)
			ctx, root := tr.Tracer().Start(ctx, "request")
			_, child := tr.Tracer().Start(ctx, "queue")
			if root.IsRecording() != tc.export || child.IsRecording() != tc.export {
				t.Errorf("recording: request %v, queue %v; want %v", root.IsRecording(), child.IsRecording(), tc.export)
			}
			child.End()
			root.End()
			spans := mem.GetSpans()
			if !tc.export {
				if len(spans) != 0 {
					t.Errorf("%d spans exported, want none", len(spans))
				}
				return
			}
			if len(spans) != 2 || spans[0].Parent.SpanID() != root.SpanContext().SpanID() {
				t.Fatalf("exported %v; want the queue's span under the request's and the request's", spans)
			}
			for _, s := range spans {
				if !s.SpanContext.IsSampled() || s.SpanContext.TraceID() != root.SpanContext().TraceID() {
					t.Errorf("span %q: sampled %v, trace %s", s.Name, s.SpanContext.IsSampled(), s.SpanContext.TraceID())
				}
			}
			if p := trace.SpanContextFromContext(tc.ctx(t)); p.IsValid() {
				if got := root.SpanContext(); got.TraceID() != p.TraceID() || got.TraceState().String() != p.TraceState().String() {
					t.Errorf("request span in trace %s with tracestate %q, want the parent's %s, %q", got.TraceID(), got.TraceState(), p.TraceID(), p.TraceState())
				}
			}
		})
	}
}

// TestUnsampledParent: a valid W3C traceparent that says "not sampled", of a new trace
// every time.
func TestUnsampledParent(t *testing.T) {
	form := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-00$`)
	seen := map[string]bool{}
	for range 1000 {
		tp := UnsampledParent()
		m := form.FindStringSubmatch(tp)
		if m == nil {
			t.Fatalf("%q is not a traceparent of version 00 with flags 00", tp)
		}
		sc := trace.SpanContextFromContext(Propagator.Extract(context.Background(), headerCarrier{"traceparent": tp}))
		if !sc.IsValid() || sc.IsSampled() {
			t.Fatalf("%q: the W3C propagator reads valid %v, sampled %v", tp, sc.IsValid(), sc.IsSampled())
		}
		if seen[m[1]] {
			t.Fatalf("trace id %s twice", m[1])
		}
		seen[m[1]] = true
	}
}

type headerCarrier map[string]string

func (h headerCarrier) Get(k string) string { return h[k] }
func (h headerCarrier) Set(k, v string)     { h[k] = v }
func (h headerCarrier) Keys() []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	return out
}
