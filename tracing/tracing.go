// Package tracing sets up slogate's OpenTelemetry traces: a tracer provider that exports
// over OTLP (gRPC or HTTP/protobuf) as the standard OTEL_EXPORTER_OTLP_* variables say,
// with a sampler that keeps what an operator needs.
//
// Sampling has two rules, both decided by slogate's proxy, not by the SDK. The head rule
// (Tracing.Head) samples a request whose client sent a sampled traceparent, none whose
// client sent an unsampled one, and a share (Config.SampleRatio) of the others; its
// decision is what the traceparent passed to the engine carries, so the engine's own
// spans follow it. The tail rule keeps, in addition, every request that ended badly
// (failed, rejected, or over its SLO): the proxy keeps what it learns of a request the
// head rule did not sample, and writes its spans, with their times, only when it ends
// badly. So a request that is neither sampled nor kept costs no span at all. Every span
// the pipeline sees is exported: the sampler samples what the proxy starts under
// Export's context, and nothing else.
//
// The package builds the pipeline; what a span says is the proxy's.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Config configures the tracer provider. What it does not say, the OTEL_* variables do.
type Config struct {
	// SampleRatio is the head rule's share, 0-1, of the requests without a parent whose
	// traces are exported whatever their end.
	SampleRatio float64
	// Version is slogate's version, the service.version of the resource.
	Version string
	// Getenv reads the environment for Enabled and the protocol; default os.Getenv. The
	// exporter and the resource read the process's environment themselves, so a
	// replacement is for tests of what New decides, not of what it exports.
	Getenv func(string) string
}

// Tracing is slogate's tracer provider.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	ratio  float64
}

// Name is the instrumentation scope of slogate's spans.
const Name = "github.com/slogate/slogate"

// Enabled reports whether the environment asks for traces: an OTLP endpoint is set, for
// traces or for every signal, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER
// =none says otherwise.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// New returns the tracer provider the environment asks for, or nil when it asks for none
// (Enabled). The exporter takes its endpoint, headers, TLS, compression and timeout from
// the OTEL_EXPORTER_OTLP_* variables and its protocol from
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL: grpc, or
// http/protobuf (the default, as the specification has it); the batch processor its
// limits from OTEL_BSP_*; the resource service.name "slogate" unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES say otherwise. New does not connect: an endpoint that is
// down costs dropped batches, logged by the SDK, not a failed start.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if !Enabled(cfg.Getenv) {
		return nil, nil
	}
	if !(cfg.SampleRatio >= 0 && cfg.SampleRatio <= 1) { // NaN too
		return nil, fmt.Errorf("tracing: the sample ratio %g is not between 0 and 1", cfg.SampleRatio)
	}
	exp, err := newExporter(ctx, cfg.Getenv)
	if err != nil {
		return nil, err
	}
	return NewExporting(ctx, cfg, exp)
}

// NewExporting returns the tracer provider of cfg exporting to exp, whatever the
// environment says of endpoints and protocols: New's pipeline for benchmarks and tests
// that bring their own exporter.
func NewExporting(ctx context.Context, cfg Config, exp sdktrace.SpanExporter) (*Tracing, error) {
	if !(cfg.SampleRatio >= 0 && cfg.SampleRatio <= 1) { // NaN too
		return nil, fmt.Errorf("tracing: the sample ratio %g is not between 0 and 1", cfg.SampleRatio)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("slogate"), semconv.ServiceVersion(cfg.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the above
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(exportSampler{}),
		sdktrace.WithBatcher(exp),
	)
	tracer := tp.Tracer(Name, trace.WithInstrumentationVersion(cfg.Version), trace.WithSchemaURL(semconv.SchemaURL))
	return &Tracing{tp: tp, tracer: tracer, ratio: cfg.SampleRatio}, nil
}

// newExporter returns the OTLP exporter of the protocol the environment names.
func newExporter(ctx context.Context, getenv func(string) string) (*otlptrace.Exporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q is not supported; use grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	return exp, nil
}

// Tracer returns the tracer of slogate's spans.
func (t *Tracing) Tracer() trace.Tracer {
	return t.tracer
}

// Propagator is how slogate reads and writes trace context: W3C traceparent and
// tracestate, which vLLM and SGLang read.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Shutdown exports what is queued and stops the exporter, within ctx.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }
