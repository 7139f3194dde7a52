package tracing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Trace and span ids of the remote parents the tests use: a client's traceparent.
var (
	remoteTraceID = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	remoteSpanID  = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

// remoteParent returns ctx carrying a remote span context, as propagation.TraceContext
// extracts a client's traceparent, sampled or not.
func remoteParent(sampled bool) context.Context {
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    remoteTraceID,
		SpanID:     remoteSpanID,
		TraceFlags: flags,
		Remote:     true,
	})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// traceparent returns the traceparent header the propagator writes for ctx.
func traceparent(t *testing.T, ctx context.Context) string {
	t.Helper()
	h := propagation.HeaderCarrier{}
	propagation.TraceContext{}.Inject(ctx, h)
	tp := h.Get("traceparent")
	if tp == "" {
		t.Fatal("no traceparent injected")
	}
	return tp
}

// tailPipeline is a tracer provider with the head sampler of ratio and the tail processor
// of bound max in front of an in-memory exporter.
type tailPipeline struct {
	tp   *sdktrace.TracerProvider
	tail *tail
	exp  *tracetest.InMemoryExporter
	tr   trace.Tracer
}

func newTailPipeline(t *testing.T, ratio float64, max int) *tailPipeline {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tl := &tail{next: sdktrace.NewSimpleSpanProcessor(exp), max: max}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(Sampler(ratio)), sdktrace.WithSpanProcessor(tl))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &tailPipeline{tp: tp, tail: tl, exp: exp, tr: tp.Tracer("test")}
}

// held returns how many spans the tail processor holds, by its counter and by its map,
// failing the test if they disagree.
func (p *tailPipeline) held(t *testing.T) int {
	t.Helper()
	p.tail.mu.Lock()
	defer p.tail.mu.Unlock()
	n := 0
	for id, spans := range p.tail.held {
		if len(spans) == 0 {
			t.Errorf("trace %s has an empty entry in held", id)
		}
		n += len(spans)
	}
	if n != p.tail.holding {
		t.Errorf("holding = %d, but held has %d spans", p.tail.holding, n)
	}
	return n
}

// assertEmpty fails the test unless the tail processor holds nothing.
func (p *tailPipeline) assertEmpty(t *testing.T) {
	t.Helper()
	if n := p.held(t); n != 0 {
		t.Errorf("%d spans still held, want 0", n)
	}
	p.tail.mu.Lock()
	defer p.tail.mu.Unlock()
	if p.tail.holding != 0 || len(p.tail.held) != 0 {
		t.Errorf("holding = %d, len(held) = %d, want 0 and 0", p.tail.holding, len(p.tail.held))
	}
}

