package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// closedURL returns the URL of a local port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// TestUpstreamFailures checks the answers slogate gives itself when the engine does not
// answer: 502 when it cannot be reached or speaks no HTTP, 504 when its response headers
// do not come in time; both as OpenAI error JSON.
func TestUpstreamFailures(t *testing.T) {
	const stream = `{"model":"sim-tiny","prompt":"hi","max_tokens":5,"stream":true}`
	const plain = `{"model":"sim-tiny","prompt":"hi","max_tokens":5}`
	cases := []struct {
		name     string
		upstream func(t *testing.T) string
		timeout  time.Duration
		header   http.Header
		body     string
		status   int
		outcome  measure.Outcome
	}{
		{name: "down, streaming", upstream: closedURL, body: stream, status: http.StatusBadGateway, outcome: measure.UpstreamError},
		{name: "down", upstream: closedURL, body: plain, status: http.StatusBadGateway, outcome: measure.UpstreamError},
		{name: "not HTTP", upstream: garbageURL, body: stream, status: http.StatusBadGateway, outcome: measure.UpstreamError},
		{name: "timeout, streaming", upstream: simURL, timeout: 100 * time.Millisecond, header: fault("delay=2s"), body: stream, status: http.StatusGatewayTimeout, outcome: measure.UpstreamTimeout},
		{name: "timeout", upstream: simURL, timeout: 100 * time.Millisecond, header: fault("delay=2s"), body: plain, status: http.StatusGatewayTimeout, outcome: measure.UpstreamTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startProxy(t, tc.upstream(t), proxy.Config{InjectUsage: true, UpstreamTimeout: tc.timeout})
			status, header, body := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", tc.body, tc.header)
			if status != tc.status || header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d (%s), want %d with JSON: %s", status, header.Get("Content-Type"), tc.status, body)
			}
			e := apiError(t, body)
			if e.Type != wire.TypeServer || e.Code != tc.status || e.Param != nil {
				t.Errorf("error %+v: want type %s, code %d, no param", e, wire.TypeServer, tc.status)
			}
			o := f.obs.last(t, 1)
			if o.res.Outcome != tc.outcome || o.res.Status != tc.status || o.req.Model != simModel {
				t.Errorf("observed %v, status %d, model %q; want %v, %d, %s", o.res.Outcome, o.res.Status, o.req.Model, tc.outcome, tc.status, simModel)
			}
		})
	}
}

// simURL starts a simulator and returns its URL.
func simURL(t *testing.T) string { return startSim(t, enginesim.Config{}).hs.URL }

// garbageURL starts a server that answers every request with bytes that are not HTTP.
func garbageURL(t *testing.T) string {
	u := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("this is not HTTP\r\n\r\n")
		_ = buf.Flush()
	})
	return u.hs.URL
}

// TestRefused checks the requests slogate answers itself: a body over the limit (413)
// and bodies that are not valid requests (400), as OpenAI error JSON naming the field
// at fault, never forwarded.
func TestRefused(t *testing.T) {
	const limit = 1 << 10
	big := `{"prompt":"` + strings.Repeat("a", limit) + `"}`
	cases := []struct {
		name   string
		path   string
		body   string
		status int
		param  string // "" for none
	}{
		{name: "too large", path: "/v1/completions", body: big, status: http.StatusRequestEntityTooLarge},
		{name: "too large chat", path: "/v1/chat/completions", body: big, status: http.StatusRequestEntityTooLarge},
		{name: "empty body", path: "/v1/completions", body: "", status: http.StatusBadRequest},
		{name: "truncated JSON", path: "/v1/completions", body: `{"prompt":"hi",`, status: http.StatusBadRequest},
		{name: "trailing data", path: "/v1/completions", body: `{"prompt":"hi"} {}`, status: http.StatusBadRequest},
		{name: "not an object", path: "/v1/chat/completions", body: `[1,2]`, status: http.StatusBadRequest},
		{name: "max_tokens a string", path: "/v1/completions", body: `{"prompt":"hi","max_tokens":"ten"}`, status: http.StatusBadRequest, param: "max_tokens"},
		{name: "negative max_tokens", path: "/v1/completions", body: `{"prompt":"hi","max_tokens":-1}`, status: http.StatusBadRequest, param: "max_tokens"},
		{name: "stream a string", path: "/v1/chat/completions", body: `{"messages":[],"stream":"yes"}`, status: http.StatusBadRequest, param: "stream"},
		{name: "model a number", path: "/v1/completions", body: `{"model":7,"prompt":"hi"}`, status: http.StatusBadRequest, param: "model"},
		{name: "include_usage a number", path: "/v1/completions", body: `{"prompt":"hi","stream":true,"stream_options":{"include_usage":1}}`, status: http.StatusBadRequest, param: "stream_options.include_usage"},
		{name: "no prompt", path: "/v1/completions", body: `{"model":"sim-tiny"}`, status: http.StatusBadRequest, param: "prompt"},
		{name: "no messages", path: "/v1/chat/completions", body: `{"model":"sim-tiny","prompt":"hi"}`, status: http.StatusBadRequest, param: "messages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, replay([]byte("data: [DONE]\n\n"), 0))
			f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: true, MaxBodyBytes: limit})
			status, header, body := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, nil)
			if status != tc.status || header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d (%s), want %d with JSON: %s", status, header.Get("Content-Type"), tc.status, body)
			}
			e := apiError(t, body)
			param := ""
			if e.Param != nil {
				param = *e.Param
			}
			if e.Type != wire.TypeInvalidRequest || e.Code != tc.status || param != tc.param || (e.Param != nil) != (tc.param != "") {
				t.Errorf("error %+v (param %q): want type %s, code %d, param %q", e, param, wire.TypeInvalidRequest, tc.status, tc.param)
			}
			if strings.Contains(e.Message, "aaaa") || strings.Contains(e.Message, "ten") {
				t.Errorf("the error message quotes the request: %q", e.Message)
			}
			o := f.obs.last(t, 1)
			if o.res.Outcome != measure.BadRequest || o.res.Status != tc.status || o.req.Route != wire.RouteOf(tc.path) || o.res.Route != o.req.Route {
				t.Errorf("observed %v, status %d, route %v/%v; want bad_request, %d, %v", o.res.Outcome, o.res.Status, o.req.Route, o.res.Route, tc.status, wire.RouteOf(tc.path))
			}
			if n := up.count(); n != 0 {
				t.Errorf("the upstream got %d requests, want none", n)
			}
			if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
				t.Errorf("InFlight = %d, %d after a refused request", n, kv)
			}
		})
	}
}

// TestEngineErrorsPassThrough checks that the engine's own error answers reach the client
// unchanged and are classified by their status.
func TestEngineErrorsPassThrough(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		header  http.Header
		status  int
		outcome measure.Outcome
	}{
		{name: "unknown model", body: `{"model":"gpt-4","prompt":"hi","max_tokens":5}`, status: http.StatusNotFound, outcome: measure.BadRequest},
		{name: "unknown model, streaming", body: `{"model":"gpt-4","prompt":"hi","max_tokens":5,"stream":true}`, status: http.StatusNotFound, outcome: measure.BadRequest},
		{name: "prompt too long", body: `{"model":"sim-tiny","prompt":"hi","max_tokens":5000,"stream":true}`, status: http.StatusBadRequest, outcome: measure.BadRequest},
		{name: "engine 503", body: `{"model":"sim-tiny","prompt":"hi","max_tokens":5,"stream":true}`, header: fault("status=503"), status: http.StatusServiceUnavailable, outcome: measure.UpstreamError},
		{name: "engine 500", body: `{"model":"sim-tiny","prompt":"hi","max_tokens":5}`, header: fault("status=500"), status: http.StatusInternalServerError, outcome: measure.UpstreamError},
	}
	s, f := startEnv(t, enginesim.Config{})
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus, wantHeader, want := do(t, s.hs.Client(), http.MethodPost, s.hs.URL+"/v1/completions", tc.body, tc.header)
			status, header, got := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", tc.body, tc.header)
			if wantStatus != tc.status {
				t.Fatalf("the simulator answers %d, the test expects %d: %s", wantStatus, tc.status, want)
			}
			if status != wantStatus || !bytes.Equal(got, want) || header.Get("Content-Type") != wantHeader.Get("Content-Type") {
				t.Errorf("through slogate: %d %s %s\n        direct: %d %s %s", status, header.Get("Content-Type"), got, wantStatus, wantHeader.Get("Content-Type"), want)
			}
			o := f.obs.last(t, i+1)
			if o.res.Outcome != tc.outcome || o.res.Status != tc.status || o.res.OutputChunks != 0 || o.res.Tokens != measure.TokensNone {
				t.Errorf("observed %+v; want %v, %d, no output", o.res, tc.outcome, tc.status)
			}
		})
	}
}

// TestDropMidstream checks an engine that breaks the connection after 5 tokens: the
// client gets those tokens, an OpenAI error event and then a broken body, never a clean
// end, and the request is reported as aborted midstream.
func TestDropMidstream(t *testing.T) {
	cases := []struct {
		name, path, body string
	}{
		{"completions", "/v1/completions", `{"model":"sim-tiny","prompt":"drop me","max_tokens":50,"ignore_eos":true,"stream":true}`},
		{"chat", "/v1/chat/completions", `{"model":"sim-tiny","messages":[{"role":"user","content":"drop me"}],"max_tokens":50,"ignore_eos":true,"stream":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, f := startEnv(t, enginesim.Config{})
			resp := send(context.Background(), t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, fault("drop_after=5"))
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			got := readSSE(resp.Body, nil)
			if got.err == nil || got.done {
				t.Errorf("client saw a clean end (err %v, [DONE] %v); want a broken stream", got.err, got.done)
			}
			if got.outputs() != 5 {
				t.Errorf("client got %d output chunks before the drop, want 5", got.outputs())
			}
			if e := got.errorEvent(); e == nil || e.Code != http.StatusBadGateway || e.Type != wire.TypeServer {
				t.Errorf("error event %+v; want a server_error with code 502 before the abort", e)
			}
			r := f.obs.last(t, 1).res
			if r.Outcome != measure.AbortedMidstream || r.Ended || r.OutputChunks != 5 || r.OutputTokens != 5 || r.Tokens != measure.TokensChunks || r.Status != http.StatusOK {
				t.Errorf("observed %+v; want aborted_midstream, 5 output chunks counted as tokens", r)
			}
		})
	}
}

// TestClientGoesAway checks that a client that leaves frees the engine: slogate cancels
// the upstream request, the engine aborts it and releases its slot and KV blocks, and the
// request is reported as cancelled (499).
func TestClientGoesAway(t *testing.T) {
	const long = `{"model":"sim-tiny","prompt":"a very long answer","max_tokens":3000,"ignore_eos":true,"stream":true}`
	cases := []struct {
		name    string
		header  http.Header
		ctx     func() (context.Context, context.CancelFunc)
		cancel  bool // cancel after chunks arrived (else the context ends by itself)
		outputs int  // output chunks the client reads (and sees) before it leaves
	}{
		{name: "cancel mid-stream", ctx: cancellable, cancel: true, outputs: 4},
		// The engine stops after 3 tokens but keeps the connection open: only the client's
		// own deadline ends the request.
		{name: "stalled engine, client deadline", header: fault("stall_after=3"), ctx: deadline(time.Second), outputs: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f := startEnv(t, enginesim.Config{})
			abortsBefore := s.aborted()
			ctx, cancel := tc.ctx()
			defer cancel()
			resp := send(ctx, t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", long, tc.header)
			defer resp.Body.Close()
			got := readSSE(resp.Body, func(r sseRead) bool { return tc.cancel && r.outputs() == tc.outputs })
			if got.outputs() != tc.outputs || got.done {
				t.Fatalf("client read %d output chunks (done %v, err %v), want %d", got.outputs(), got.done, got.err, tc.outputs)
			}
			cancel()
			engineFreed(t, s, abortsBefore+1)
			r := f.obs.last(t, 1).res
			if r.Outcome != measure.ClientCancelled || r.Status != proxy.StatusClientClosed || r.Ended {
				t.Errorf("observed %v, status %d, ended %v; want client_cancelled, 499", r.Outcome, r.Status, r.Ended)
			}
			if r.OutputChunks < tc.outputs || r.TTFT <= 0 {
				t.Errorf("observed %d output chunks, TTFT %v; the client saw %d", r.OutputChunks, r.TTFT, tc.outputs)
			}
			if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
				t.Errorf("InFlight = %d, %d after the request ended", n, kv)
			}
		})
	}
}

func cancellable() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func deadline(d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
}

// TestClientGoesAwayBeforeAnswer checks a client that leaves while the engine has not
// answered yet: no answer is written, the request is reported as cancelled (499).
func TestClientGoesAwayBeforeAnswer(t *testing.T) {
	s, f := startEnv(t, enginesim.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.hs.URL+"/v1/completions",
			strings.NewReader(`{"model":"sim-tiny","prompt":"hi","max_tokens":5,"stream":true}`))
		if err != nil {
			errc <- err
			return
		}
		req.Header = fault("delay=1h")
		resp, err := f.hs.Client().Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("got an answer: %d", resp.StatusCode)
		}
		errc <- err
	}()
	// The request has reached the engine (whose fault holds it an hour): it is in flight.
	s.awaitRequests(t, 1)
	if n, _ := f.ledger.InFlight(); n != 1 {
		t.Errorf("%d in flight while the engine holds the request, want 1", n)
	}
	cancel()
	if err := <-errc; !strings.Contains(fmt.Sprint(err), context.Canceled.Error()) {
		t.Errorf("client error %v, want %v", err, context.Canceled)
	}
	r := f.obs.last(t, 1).res
	if r.Outcome != measure.ClientCancelled || r.Status != proxy.StatusClientClosed || r.OutputChunks != 0 {
		t.Errorf("observed %+v; want client_cancelled, 499, no output", r)
	}
}

// TestEngineErrorEvent checks a generation that fails after 5 tokens, which both engines
// end with an error event (vLLM nested under "error", SGLang flat with "object": "error")
// and then still [DONE]: the client gets the event as the engine sent it, and the request
// is reported as engine_error, never ok. The OpenAI SDK raises vLLM's form; SGLang's flat
// form it takes for an empty chunk, and the stream ends without an error — which is why
// slogate must not take the [DONE] after it for success.
func TestEngineErrorEvent(t *testing.T) {
	for _, flavor := range []enginesim.Flavor{enginesim.FlavorVLLM, enginesim.FlavorSGLang} {
		for _, chat := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/chat=%v", flavor, chat), func(t *testing.T) {
				s, f := startEnv(t, enginesim.Config{Flavor: flavor})
				outputs, err := sdkBroken(f.hs.URL, f.hs.Client(), chat, "error_after=5")
				raised := err != nil && strings.Contains(err.Error(), "simulated generation failure")
				if want := flavor == enginesim.FlavorVLLM; raised != want || !want && err != nil {
					t.Errorf("SDK error %v; want it raised: %v", err, want)
				}
				if outputs != 5 {
					t.Errorf("the SDK yielded %d chunks with output before the error, want 5", outputs)
				}
				r := f.obs.last(t, 1).res
				if r.Outcome != measure.EngineError || !r.ErrorEvent || !r.Ended || r.Status != http.StatusOK || r.OutputChunks != 5 {
					t.Errorf("observed %v (error event %v, ended %v, status %d, %d outputs); want engine_error after 5 outputs and [DONE]",
						r.Outcome, r.ErrorEvent, r.Ended, r.Status, r.OutputChunks)
				}
				engineFreed(t, s, 0)
			})
		}
	}
}
