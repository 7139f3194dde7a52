package proxy_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// teeWriter keeps a copy of what the engine writes.
type teeWriter struct {
	http.ResponseWriter
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w teeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(b)
	w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w teeWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// teeSim serves a simulator through a handler that records the bytes of its last
// answer, so that a test can compare them with what the client got.
type teeSim struct {
	mu   sync.Mutex
	last bytes.Buffer
	hs   *httptest.Server
}

func startTeeSim(t *testing.T, cfg enginesim.Config) *teeSim {
	t.Helper()
	s := startSim(t, cfg)
	ts := &teeSim{}
	ts.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.last.Reset()
		ts.mu.Unlock()
		s.srv.Handler().ServeHTTP(teeWriter{ResponseWriter: w, mu: &ts.mu, buf: &ts.last}, r)
	}))
	t.Cleanup(ts.hs.Close)
	return ts
}

func (ts *teeSim) sent() []byte {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return bytes.Clone(ts.last.Bytes())
}

// sizeTiers admits by prompt size: "small" up to 64 tokens, "large" above.
func sizeTiers(t *testing.T) *admission.Controller {
	t.Helper()
	return newAdmission(t, admission.Enforce, admission.Config{Tiers: []admission.TierConfig{
		{Name: "small", MaxInputTokens: 64, MaxInFlight: 8, MaxQueue: 4, MaxQueueWait: measure.Duration(time.Hour)},
		{Name: "large", MaxInFlight: 8, MaxQueue: 4, MaxQueueWait: measure.Duration(time.Hour)},
	}})
}