// byName indexes exported spans by name, failing the test on a duplicate.
func byName(t *testing.T, spans tracetest.SpanStubs) map[string]tracetest.SpanStub {
	t.Helper()
	m := make(map[string]tracetest.SpanStub, len(spans))
	for _, s := range spans {
		if _, dup := m[s.Name]; dup {
			t.Errorf("span %q exported twice", s.Name)
		}
		m[s.Name] = s
	}
	return m
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func TestKeep(t *testing.T) {
	tests := []struct {
		name  string
		attrs []attribute.KeyValue
		want  bool
	}{
		{"no attributes", nil, false},
		{"unrelated attributes", []attribute.KeyValue{attribute.String("http.route", "/v1/chat/completions"), attribute.Int("http.response.status_code", 200)}, false},
		{"error.type rejected", []attribute.KeyValue{ErrorType.String("rejected")}, true},
		{"error.type among others", []attribute.KeyValue{attribute.String("a", "b"), ErrorType.String("timeout"), attribute.Int("c", 1)}, true},
		{"slo met false", []attribute.KeyValue{SLOMet.Bool(false)}, true},
		{"slo met true", []attribute.KeyValue{SLOMet.Bool(true)}, false},
		{"slo met true then error.type", []attribute.KeyValue{SLOMet.Bool(true), ErrorType.String("upstream")}, true},
		{"error.type then slo met true", []attribute.KeyValue{ErrorType.String("upstream"), SLOMet.Bool(true)}, true},
		{"slo met false after unrelated", []attribute.KeyValue{attribute.Bool("slogate.other", true), SLOMet.Bool(false)}, true},
		{"a key that only resembles", []attribute.KeyValue{attribute.String("error.types", "x"), attribute.Bool("slogate.slo.met.ttft", false)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Keep(tt.attrs); got != tt.want {
				t.Errorf("Keep(%v) = %v, want %v", tt.attrs, got, tt.want)
			}
		})
	}
}

func TestSampler(t *testing.T) {
	// TraceIDRatioBased compares the trace id's last 8 bytes, shifted right once, with
	// ratio * 2^63: low is sampled at any ratio above 0, high at none below 1.
	low := trace.TraceID{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	high := trace.TraceID{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ts, err := trace.ParseTraceState("vendor=value")
	if err != nil {
		t.Fatal(err)
	}
	parent := func(remote, sampled bool) context.Context {
		var flags trace.TraceFlags
		if sampled {
			flags = trace.FlagsSampled
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: high, SpanID: remoteSpanID, TraceFlags: flags, TraceState: ts, Remote: remote,
		})
		return trace.ContextWithSpanContext(context.Background(), sc)
	}
	tests := []struct {
		name      string
		ratio     float64
		ctx       context.Context
		id        trace.TraceID
		want      sdktrace.SamplingDecision
		wantState string
	}{
		{"root ratio 0", 0, context.Background(), low, sdktrace.RecordOnly, ""},
		{"root ratio 1", 1, context.Background(), high, sdktrace.RecordAndSample, ""},
		{"root ratio 0.5 low id", 0.5, context.Background(), low, sdktrace.RecordAndSample, ""},
		{"root ratio 0.5 high id", 0.5, context.Background(), high, sdktrace.RecordOnly, ""},
		{"remote sampled parent ratio 0", 0, parent(true, true), high, sdktrace.RecordAndSample, "vendor=value"},
		{"remote unsampled parent ratio 1", 1, parent(true, false), low, sdktrace.RecordOnly, "vendor=value"},
		{"local sampled parent ratio 0", 0, parent(false, true), high, sdktrace.RecordAndSample, "vendor=value"},
		{"local unsampled parent ratio 1", 1, parent(false, false), low, sdktrace.RecordOnly, "vendor=value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Sampler(tt.ratio).ShouldSample(sdktrace.SamplingParameters{
				ParentContext: tt.ctx, TraceID: tt.id, Name: "request", Kind: trace.SpanKindServer,
			})
			if r.Decision != tt.want {
				t.Errorf("decision = %v, want %v", r.Decision, tt.want)
			}
			if got := r.Tracestate.String(); got != tt.wantState {
				t.Errorf("tracestate = %q, want %q", got, tt.wantState)
			}
		})
	}
	t.Run("never drops", func(t *testing.T) {
		for _, ratio := range []float64{0, 0.25, 0.5, 1} {
			for i := range 256 {
				id := trace.TraceID{15: byte(i), 8: byte(i * 37)}
				r := Sampler(ratio).ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id})
				if r.Decision == sdktrace.Drop {
					t.Fatalf("Sampler(%g) dropped trace %s", ratio, id)
				}
			}
		}
	})
	t.Run("description", func(t *testing.T) {
		d := Sampler(0.25).Description()
		if !strings.HasPrefix(d, "RecordAll{ParentBased{") || !strings.Contains(d, "TraceIDRatioBased{0.25}") {
			t.Errorf("Description() = %q", d)
		}
	})
}

