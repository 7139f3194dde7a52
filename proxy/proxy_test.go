package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// TestAccuracy checks slogate's measurement against the simulator's own: with every
// engine step taking a fixed time, the TTFT and TPOT the Observer gets for each request
// must equal the simulator's per-request TTFT and TPOT (read from its /metrics, one
// request at a time). It runs on virtual time: in a testing/synctest bubble, with the
// simulator, the proxy and the client on an in-memory network (internal/memnet), where
// the machine's time adds nothing to either clock, so the two must agree to the
// microsecond however loaded the machine is. (On the wall clock the test allowed 2 ms or
// 2% and sent a request that missed again, up to ten times.) A TTFT that ends at the
// wrong chunk is a step (20 ms) off and a TPOT over the wrong number of intervals a
// twentieth of one; either fails. This compares measured values with ground truth; what
// the proxy costs on the wall clock is bench/proxy.sh's (docs/benchmarks.md).
func TestAccuracy(t *testing.T) {
	cases := []struct {
		name, path, body string
	}{
		{
			name: "completions",
			path: "/v1/completions",
			body: `{"model":"sim-tiny","prompt":"how fast is it","max_tokens":20,"ignore_eos":true,"stream":true}`,
		},
		{
			name: "chat",
			path: "/v1/chat/completions",
			body: `{"model":"sim-tiny","messages":[{"role":"user","content":"how fast is it"}],"max_tokens":20,"ignore_eos":true,"stream":true}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Every step takes 20 ms: a short prompt is prefilled in one step, which
				// yields the first token, and every later step yields one token.
				p := tinyProfile(t, func(p *enginesim.Profile) {
					p.Timing = enginesim.Timing{StepBase: accuracyStep.Seconds()}
					p.APILatency = 0
				})
				env := startVirtualEnv(t, enginesim.Config{Profile: p}, proxy.Config{InjectUsage: true})
				for n := 1; n <= accuracyRequests; n++ {
					got, ttft, tpot := accuracySample(t, env, tc.path, tc.body, n)
					exactly(t, fmt.Sprintf("request %d TTFT", n), got.TTFT, ttft)
					exactly(t, fmt.Sprintf("request %d TPOT", n), got.TPOT, tpot)
				}
			})
		})
	}
}

// The accuracy test sends accuracyRequests requests of accuracyTokens tokens each to an
// engine whose every step takes accuracyStep.
const (
	accuracyStep     = 20 * time.Millisecond
	accuracyTokens   = 20
	accuracyRequests = 5
)

// accuracySample sends the n-th request of an accuracy test and returns what slogate
// measured and the simulator's own TTFT and TPOT of it.
func accuracySample(t *testing.T, env *virtualEnv, path, body string, n int) (measure.Result, time.Duration, time.Duration) {
	t.Helper()
	engine := env.engine.Client
	before := scrapeHistograms(t, engine, env.engine.URL+"/metrics")
	status, _, answer := do(t, env.slogate.Client, http.MethodPost, env.slogate.URL+path, body, nil)
	if status != http.StatusOK {
		t.Fatalf("request %d: status %d: %s", n, status, answer)
	}
	after := scrapeHistograms(t, engine, env.engine.URL+"/metrics")
	ttft := truth(t, before, after, "vllm:time_to_first_token_seconds")
	tpot := truth(t, before, after, "vllm:request_time_per_output_token_seconds")
	got := env.obs.last(t, n).res
	if got.Outcome != measure.OK || got.OutputTokens != accuracyTokens || got.Tokens != measure.TokensUsage {
		t.Fatalf("request %d: outcome %v, %d output tokens from %v; want ok, %d from usage", n, got.Outcome, got.OutputTokens, got.Tokens, accuracyTokens)
	}
	return got, ttft, tpot
}

// truth returns the one observation a histogram of the simulator gained between two
// scrapes.
func truth(t *testing.T, before, after map[string]histogram, name string) time.Duration {
	t.Helper()
	b, a := before[name], after[name]
	if a.count != b.count+1 {
		t.Fatalf("%s: count went from %d to %d, want one more", name, b.count, a.count)
	}
	return time.Duration(math.Round((a.sum - b.sum) * float64(time.Second)))
}

// exactly fails the test unless got is within a microsecond of want: on virtual time
// the two clocks agree but for the rounding of the simulator's histogram sums.
func exactly(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	t.Logf("%s: slogate %v, simulator %v", what, got, want)
	if want <= 0 || (got-want).Abs() > time.Microsecond {
		t.Errorf("%s: slogate %v, simulator %v: off by %v on virtual time", what, got, want, got-want)
	}
}

// TestInjectedBody checks the body slogate forwards: stream_options asking for usage
// appended when slogate injects it, the client's bytes untouched otherwise, and a
// Content-Length that matches.
func TestInjectedBody(t *testing.T) {
	const (
		usage      = `,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}`
		continuous = `,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`
	)
	cases := []struct {
		name   string
		inject bool
		path   string
		body   string
		want   string // the forwarded body; the client's when empty
	}{
		{
			name:   "completions stream",
			inject: true,
			path:   "/v1/completions",
			body:   `{"model":"m","prompt":"hi","stream":true}`,
			want:   `{"model":"m","prompt":"hi","stream":true` + usage,
		},
		{
			name:   "chat stream, spaces and unicode kept",
			inject: true,
			path:   "/v1/chat/completions",
			body:   "{ \"messages\" : [ {\"role\":\"user\",\"content\":\"h\\u00e9 \u00e9}\"} ] ,\n \"stream\" : true }",
			want:   "{ \"messages\" : [ {\"role\":\"user\",\"content\":\"h\\u00e9 \u00e9}\"} ] ,\n \"stream\" : true " + usage,
		},
		{
			name:   "client said include_usage false",
			inject: true,
			path:   "/v1/completions",
			body:   `{"prompt":"hi","stream":true,"stream_options":{"include_usage":false}}`,
			want:   `{"prompt":"hi","stream":true,"stream_options":{"include_usage":false}` + usage,
		},
		{
			name:   "client said stream_options null",
			inject: true,
			path:   "/v1/completions",
			body:   `{"prompt":"hi","stream_options":null,"stream":true}`,
			want:   `{"prompt":"hi","stream_options":null,"stream":true` + usage,
		},
		{
			name:   "whitespace after the object kept",
			inject: true,
			path:   "/v1/completions",
			body:   "{\"prompt\":\"hi\",\"stream\":true}\r\n\t ",
			want:   `{"prompt":"hi","stream":true` + usage + "\r\n\t ",
		},
		{name: "inject off", path: "/v1/completions", body: `{"prompt":"hi","stream":true}`},
		{name: "client asked for usage", inject: true, path: "/v1/completions", body: `{"prompt":"hi","stream":true,"stream_options":{"include_usage":true}}`},
		{
			// vLLM ignores continuous_usage_stats without include_usage: slogate adds it.
			name:   "client asked for continuous usage alone",
			inject: true,
			path:   "/v1/chat/completions",
			body:   `{"messages":[],"stream":true,"stream_options":{"continuous_usage_stats":true}}`,
			want:   `{"messages":[],"stream":true,"stream_options":{"continuous_usage_stats":true}` + continuous,
		},
		{
			name:   "client asked for continuous usage at top level",
			inject: true,
			path:   "/v1/completions",
			body:   `{"prompt":"hi","stream":true,"continuous_usage_stats":true}`,
			want:   `{"prompt":"hi","stream":true,"continuous_usage_stats":true` + continuous,
		},
		{name: "client asked for usage and continuous usage", inject: true, path: "/v1/completions", body: `{"prompt":"hi","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`},
		{name: "not streaming", inject: true, path: "/v1/completions", body: `{"prompt":"hi","stream":false}`},
		{name: "stream absent", inject: true, path: "/v1/chat/completions", body: `{"messages":[]}`},
	}
	answer := []byte("data: [DONE]\n\n")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, replay(answer, 0))
			f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: tc.inject})
			header := http.Header{"Accept-Encoding": {"gzip"}, "X-Request-Id": {"r1"}}
			status, _, got := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, header)
			if status != http.StatusOK || !bytes.Equal(got, answer) {
				t.Fatalf("client got %d %q, want 200 %q", status, got, answer)
			}
			want := tc.want
			if want == "" {
				want = tc.body
			}
			checkForwarded(t, up, tc.path, want)
			if o := f.obs.last(t, 1); o.res.Outcome != measure.OK || !o.res.Ended {
				t.Errorf("observed %v, ended %v; want ok, ended", o.res.Outcome, o.res.Ended)
			}
		})
	}
}

