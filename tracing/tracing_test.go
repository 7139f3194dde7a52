package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// TestMain checks that no test leaves a goroutine behind: New's batch processor and the
// exporters' clients must stop with Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// otelEnv is every variable that steers New or its exporters, so that a test starts from
// none of them set, whatever the environment it runs in.
var otelEnv = []string{
	"OTEL_SDK_DISABLED",
	"OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_EXPORTER_OTLP_INSECURE",
	"OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	"OTEL_EXPORTER_OTLP_TIMEOUT",
	"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
	"OTEL_EXPORTER_OTLP_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_SERVICE_NAME",
	"OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_BSP_SCHEDULE_DELAY",
	"OTEL_BSP_EXPORT_TIMEOUT",
	"OTEL_BSP_MAX_QUEUE_SIZE",
	"OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
}

// setEnv clears otelEnv and then sets env, for the test's duration. The OTEL SDK and
// exporters read an empty variable as unset.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestEnabled(t *testing.T) {
	const ep = "http://collector:4318"
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"unrelated variables", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, true},
		{"both endpoints", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep}, true},
		{"metrics endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": ep}, false},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SDK_DISABLED": "true"}, false},
		{"sdk disabled upper case", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep, "OTEL_SDK_DISABLED": "TRUE"}, false},
		{"sdk not disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SDK_DISABLED": "false"}, true},
		{"traces exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}, false},
		{"traces exporter none, traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}, false},
		{"traces exporter otlp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "otlp"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Enabled(mapEnv(tt.env)); got != tt.want {
				t.Errorf("Enabled(%v) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
}

// TestEnabledProcessEnv checks that a nil getenv reads the process environment.
func TestEnabledProcessEnv(t *testing.T) {
	setEnv(t, nil)
	if Enabled(nil) {
		t.Error("Enabled(nil) = true with no endpoint in the environment")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	if !Enabled(nil) {
		t.Error("Enabled(nil) = false with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
}

// TestNewWithout checks the configurations New builds nothing of, without an error or
// with one.
func TestNewWithout(t *testing.T) {
	const ep = "http://127.0.0.1:4318"
	tests := []struct {
		name    string
		cfg     Config
		env     map[string]string
		wantErr []string // substrings of the error; none means no error
	}{
		{"no endpoint", Config{}, nil, nil},
		{"no endpoint, protocol set", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, nil},
		{"sdk disabled", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SDK_DISABLED": "true"}, nil},
		{"traces exporter none", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}, nil},
		{"http/json", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, []string{`"http/json"`, "not supported"}},
		{"traces protocol http/json over grpc", Config{}, map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
		}, []string{`"http/json"`}},
		{"unknown protocol", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, []string{`"thrift"`}},
		{"ratio above 1", Config{SampleRatio: 1.5}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, []string{"1.5", "sample ratio"}},
		{"ratio below 0", Config{SampleRatio: -0.1}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, []string{"-0.1", "sample ratio"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Getenv = mapEnv(tt.env)
			tr, err := New(context.Background(), cfg)
			if tr != nil {
				t.Errorf("New returned a provider, want nil")
				if err := tr.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Errorf("New: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New: no error, want one mentioning %q", tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("New: %q does not mention %q", err, s)
				}
			}
		})
	}
}

// TestNewProcessEnv checks that a nil Config.Getenv reads the process environment.
func TestNewProcessEnv(t *testing.T) {
	setEnv(t, nil)
	tr, err := New(context.Background(), Config{})
	if tr != nil || err != nil {
		t.Fatalf("New = %v, %v without an endpoint, want nil, nil", tr, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := New(context.Background(), Config{}); err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Errorf("New: %v, want the unsupported protocol from the process environment", err)
	}
}

// TestNewProvider builds working providers of either protocol and checks what New set.
// Nothing is exported, so nothing connects.
func TestNewProvider(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"default protocol", nil},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{"traces protocol grpc over http", map[string]string{
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
			tr, err := New(context.Background(), Config{SampleRatio: 0.5, Version: "v0.0.1", Getenv: mapEnv(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:4318",
				"OTEL_EXPORTER_OTLP_PROTOCOL":        tt.env["OTEL_EXPORTER_OTLP_PROTOCOL"],
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": tt.env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"],
			})})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if tr == nil {
				t.Fatal("New returned nil with an endpoint set")
			}
			if tr.Tracer() == nil {
				t.Error("Tracer() = nil")
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

func TestPropagator(t *testing.T) {
	if got := Propagator.Fields(); !slices.Equal(got, []string{"traceparent", "tracestate"}) {
		t.Errorf("Propagator.Fields() = %v, want traceparent and tracestate", got)
	}
}

// collector is an OTLP trace receiver of either protocol, which keeps what it receives.
type collector struct {
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (c *collector) add(r *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, r)
}

// spans returns every span received, with the resource and scope it came under.
func (c *collector) spans() []receivedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []receivedSpan
	for _, r := range c.reqs {
		for _, rs := range r.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, receivedSpan{resource: rs.GetResource().GetAttributes(), scope: ss.GetScope(), schemaURL: ss.GetSchemaUrl(), span: s})
				}
			}
		}
	}
	return out
}

type receivedSpan struct {
	resource  []*commonpb.KeyValue
	scope     *commonpb.InstrumentationScope
	schemaURL string
	span      *tracepb.Span
}

func attr(kvs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue(), true
		}
	}
	return "", false
}