// TestTailRequest is one request: a root span with two children that end before it, under
// the parent and head ratio of the case, with the root's attributes set as it ends.
func TestTailRequest(t *testing.T) {
	type parentKind int
	const (
		noParent parentKind = iota
		sampledParent
		unsampledParent
	)
	tests := []struct {
		name       string
		ratio      float64
		parent     parentKind
		attrs      []attribute.KeyValue
		wantFlags  string // the traceparent's trace flags
		wantExport bool   // root and both children; if not, nothing
	}{
		{"ok root", 0, noParent, nil, "00", false},
		{"ok root with unrelated attributes", 0, noParent, []attribute.KeyValue{attribute.String("http.route", "/v1/completions")}, "00", false},
		{"rejected root", 0, noParent, []attribute.KeyValue{ErrorType.String("rejected")}, "00", true},
		{"slo missed", 0, noParent, []attribute.KeyValue{SLOMet.Bool(false)}, "00", true},
		{"slo met", 0, noParent, []attribute.KeyValue{SLOMet.Bool(true)}, "00", false},
		{"ratio 1", 1, noParent, nil, "01", true},
		{"ratio 1 slo met", 1, noParent, []attribute.KeyValue{SLOMet.Bool(true)}, "01", true},
		{"sampled remote parent", 0, sampledParent, nil, "01", true},
		{"sampled remote parent slo met", 0, sampledParent, []attribute.KeyValue{SLOMet.Bool(true)}, "01", true},
		{"unsampled remote parent ok", 1, unsampledParent, nil, "00", false},
		{"unsampled remote parent failed", 1, unsampledParent, []attribute.KeyValue{ErrorType.String("upstream_error")}, "00", true},
		{"unsampled remote parent slo missed", 0, unsampledParent, []attribute.KeyValue{SLOMet.Bool(false)}, "00", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTailPipeline(t, tt.ratio, 16)
			ctx := context.Background()
			switch tt.parent {
			case sampledParent:
				ctx = remoteParent(true)
			case unsampledParent:
				ctx = remoteParent(false)
			}
			ctx, root := p.tr.Start(ctx, "root")
			if !root.IsRecording() {
				t.Fatal("root is not recording")
			}
			rsc := root.SpanContext()
			if tt.parent != noParent && rsc.TraceID() != remoteTraceID {
				t.Errorf("root trace id = %s, want the remote parent's %s", rsc.TraceID(), remoteTraceID)
			}
			want := fmt.Sprintf("00-%s-%s-%s", rsc.TraceID(), rsc.SpanID(), tt.wantFlags)
			if got := traceparent(t, ctx); got != want {
				t.Errorf("traceparent = %q, want %q", got, want)
			}
			headSampled := tt.wantFlags == "01"
			if rsc.IsSampled() != headSampled {
				t.Errorf("root IsSampled = %v, want %v", rsc.IsSampled(), headSampled)
			}

			_, c1 := p.tr.Start(ctx, "child1")
			_, c2 := p.tr.Start(ctx, "child2")
			for _, c := range []trace.Span{c1, c2} {
				if !c.IsRecording() {
					t.Errorf("child is not recording")
				}
				if c.SpanContext().IsSampled() != headSampled {
					t.Errorf("child IsSampled = %v, want the root's %v", c.SpanContext().IsSampled(), headSampled)
				}
			}
			c1.End()
			c2.End()
			// What the head rule samples is exported at once; the rest waits for the root.
			wantNow, wantHeld := 0, 2
			if headSampled {
				wantNow, wantHeld = 2, 0
			}
			if n := len(p.exp.GetSpans()); n != wantNow {
				t.Errorf("%d spans exported before the root ended, want %d", n, wantNow)
			}
			if n := p.held(t); n != wantHeld {
				t.Errorf("%d spans held before the root ended, want %d", n, wantHeld)
			}

			root.SetAttributes(tt.attrs...)
			root.End()

			spans := p.exp.GetSpans()
			p.assertEmpty(t)
			if !tt.wantExport {
				if len(spans) != 0 {
					t.Fatalf("exported %v, want nothing", names(spans))
				}
				return
			}
			if got, want := names(spans), []string{"child1", "child2", "root"}; !slices.Equal(got, want) {
				t.Fatalf("exported %v, want %v", got, want)
			}
			m := byName(t, spans)
			for _, s := range spans {
				if !s.SpanContext.IsSampled() {
					t.Errorf("%s exported with IsSampled false", s.Name)
				}
				if s.SpanContext.TraceID() != rsc.TraceID() {
					t.Errorf("%s trace id = %s, want %s", s.Name, s.SpanContext.TraceID(), rsc.TraceID())
				}
			}
			r := m["root"]
			if r.SpanContext.SpanID() != rsc.SpanID() {
				t.Errorf("exported root span id = %s, want %s", r.SpanContext.SpanID(), rsc.SpanID())
			}
			if tt.parent == noParent {
				if r.Parent.IsValid() {
					t.Errorf("root exported with parent %v, want none", r.Parent)
				}
			} else if r.Parent.SpanID() != remoteSpanID || !r.Parent.IsRemote() {
				t.Errorf("root parent = %s remote %v, want the remote %s", r.Parent.SpanID(), r.Parent.IsRemote(), remoteSpanID)
			}
			for _, a := range tt.attrs {
				if !slices.Contains(r.Attributes, a) {
					t.Errorf("root exported without %v: %v", a, r.Attributes)
				}
			}
			for _, c := range []string{"child1", "child2"} {
				if got := m[c].Parent.SpanID(); got != rsc.SpanID() {
					t.Errorf("%s parent = %s, want the root %s", c, got, rsc.SpanID())
				}
			}
		})
	}
}

