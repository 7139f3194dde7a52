package enginesim

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// TracerProvider returns the tracer provider vLLM sets up for --otlp-traces-endpoint
// (vllm/tracing.py, init_tracer and get_span_exporter): a batch span processor in front
// of an OTLP exporter to endpoint, over gRPC when protocol is "grpc" or empty (vLLM's
// default) and over HTTP with protobuf when it is "http/protobuf"; any other protocol is
// an error, as in vLLM. The endpoint is used as given, path included, as Python's
// exporters use theirs; a scheme other than https is plaintext. The sampler is the SDK's
// default, ParentBased(AlwaysSample) unless OTEL_TRACES_SAMPLER says otherwise, as in
// Python's SDK, and the resource's service.name is "enginesim".
func TracerProvider(ctx context.Context, endpoint, protocol string) (*sdktrace.TracerProvider, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--otlp-traces-endpoint %q: want a URL such as http://localhost:4317", endpoint)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("enginesim")), resource.WithTelemetrySDK())
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "", "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	case "http/protobuf":
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("--otlp-traces-endpoint %q: OTLP/HTTP wants an http or https URL", endpoint)
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL %q: unsupported OTLP protocol; want grpc (the default) or http/protobuf, as vLLM", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("--otlp-traces-endpoint: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