// checkForwarded checks the one request up got: sent to path with body want, a
// Content-Length that matches it, the client's headers but no content coding.
func checkForwarded(t *testing.T, up *upstream, path, want string) {
	t.Helper()
	rs := up.requests()
	if len(rs) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(rs))
	}
	r := rs[0]
	if string(r.body) != want {
		t.Errorf("forwarded body:\n got %q\nwant %q", r.body, want)
	}
	if !json.Valid(r.body) {
		t.Errorf("forwarded body is not valid JSON: %s", r.body)
	}
	if r.length != int64(len(r.body)) || r.header.Get("Content-Length") != fmt.Sprint(len(r.body)) {
		t.Errorf("Content-Length: request %d, header %q; body has %d bytes", r.length, r.header.Get("Content-Length"), len(r.body))
	}
	if r.method != http.MethodPost || r.path != path || r.header.Get("X-Request-Id") != "r1" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("forwarded %s %s with headers %v", r.method, r.path, r.header)
	}
	if ae := r.header.Get("Accept-Encoding"); ae != "" {
		t.Errorf("forwarded Accept-Encoding %q, want none (the response must be measurable)", ae)
	}
}

// TestNonStreaming checks that a non-streaming answer passes through unchanged and is
// measured: end-to-end time and tokens, but no TTFT or TPOT.
func TestNonStreaming(t *testing.T) {
	cases := []struct {
		name  string
		route wire.Route
		path  string
		body  string
	}{
		{"completions", wire.RouteCompletions, "/v1/completions", `{"model":"sim-tiny","prompt":"tell me","max_tokens":7,"ignore_eos":true}`},
		{"chat", wire.RouteChatCompletions, "/v1/chat/completions", `{"model":"sim-tiny","messages":[{"role":"user","content":"tell me"}],"max_tokens":9}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, f := startEnv(t, enginesim.Config{})
			status, header, body := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, nil)
			if status != http.StatusOK || header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, Content-Type %q: %s", status, header.Get("Content-Type"), body)
			}
			resp, err := wire.DecodeResponse(body)
			if err != nil || resp.Usage == nil {
				t.Fatalf("decoding the answer: %v (usage %v): %s", err, resp.Usage, body)
			}
			reason, _ := resp.Finished()

			o := f.obs.last(t, 1)
			got := o.res
			if o.req.Route != tc.route || o.req.Stream || got.Route != tc.route || got.Stream {
				t.Errorf("observed route %v/%v stream %v/%v, want %v non-streaming", o.req.Route, got.Route, o.req.Stream, got.Stream, tc.route)
			}
			if got.Outcome != measure.OK || got.Status != http.StatusOK || !got.Ended {
				t.Errorf("outcome %v, status %d, ended %v; want ok, 200, ended", got.Outcome, got.Status, got.Ended)
			}
			if got.TTFT != 0 || got.TPOT != 0 || got.MaxGap != 0 {
				t.Errorf("TTFT %v, TPOT %v, max gap %v; want all zero for a non-streaming answer", got.TTFT, got.TPOT, got.MaxGap)
			}
			if got.E2E <= 0 {
				t.Errorf("E2E = %v, want > 0", got.E2E)
			}
			if got.Tokens != measure.TokensUsage || got.InputTokens != resp.Usage.PromptTokens || got.OutputTokens != resp.Usage.CompletionTokens || got.OutputTokens == 0 {
				t.Errorf("tokens %d in, %d out from %v; the answer's usage says %+v", got.InputTokens, got.OutputTokens, got.Tokens, *resp.Usage)
			}
			if got.FinishReason != reason || reason == "" {
				t.Errorf("finish reason %q, answer has %q", got.FinishReason, reason)
			}
		})
	}
}

// TestOtherPathsPassThrough checks that requests other than POSTs to the two inference
// routes reach the engine untouched and are not reported.
func TestOtherPathsPassThrough(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   int
		contains                 string
	}{
		{name: "models", method: http.MethodGet, path: "/v1/models", status: http.StatusOK, contains: `"id":"sim-tiny"`},
		{name: "health", method: http.MethodGet, path: "/health", status: http.StatusOK},
		{name: "metrics", method: http.MethodGet, path: "/metrics", status: http.StatusOK, contains: "vllm:num_requests_running"},
		{name: "GET completions", method: http.MethodGet, path: "/v1/completions", status: http.StatusNotFound, contains: "GET /v1/completions"},
		{name: "tokenize", method: http.MethodPost, path: "/tokenize", body: `{"prompt":"hello world"}`, status: http.StatusOK, contains: `"count":`},
		{name: "trailing slash", method: http.MethodPost, path: "/v1/completions/", body: `not json`, status: http.StatusNotFound},
		{name: "unknown path", method: http.MethodPost, path: "/v2/whatever?x=1", body: `{}`, status: http.StatusNotFound},
	}
	s, f := startEnv(t, enginesim.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus, wantHeader, want := do(t, s.hs.Client(), tc.method, s.hs.URL+tc.path, tc.body, nil)
			status, header, got := do(t, f.hs.Client(), tc.method, f.hs.URL+tc.path, tc.body, nil)
			if wantStatus != tc.status || !strings.Contains(string(want), tc.contains) {
				t.Fatalf("the simulator answers %d %s, the test expects %d with %q", wantStatus, want, tc.status, tc.contains)
			}
			if tc.name == "metrics" { // its values move between scrapes
				want, got = want[:0], got[:0]
			}
			want, got = createdSeconds.ReplaceAll(want, nil), createdSeconds.ReplaceAll(got, nil)
			if status != wantStatus || !bytes.Equal(got, want) {
				t.Errorf("through the proxy: %d %s\n           direct: %d %s", status, got, wantStatus, want)
			}
			if header.Get("Content-Type") != wantHeader.Get("Content-Type") {
				t.Errorf("Content-Type %q, direct %q", header.Get("Content-Type"), wantHeader.Get("Content-Type"))
			}
		})
	}
	if n := f.obs.count(); n != 0 {
		t.Errorf("observer called %d times for non-inference requests: %+v", n, f.obs.all())
	}
	if st := s.srv.Stats(); sum(st.FinishedByReason) != 0 || st.Running != 0 || st.Waiting != 0 {
		t.Errorf("the engine ran requests: %+v", st)
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestInFlight checks admission's ledger while streams are open through the proxy: one
// request and the prompt plus the output so far per stream; nothing once they are gone.
func TestInFlight(t *testing.T) {
	const (
		streams = 3
		prompt  = ledgerPrompt // token ids, so admission knows the prompt length exactly
	)
	body := ledgerBody(3000, true)

	s, f := startEnv(t, enginesim.Config{})
	if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
		t.Fatalf("InFlight before any request = %d, %d; want 0, 0", n, kv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bodies []*http.Response
	for range streams {
		resp := send(ctx, t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", body, nil)
		defer resp.Body.Close()
		bodies = append(bodies, resp)
	}
	// Once every client has an output chunk, the proxy has reported it to the ticket.
	for i, resp := range bodies {
		got := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() > 0 })
		if got.outputs() == 0 {
			t.Fatalf("stream %d: no output before %v", i, got.err)
		}
	}
	n, kv := f.ledger.InFlight()
	if n != streams || kv < streams*(prompt+1) {
		t.Errorf("InFlight with %d open streams = %d requests, %d KV tokens; want %d, >= %d", streams, n, kv, streams, streams*(prompt+1))
	}
	if kv > streams*(prompt+3000) {
		t.Errorf("InFlight KV tokens = %d, more than the streams can hold (%d)", kv, streams*(prompt+3000))
	}
	cancel()
	// A request leaves the in-flight count before it is reported.
	for _, o := range f.obs.wait(t, streams) {
		if o.res.Outcome != measure.ClientCancelled {
			t.Errorf("outcome %v, want client_cancelled", o.res.Outcome)
		}
	}
	if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
		t.Errorf("InFlight once every request is reported = %d requests, %d KV tokens; want 0, 0", n, kv)
	}
	s.await(t, "engine idle", func(st enginesim.Stats) (bool, string) {
		return st.Running == 0 && st.UsedBlocks == 0, fmt.Sprintf("%+v", st)
	})
}

// TestProbeRequestsStayOutOfLiveMetrics: a request of the probe class is forwarded and
// measured like any other, but observers (the live metrics) never see it, and the
// ledger's LiveInFlight leaves it out while InFlight counts it.
func TestProbeRequestsStayOutOfLiveMetrics(t *testing.T) {
	s := startSim(t, enginesim.Config{Profile: tinyProfile(t, nil)})
	logged := &accessLog{}
	f := startProxy(t, s.hs.URL, proxy.Config{InjectUsage: true, ProbeKey: "k3y", Logger: slog.New(logged)})
	body := `{"prompt":"probe me","max_tokens":400,"ignore_eos":true,"stream":true}`
	req, err := http.NewRequest(http.MethodPost, f.hs.URL+"/v1/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Slogate-Priority", "probe")
	req.Header.Set(proxy.ProbeKeyHeader, "k3y")
	resp, err := f.hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.ledger.InFlight(); n != 1 {
		t.Errorf("InFlight = %d while a probe streams, want 1", n)
	}
	if n, kv := f.ledger.LiveInFlight(); n != 0 || kv != 0 {
		t.Errorf("LiveInFlight = %d, %d while only a probe streams, want 0, 0", n, kv)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	logged.await(t, 1) // the probe has ended and been reported
	if n, _ := f.ledger.InFlight(); n != 0 {
		t.Errorf("InFlight = %d once the probe is reported, want 0", n)
	}
	if got := f.obs.count(); got != 0 {
		t.Errorf("observers saw %d probe requests, want 0", got)
	}
}

// Only trusted requests may claim the probe class and so hide from the live metrics:
// the others are served, and counted, as interactive.
func TestProbeClassNeedsTrust(t *testing.T) {
	s := startSim(t, enginesim.Config{Profile: tinyProfile(t, nil)})
	cases := []struct {
		name   string
		cfg    proxy.Config
		key    string
		hidden bool // kept out of the observers, as a probe
	}{
		{"no key configured", proxy.Config{}, "", false},
		{"wrong key", proxy.Config{ProbeKey: "k3y"}, "guess", false},
		{"no key sent", proxy.Config{ProbeKey: "k3y"}, "", false},
		{"the key", proxy.Config{ProbeKey: "k3y"}, "k3y", true},
		{"clients trusted", proxy.Config{TrustPriority: true}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logged := &accessLog{}
			tc.cfg.Logger = slog.New(logged)
			f := startProxy(t, s.hs.URL, tc.cfg)
			h := http.Header{"X-Slogate-Priority": {"probe"}}
			if tc.key != "" {
				h.Set(proxy.ProbeKeyHeader, tc.key)
			}
			code, _, _ := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", `{"prompt":"hi","max_tokens":4}`, h)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			want := 1
			if tc.hidden {
				want = 0
			}
			// The request has ended and been reported: the access-log line comes before the
			// observers, so a request they should see is awaited there.
			logged.await(t, 1)
			if want > 0 {
				f.obs.last(t, want)
			}
			if n, _ := f.ledger.InFlight(); n != 0 || f.obs.count() != want {
				t.Errorf("once reported: %d in flight, %d observed; want 0, %d", n, f.obs.count(), want)
			}
		})
	}
}

// TestContinuousUsageAlone checks a stream whose client asked for continuous_usage_stats
// without include_usage, from a vLLM that speculates (several tokens per chunk). vLLM
// would send no usage at all for it, so slogate adds include_usage: the output tokens are
// the engine's exact count, not the chunk count, the client gets the usage on every chunk
// it asked for, and not the usage-only chunk slogate added.
func TestContinuousUsageAlone(t *testing.T) {
	p := tinyProfile(t, func(p *enginesim.Profile) { p.Speculation = enginesim.Speculation{DraftTokens: 3, AcceptRate: 1} })
	_, f := startEnv(t, enginesim.Config{Profile: p})
	resp := send(context.Background(), t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions",
		`{"model":"sim-tiny","prompt":"hi","max_tokens":24,"ignore_eos":true,"stream":true,"stream_options":{"continuous_usage_stats":true}}`, nil)
	defer resp.Body.Close()
	got := readSSE(resp.Body, nil)
	if !got.done || got.err != nil {
		t.Fatalf("stream: [DONE] %v, err %v", got.done, got.err)
	}
	for i, c := range got.chunks {
		if c.UsageOnly() {
			t.Errorf("chunk %d is the usage-only chunk slogate asked for", i)
		}
		if c.Usage == nil {
			t.Errorf("chunk %d carries no usage; the client asked for it on every chunk", i)
		}
	}
	r := f.obs.last(t, 1).res
	if r.Tokens != measure.TokensUsage || r.OutputTokens != 24 || r.OutputChunks >= 24 {
		t.Errorf("observed %d tokens from %s in %d chunks; want 24 from usage in fewer chunks", r.OutputTokens, r.Tokens, r.OutputChunks)
	}
}