// TestTailExtractedParent reads the client's traceparent as the proxy does, with the
// package's Propagator, and checks the head rule's traceparent follows it.
func TestTailExtractedParent(t *testing.T) {
	tests := []struct {
		in        string
		failed    bool
		wantFlags string
		wantSpans int
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, "01", 2},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, "01", 2},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", false, "00", 0},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, "00", 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s failed=%v", tt.in, tt.failed), func(t *testing.T) {
			p := newTailPipeline(t, 1, 16)
			h := propagation.HeaderCarrier{}
			h.Set("traceparent", tt.in)
			h.Set("tracestate", "vendor=value")
			ctx := Propagator.Extract(context.Background(), h)
			ctx, root := p.tr.Start(ctx, "root")
			_, child := p.tr.Start(ctx, "child")
			child.End()
			if tt.failed {
				root.SetAttributes(ErrorType.String("cancelled"))
			}
			out := propagation.HeaderCarrier{}
			Propagator.Inject(ctx, out)
			want := fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e4736-%s-%s", root.SpanContext().SpanID(), tt.wantFlags)
			if got := out.Get("traceparent"); got != want {
				t.Errorf("traceparent = %q, want %q", got, want)
			}
			if got := out.Get("tracestate"); got != "vendor=value" {
				t.Errorf("tracestate = %q, want the client's", got)
			}
			root.End()
			spans := p.exp.GetSpans()
			if len(spans) != tt.wantSpans {
				t.Fatalf("exported %v, want %d spans", names(spans), tt.wantSpans)
			}
			for _, s := range spans {
				if !s.SpanContext.IsSampled() || s.SpanContext.TraceState().String() != "vendor=value" {
					t.Errorf("%s exported with sampled %v tracestate %q", s.Name, s.SpanContext.IsSampled(), s.SpanContext.TraceState())
				}
			}
			p.assertEmpty(t)
		})
	}
}

// TestTailNested checks that a kept root takes its grandchildren too, in whatever order
// they ended, and a dropped root drops them.
func TestTailNested(t *testing.T) {
	tests := []struct {
		name  string
		order []string // the order the spans under the root end
		keep  bool
	}{
		{"leaves first, kept", []string{"grandchild", "grandchild2", "child", "sibling"}, true},
		{"parent before its children, kept", []string{"child", "grandchild2", "sibling", "grandchild"}, true},
		{"leaves first, dropped", []string{"grandchild", "grandchild2", "child", "sibling"}, false},
		{"parent before its children, dropped", []string{"child", "sibling", "grandchild", "grandchild2"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTailPipeline(t, 0, 16)
			ctx, root := p.tr.Start(context.Background(), "root")
			cctx, child := p.tr.Start(ctx, "child")
			_, sibling := p.tr.Start(ctx, "sibling")
			_, gc := p.tr.Start(cctx, "grandchild")
			_, gc2 := p.tr.Start(cctx, "grandchild2")
			spans := map[string]trace.Span{"child": child, "sibling": sibling, "grandchild": gc, "grandchild2": gc2}
			for _, n := range tt.order {
				spans[n].End()
			}
			if n := p.held(t); n != 4 {
				t.Errorf("%d spans held, want 4", n)
			}
			if tt.keep {
				root.SetAttributes(ErrorType.String("internal"))
			}
			root.End()
			p.assertEmpty(t)
			got := p.exp.GetSpans()
			if !tt.keep {
				if len(got) != 0 {
					t.Fatalf("exported %v, want nothing", names(got))
				}
				return
			}
			if want := []string{"child", "grandchild", "grandchild2", "root", "sibling"}; !slices.Equal(names(got), want) {
				t.Fatalf("exported %v, want %v", names(got), want)
			}
			m := byName(t, got)
			wantParent := map[string]string{"child": "root", "sibling": "root", "grandchild": "child", "grandchild2": "child"}
			for n, parent := range wantParent {
				if m[n].Parent.SpanID() != m[parent].SpanContext.SpanID() {
					t.Errorf("%s parent = %s, want %s's %s", n, m[n].Parent.SpanID(), parent, m[parent].SpanContext.SpanID())
				}
				if !m[n].SpanContext.IsSampled() {
					t.Errorf("%s not sampled", n)
				}
			}
		})
	}
}