// httpCollector serves OTLP/HTTP with protobuf bodies at /v1/traces.
func httpCollector(t *testing.T) (*collector, *httptest.Server) {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			t.Errorf("collector: %s %s, want POST /v1/traces", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			t.Errorf("collector: Content-Type %q", ct)
		}
		if ce := r.Header.Get("Content-Encoding"); ce != "" {
			t.Errorf("collector: Content-Encoding %q with no compression asked for", ce)
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("collector: reading the body: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			t.Errorf("collector: decoding the body: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.add(req)
		resp, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		if err != nil {
			t.Errorf("collector: %v", err)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return c, srv
}

type grpcCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	c *collector
}

func (g grpcCollector) Export(_ context.Context, r *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.c.add(r)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// grpcCollectorServer serves OTLP/gRPC without TLS; it returns the collector and its
// address.
func grpcCollectorServer(t *testing.T) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcCollector{c: c})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("grpc Serve: %v", err)
		}
	})
	return c, lis.Addr().String()
}

// TestExport runs New's whole pipeline against a collector: a span started under Export
// is exported on Shutdown, one started without it is not, and the resource and scope are
// slogate's unless the environment says otherwise.
func TestExport(t *testing.T) {
	tests := []struct {
		name        string
		grpc        bool
		env         func(url string) map[string]string
		wantService string
		wantAttr    map[string]string // more resource attributes
	}{
		{
			name:        "http default",
			env:         func(url string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url} },
			wantService: "slogate",
		},
		{
			name: "http/protobuf traces endpoint",
			env: func(url string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url + "/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
			},
			wantService: "slogate",
		},
		{
			name: "http service name from OTEL_SERVICE_NAME",
			env: func(url string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SERVICE_NAME": "gateway"}
			},
			wantService: "gateway",
		},
		{
			name: "http resource attributes",
			env: func(url string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_RESOURCE_ATTRIBUTES": "service.name=edge,deployment.environment.name=test"}
			},
			wantService: "edge",
			wantAttr:    map[string]string{"deployment.environment.name": "test"},
		},
		{
			name: "http malformed resource attributes",
			env: func(url string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_RESOURCE_ATTRIBUTES": "junk,team=infer"}
			},
			wantService: "slogate",
			wantAttr:    map[string]string{"team": "infer"},
		},
		{
			name: "grpc",
			grpc: true,
			env: func(url string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
			},
			wantService: "slogate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				c   *collector
				url string
			)
			if tt.grpc {
				var addr string
				c, addr = grpcCollectorServer(t)
				url = "http://" + addr
			} else {
				var srv *httptest.Server
				c, srv = httpCollector(t)
				url = srv.URL
			}
			setEnv(t, tt.env(url))
			const version = "v1.2.3"
			tr, err := New(context.Background(), Config{Version: version, Getenv: os.Getenv})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if tr == nil {
				t.Fatal("New returned nil")
			}

			_, failed := tr.Tracer().Start(Export(context.Background()), "failed", trace.WithSpanKind(trace.SpanKindServer))
			failed.SetAttributes(attribute.String("error.type", "rejected"), attribute.String("http.route", "/v1/chat/completions"))
			failed.End()
			_, ok := tr.Tracer().Start(context.Background(), "ok")
			ok.End()

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}

			got := c.spans()
			if len(got) != 1 {
				var ns []string
				for _, s := range got {
					ns = append(ns, s.span.GetName())
				}
				t.Fatalf("collector received %v, want only the failed span", ns)
			}
			s := got[0]
			if s.span.GetName() != "failed" {
				t.Errorf("received %q, want failed", s.span.GetName())
			}
			sc := failed.SpanContext()
			if tid := sc.TraceID(); string(s.span.GetTraceId()) != string(tid[:]) {
				t.Errorf("trace id %x, want %s", s.span.GetTraceId(), tid)
			}
			if sid := sc.SpanID(); string(s.span.GetSpanId()) != string(sid[:]) {
				t.Errorf("span id %x, want %s", s.span.GetSpanId(), sid)
			}
			if len(s.span.GetParentSpanId()) != 0 {
				t.Errorf("parent span id %x, want none", s.span.GetParentSpanId())
			}
			if s.span.GetFlags()&uint32(trace.FlagsSampled) == 0 {
				t.Errorf("flags %#x without the sampled bit", s.span.GetFlags())
			}
			if s.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("kind %v, want server", s.span.GetKind())
			}
			if v, _ := attr(s.span.GetAttributes(), "error.type"); v != "rejected" {
				t.Errorf("error.type = %q, want rejected", v)
			}
			if v, _ := attr(s.resource, "service.name"); v != tt.wantService {
				t.Errorf("service.name = %q, want %q", v, tt.wantService)
			}
			if v, _ := attr(s.resource, "service.version"); v != version {
				t.Errorf("service.version = %q, want %q", v, version)
			}
			if v, _ := attr(s.resource, "telemetry.sdk.language"); v != "go" {
				t.Errorf("telemetry.sdk.language = %q, want go", v)
			}
			for k, want := range tt.wantAttr {
				if v, _ := attr(s.resource, k); v != want {
					t.Errorf("resource %s = %q, want %q", k, v, want)
				}
			}
			if s.scope.GetName() != Name || s.scope.GetVersion() != version {
				t.Errorf("scope %q %q, want %q %q", s.scope.GetName(), s.scope.GetVersion(), Name, version)
			}
			if s.schemaURL != semconv.SchemaURL {
				t.Errorf("scope schema URL %q, want %q", s.schemaURL, semconv.SchemaURL)
			}
		})
	}
}