// TestRoutesThroughSimulator sends each route's requests through the proxy to the
// simulator of the engine that serves it: the client gets the engine's bytes unchanged,
// the request is admitted in the tier of its prompt size, and the proxy reports the
// route, the outcome and the tokens, with a TTFT for streams only.
func TestRoutesThroughSimulator(t *testing.T) {
	long := strings.Repeat("word ", 80) // about 100 tokens: the large tier
	for _, tc := range []struct {
		name    string
		flavor  enginesim.Flavor
		path    string
		body    string
		fault   string
		route   wire.Route
		outcome measure.Outcome
		output  int
		input   bool // input tokens reported
		stream  bool
		tier    string
		tokens  measure.TokenSource // where the output count comes from
	}{
		{"responses stream", enginesim.FlavorVLLM, "/v1/responses", `{"input":"What is the capital of France?","max_output_tokens":6,"ignore_eos":true,"stream":true}`, "",
			wire.RouteResponses, measure.OK, 6, true, true, "small", measure.TokensUsage},
		{"responses long input", enginesim.FlavorVLLM, "/v1/responses", `{"input":[{"role":"user","content":[{"type":"input_text","text":"` + long + `"}]}],"max_output_tokens":3,"ignore_eos":true,"stream":true}`, "",
			wire.RouteResponses, measure.OK, 3, true, true, "large", measure.TokensUsage},
		{"responses broken off", enginesim.FlavorVLLM, "/v1/responses", `{"input":"hi","max_output_tokens":6,"ignore_eos":true,"stream":true}`, "error_after=2",
			wire.RouteResponses, measure.AbortedMidstream, 2, false, true, "small", measure.TokensChunks},
		{"responses body", enginesim.FlavorVLLM, "/v1/responses", `{"input":"hi","max_output_tokens":5,"ignore_eos":true}`, "",
			wire.RouteResponses, measure.OK, 5, true, false, "small", measure.TokensUsage},
		{"generate stream", enginesim.FlavorSGLang, "/generate", `{"text":"What is the capital of France?","sampling_params":{"max_new_tokens":5,"ignore_eos":true},"stream":true}`, "",
			wire.RouteGenerate, measure.OK, 5, true, true, "small", measure.TokensUsage},
		{"generate long ids", enginesim.FlavorSGLang, "/generate", `{"input_ids":[` + strings.TrimSuffix(strings.Repeat("300,", 100), ",") + `],"sampling_params":{"max_new_tokens":2,"ignore_eos":true},"stream":true}`, "",
			wire.RouteGenerate, measure.OK, 2, true, true, "large", measure.TokensUsage},
		{"generate abort", enginesim.FlavorSGLang, "/generate", `{"text":"hi","sampling_params":{"max_new_tokens":5,"ignore_eos":true},"stream":true}`, "error_after=2",
			wire.RouteGenerate, measure.EngineError, 2, true, true, "small", measure.TokensUsage},
		{"generate body", enginesim.FlavorSGLang, "/generate", `{"text":"hi","sampling_params":{"max_new_tokens":4,"ignore_eos":true}}`, "",
			wire.RouteGenerate, measure.OK, 4, true, false, "small", measure.TokensUsage},
		{"embeddings", enginesim.FlavorVLLM, "/v1/embeddings", `{"input":"embed these words"}`, "",
			wire.RouteEmbeddings, measure.OK, 0, true, false, "small", measure.TokensUsage},
		{"embeddings long", enginesim.FlavorSGLang, "/v1/embeddings", `{"input":["` + long + `"]}`, "",
			wire.RouteEmbeddings, measure.OK, 0, true, false, "large", measure.TokensUsage},
		{"rerank", enginesim.FlavorVLLM, "/v1/rerank", `{"query":"capital of France","documents":["Paris","Lyon"]}`, "",
			wire.RouteRerank, measure.OK, 0, true, false, "small", measure.TokensUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := startTeeSim(t, enginesim.Config{Flavor: tc.flavor})
			f := startProxy(t, sim.hs.URL, proxy.Config{InjectUsage: true, Admission: sizeTiers(t)})
			var h http.Header
			if tc.fault != "" {
				h = fault(tc.fault)
			}
			resp := send(t.Context(), t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, h)
			var got bytes.Buffer
			_, _ = got.ReadFrom(resp.Body)
			resp.Body.Close()
			o := f.obs.last(t, 1)
			res := o.res
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got.Bytes())
			}
			if tc.outcome == measure.OK && !bytes.Equal(got.Bytes(), sim.sent()) {
				t.Errorf("the client got\n%q\nthe engine sent\n%q", got.Bytes(), sim.sent())
			}
			if res.Route != tc.route || o.req.Route != tc.route || res.Outcome != tc.outcome || res.OutputTokens != tc.output || res.Tier != tc.tier {
				t.Errorf("route %v/%v outcome %v output %d tier %q; want %v %v %d %q", res.Route, o.req.Route, res.Outcome, res.OutputTokens, res.Tier, tc.route, tc.outcome, tc.output, tc.tier)
			}
			if (res.InputTokens > 0) != tc.input || res.Tokens != tc.tokens {
				t.Errorf("input tokens %d (want some: %v), token source %v (want %v)", res.InputTokens, tc.input, res.Tokens, tc.tokens)
			}
			if (res.TTFT > 0) != tc.stream || (res.TPOT > 0) != (tc.stream && tc.output > 1) {
				t.Errorf("TTFT %v TPOT %v for stream=%v", res.TTFT, res.TPOT, tc.stream)
			}
		})
	}
}

// TestUsageInjectionOnlyForOpenAIStreams: slogate adds stream_options to completions and
// chat streams only; the Responses API and /generate report usage on their own and
// would not understand it.
func TestUsageInjectionOnlyForOpenAIStreams(t *testing.T) {
	for _, tc := range []struct {
		path, body string
		injected   bool
	}{
		{"/v1/completions", `{"prompt":"hi","stream":true}`, true},
		{"/v1/responses", `{"input":"hi","stream":true}`, false},
		{"/generate", `{"text":"hi","stream":true}`, false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: [DONE]\n\n"))
			})
			f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: true})
			do(t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, nil)
			rs := up.requests()
			if len(rs) != 1 {
				t.Fatalf("%d requests reached the engine", len(rs))
			}
			if got := string(rs[0].body) != tc.body; got != tc.injected {
				t.Errorf("the engine got %s; injected=%v, want %v", rs[0].body, got, tc.injected)
			}
		})
	}
}