// TestTailTwoRootsOneTrace is two requests of one client trace, whose traceparent is not
// sampled: each local root takes only its own spans.
func TestTailTwoRootsOneTrace(t *testing.T) {
	tests := []struct {
		name         string
		keepA, keepB bool
		aFirst       bool // root A ends before root B
		wantExported []string
	}{
		{"A kept, A ends first", true, false, true, []string{"a.child1", "a.child2", "a.root"}},
		{"A kept, B ends first", true, false, false, []string{"a.child1", "a.child2", "a.root"}},
		{"B kept, A ends first", false, true, true, []string{"b.child1", "b.child2", "b.root"}},
		{"both kept", true, true, true, []string{"a.child1", "a.child2", "a.root", "b.child1", "b.child2", "b.root"}},
		{"neither kept", false, false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTailPipeline(t, 0, 16)
			client := remoteParent(false)
			actx, a := p.tr.Start(client, "a.root")
			bctx, b := p.tr.Start(client, "b.root")
			if a.SpanContext().TraceID() != b.SpanContext().TraceID() {
				t.Fatal("the two roots are not of one trace")
			}
			// The children end interleaved, as concurrent requests' do.
			var children []trace.Span
			for i := 1; i <= 2; i++ {
				_, ac := p.tr.Start(actx, fmt.Sprintf("a.child%d", i))
				_, bc := p.tr.Start(bctx, fmt.Sprintf("b.child%d", i))
				children = append(children, bc, ac)
			}
			for _, c := range children {
				c.End()
			}
			if n := p.held(t); n != 4 {
				t.Fatalf("%d spans held, want 4", n)
			}
			if tt.keepA {
				a.SetAttributes(ErrorType.String("rejected"))
			} else {
				a.SetAttributes(SLOMet.Bool(true))
			}
			if tt.keepB {
				b.SetAttributes(SLOMet.Bool(false))
			}
			first, second := a, b
			if !tt.aFirst {
				first, second = b, a
			}
			first.End()
			// The other request's two children stay held for its root.
			if n := p.held(t); n != 2 {
				t.Errorf("%d spans held after the first root ended, want 2", n)
			}
			second.End()
			p.assertEmpty(t)
			spans := p.exp.GetSpans()
			if got := names(spans); !slices.Equal(got, tt.wantExported) {
				t.Fatalf("exported %v, want %v", got, tt.wantExported)
			}
			m := byName(t, spans)
			for _, s := range spans {
				if !s.SpanContext.IsSampled() {
					t.Errorf("%s not sampled", s.Name)
				}
				if s.SpanContext.TraceID() != remoteTraceID {
					t.Errorf("%s trace id = %s, want the client's", s.Name, s.SpanContext.TraceID())
				}
				if strings.HasSuffix(s.Name, ".root") {
					continue
				}
				root := s.Name[:1] + ".root"
				if s.Parent.SpanID() != m[root].SpanContext.SpanID() {
					t.Errorf("%s parent = %s, want %s", s.Name, s.Parent.SpanID(), root)
				}
			}
		})
	}
}

// TestTailMaxPending checks the bound on held spans: what would pass it is dropped and
// counted, the rest of the request is still kept, and the bound frees with the root.
func TestTailMaxPending(t *testing.T) {
	tests := []struct {
		name         string
		max          int
		children     int
		keep         bool
		wantDropped  uint64
		wantExported int // spans, with the root, if kept
	}{
		{"max 1, 2 children, kept", 1, 2, true, 1, 2},
		{"max 1, 2 children, dropped", 1, 2, false, 1, 0},
		{"max 2, 2 children, kept", 2, 2, true, 0, 3},
		{"max 0, 2 children, kept", 0, 2, true, 2, 1},
		{"max 3, 5 children, kept", 3, 5, true, 2, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTailPipeline(t, 0, tt.max)
			ctx, root := p.tr.Start(context.Background(), "root")
			for i := range tt.children {
				_, c := p.tr.Start(ctx, fmt.Sprintf("child%d", i))
				c.End()
			}
			if got := p.tail.dropped.Load(); got != tt.wantDropped {
				t.Errorf("dropped = %d, want %d", got, tt.wantDropped)
			}
			if n, want := p.held(t), tt.children-int(tt.wantDropped); n != want {
				t.Errorf("%d spans held, want %d", n, want)
			}
			if tt.keep {
				root.SetAttributes(ErrorType.String("rejected"))
			}
			root.End()
			p.assertEmpty(t)
			spans := p.exp.GetSpans()
			if len(spans) != tt.wantExported {
				t.Errorf("exported %v, want %d spans", names(spans), tt.wantExported)
			}
			if tt.keep && !slices.Contains(names(spans), "root") {
				t.Errorf("root not exported: %v", names(spans))
			}

			// The bound is free again: another request holds its child and drops nothing more.
			if tt.max == 0 {
				return
			}
			ctx, root = p.tr.Start(context.Background(), "root2")
			_, c := p.tr.Start(ctx, "root2.child")
			c.End()
			if got := p.tail.dropped.Load(); got != tt.wantDropped {
				t.Errorf("dropped = %d after a second request, want still %d", got, tt.wantDropped)
			}
			root.SetAttributes(ErrorType.String("rejected"))
			root.End()
			p.assertEmpty(t)
			if got := len(p.exp.GetSpans()); got != tt.wantExported+2 {
				t.Errorf("%d spans exported after the second request, want %d", got, tt.wantExported+2)
			}
		})
	}
}

// TestTailSampledPassThrough checks that spans the head rule sampled are never held.
func TestTailSampledPassThrough(t *testing.T) {
	p := newTailPipeline(t, 1, 1)
	ctx, root := p.tr.Start(context.Background(), "root")
	for i := range 5 {
		_, c := p.tr.Start(ctx, fmt.Sprintf("child%d", i))
		c.End()
		if n := len(p.exp.GetSpans()); n != i+1 {
			t.Fatalf("%d spans exported after child%d ended, want %d", n, i, i+1)
		}
	}
	root.End()
	if n := len(p.exp.GetSpans()); n != 6 {
		t.Errorf("%d spans exported, want 6", n)
	}
	if d := p.tail.dropped.Load(); d != 0 {
		t.Errorf("dropped = %d for sampled spans, want 0", d)
	}
	p.assertEmpty(t)
}

// TestTailLateChild pins the documented contract that every span under a local root
// ends before it: one that ends after is not exported with the kept root, and stays held.
func TestTailLateChild(t *testing.T) {
	p := newTailPipeline(t, 0, 16)
	ctx, root := p.tr.Start(context.Background(), "root")
	_, late := p.tr.Start(ctx, "late")
	root.SetAttributes(ErrorType.String("rejected"))
	root.End()
	late.End()
	if got := names(p.exp.GetSpans()); !slices.Equal(got, []string{"root"}) {
		t.Errorf("exported %v, want [root]", got)
	}
	if n := p.held(t); n != 1 {
		t.Errorf("%d spans held, want the late child", n)
	}
}

// TestTailConcurrent runs many requests at once, half of them failing, for the race
// detector and for the bookkeeping.
func TestTailConcurrent(t *testing.T) {
	const requests, children = 64, 3
	p := newTailPipeline(t, 0, requests*children)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			ctx, root := p.tr.Start(context.Background(), fmt.Sprintf("root%d", i))
			var cwg sync.WaitGroup
			for j := range children {
				cwg.Go(func() {
					_, c := p.tr.Start(ctx, fmt.Sprintf("root%d.child%d", i, j))
					c.End()
				})
			}
			cwg.Wait()
			if i%2 == 0 {
				root.SetAttributes(ErrorType.String("rejected"))
			}
			root.End()
		})
	}
	wg.Wait()
	p.assertEmpty(t)
	if d := p.tail.dropped.Load(); d != 0 {
		t.Errorf("dropped = %d, want 0", d)
	}
	spans := p.exp.GetSpans()
	if want := requests / 2 * (children + 1); len(spans) != want {
		t.Errorf("exported %d spans, want %d", len(spans), want)
	}
	for _, s := range spans {
		var i int
		if _, err := fmt.Sscanf(s.Name, "root%d", &i); err != nil || i%2 != 0 {
			t.Errorf("exported %s, of a request that did not fail", s.Name)
		}
	}
}

func TestKeptSpanContext(t *testing.T) {
	ts, err := trace.ParseTraceState("a=b")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		flags trace.TraceFlags
	}{
		{"unsampled", 0},
		{"sampled", trace.FlagsSampled},
		{"other flag bits", trace.TraceFlags(0x02)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: remoteTraceID, SpanID: remoteSpanID, TraceFlags: tt.flags, TraceState: ts, Remote: true,
			})
			ro := tracetest.SpanStub{Name: "s", SpanContext: sc}.Snapshot()
			k := kept{ro}
			got := k.SpanContext()
			if !got.IsSampled() {
				t.Error("kept span is not sampled")
			}
			if got.TraceFlags() != tt.flags|trace.FlagsSampled {
				t.Errorf("flags = %v, want %v", got.TraceFlags(), tt.flags|trace.FlagsSampled)
			}
			if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || got.TraceState().String() != "a=b" || !got.IsRemote() {
				t.Errorf("kept span context = %+v, want %+v but sampled", got, sc)
			}
			if k.Name() != "s" {
				t.Errorf("Name() = %q, want the span's", k.Name())
			}
			if ro.SpanContext().IsSampled() != tt.flags.IsSampled() {
				t.Error("kept changed the span it wraps")
			}
		})
	}
}

// recordingProcessor counts the calls the tail processor passes on.
type recordingProcessor struct {
	mu                    sync.Mutex
	started, ended        []string
	flushes, shutdowns    int
	flushErr, shutdownErr error
}

func (r *recordingProcessor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, s.Name())
}

func (r *recordingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, s.Name())
}

func (r *recordingProcessor) ForceFlush(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
	return r.flushErr
}

func (r *recordingProcessor) Shutdown(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdowns++
	return r.shutdownErr
}

// TestTailForwards checks that the tail processor passes every start, flush and shutdown
// on to the next processor, with its errors, and only the ends the rules let through.
func TestTailForwards(t *testing.T) {
	errFlush, errShutdown := errors.New("flush"), errors.New("shutdown")
	next := &recordingProcessor{flushErr: errFlush, shutdownErr: errShutdown}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(Sampler(0)), sdktrace.WithSpanProcessor(&tail{next: next, max: 4}))
	tr := tp.Tracer("test")
	ctx, root := tr.Start(context.Background(), "root")
	_, c := tr.Start(ctx, "child")
	c.End()
	root.End()
	_, failed := tr.Start(context.Background(), "failed")
	failed.SetAttributes(ErrorType.String("rejected"))
	failed.End()
	if err := tp.ForceFlush(context.Background()); !errors.Is(err, errFlush) {
		t.Errorf("ForceFlush: %v, want the next processor's %v", err, errFlush)
	}
	if err := tp.Shutdown(context.Background()); !errors.Is(err, errShutdown) {
		t.Errorf("Shutdown: %v, want the next processor's %v", err, errShutdown)
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	if want := []string{"root", "child", "failed"}; !slices.Equal(next.started, want) {
		t.Errorf("started %v, want %v", next.started, want)
	}
	if want := []string{"failed"}; !slices.Equal(next.ended, want) {
		t.Errorf("ended %v, want %v", next.ended, want)
	}
	if next.flushes != 1 || next.shutdowns != 1 {
		t.Errorf("%d flushes and %d shutdowns passed on, want 1 and 1", next.flushes, next.shutdowns)
	}
}
