package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// The fault suite, engine side: an engine that is not started, crashes and restarts,
// answers bursts of 5xx, stalls or drops the connection mid-stream, each against the
// simulator's fault switches over real sockets. The client side (clients that leave or
// read slowly) is in fault_client_test.go, leaks in fault_leak_test.go, SIGTERM under load
// in sidecar/fault_test.go. Cases covered elsewhere: an unreachable or non-HTTP
// engine and a header timeout (TestUpstreamFailures), single engine errors
// (TestEngineErrorsPassThrough), a raw client of a dropped stream (TestDropMidstream).

const (
	longCompletion = `{"model":"sim-tiny","prompt":"a long answer","max_tokens":3000,"ignore_eos":true,"stream":true}`
	longChat       = `{"model":"sim-tiny","messages":[{"role":"user","content":"a long answer"}],"max_tokens":3000,"ignore_eos":true,"stream":true}`
	shortStream    = `{"model":"sim-tiny","prompt":"are you there?","max_tokens":8,"stream":true}`
)

// TestStreamIdleTimeout checks a stream whose engine goes silent: after StreamIdleTimeout
// without a byte, slogate cancels the engine's request (the engine aborts it and frees
// its slot), sends the client an OpenAI error event and aborts the connection, so that
// the client cannot take the stream for a complete answer; the request counts as
// upstream_timeout with the 200 the client got. An engine silent after [DONE] only
// failed to end its body: the client's stream ends cleanly, and the request counts ok.
func TestStreamIdleTimeout(t *testing.T) {
	const idle = time.Second // long enough that a healthy stream never meets it under -race
	cases := []struct {
		name    string
		path    string
		body    string
		silence []byte // the engine sends its headers and these bytes, and then nothing; nil: the simulator stalls after 3 tokens
		outputs int
		done    bool // the answer was complete: the client's stream ends cleanly, counted ok
	}{
		{name: "stall after 3 tokens", path: "/v1/completions", body: longCompletion, outputs: 3},
		{name: "stall after 3 tokens, chat", path: "/v1/chat/completions", body: longChat, outputs: 3},
		{name: "silent before the first token", path: "/v1/completions", body: longCompletion, silence: []byte{}},
		{name: "silent after [DONE]", path: "/v1/completions", body: longCompletion, silence: []byte(answerChunk(" a", "length") + "data: [DONE]\n\n"), outputs: 1, done: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s *sim
			var cancelled <-chan struct{}
			var up string
			if tc.silence != nil {
				var u *upstream
				u, cancelled = silentUpstream(t, tc.silence)
				up = u.hs.URL
			} else {
				s = startSim(t, enginesim.Config{})
				up = s.hs.URL
			}
			f := startMetered(t, up, proxy.Config{InjectUsage: true, StreamIdleTimeout: idle})
			resp := send(context.Background(), t, f.hs.Client(), http.MethodPost, f.hs.URL+tc.path, tc.body, fault("stall_after=3"))
			defer resp.Body.Close()
			checkIdleEnd(t, resp, tc.outputs, tc.done)
			wantKey, wantOutcome := "upstream_timeout 200", measure.UpstreamTimeout
			if tc.done {
				wantKey, wantOutcome = "ok 200", measure.OK
			}
			r := f.obs.last(t, 1).res
			if r.Outcome != wantOutcome || r.Status != http.StatusOK || r.OutputChunks != tc.outputs || r.Ended != tc.done {
				t.Errorf("observed %v, status %d, %d outputs, ended %v; want %v, 200, %d, ended %v", r.Outcome, r.Status, r.OutputChunks, r.Ended, wantOutcome, tc.outputs, tc.done)
			}
			if m := f.requests(t); !maps.Equal(m, map[string]int{wantKey: 1}) {
				t.Errorf("slogate_requests_total %v; want one %s", m, wantKey)
			}
			if s != nil {
				engineFreed(t, s, 1)
			} else {
				waitRecv(t, "the upstream request to be cancelled", cancelled)
			}
		})
	}
}

// checkIdleEnd reads a stream whose engine went silent after outputs outputs and checks
// how it ended for the client: cleanly after [DONE] when done, else with the idle
// timeout's error event and an aborted body.
func checkIdleEnd(t *testing.T, resp *http.Response, outputs int, done bool) {
	t.Helper()
	got := readSSE(resp.Body, nil)
	e := got.errorEvent()
	if done {
		if resp.StatusCode != http.StatusOK || !got.done || got.err != nil || e != nil || got.outputs() != outputs {
			t.Errorf("client: status %d, %d outputs, [DONE] %v, err %v, error event %+v; want 200, %d outputs, [DONE], a clean end", resp.StatusCode, got.outputs(), got.done, got.err, e, outputs)
		}
		return
	}
	if resp.StatusCode != http.StatusOK || got.done || got.err == nil || got.outputs() != outputs {
		t.Errorf("client: status %d, %d outputs, [DONE] %v, err %v; want 200, %d outputs, then an aborted body", resp.StatusCode, got.outputs(), got.done, got.err, outputs)
	}
	if e == nil || e.Code != http.StatusGatewayTimeout || e.Type != wire.TypeServer || !strings.Contains(e.Message, "sent nothing for 1s") {
		t.Errorf("error event %+v; want a server_error with code 504 naming the timeout", e)
	}
}

// answerChunk is one completions chunk with text and a finish reason ("" for none).
func answerChunk(text, finish string) string {
	reason := "null"
	if finish != "" {
		reason = `"` + finish + `"`
	}
	return `data: {"id":"c","object":"text_completion","created":1,"model":"sim-tiny","choices":[{"index":0,"text":"` + text + `","finish_reason":` + reason + `}]}` + "\n\n"
}

// engineFreed waits until the simulator runs and holds nothing and has aborted at least
// aborts requests.
func engineFreed(t testing.TB, s *sim, aborts int64) {
	t.Helper()
	s.await(t, "engine freed", func(st enginesim.Stats) (bool, string) {
		aborted := st.FinishedByReason["abort"]
		return st.Running == 0 && st.Waiting == 0 && st.UsedBlocks == 0 && aborted >= aborts,
			fmt.Sprintf("running %d, waiting %d, used blocks %d, aborted %d", st.Running, st.Waiting, st.UsedBlocks, aborted)
	})
}

// waitRecv waits for a value on c, failing the test after a generous deadline.
func waitRecv[T any](t testing.TB, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
	panic("unreachable")
}

// TestSDKSeesBrokenStreams checks that the OpenAI SDK, as applications use it, reports a
// stream that broke off as an error, never as a short answer: for an engine that drops
// the connection mid-stream, and for one that stalls until the idle timeout.
func TestSDKSeesBrokenStreams(t *testing.T) {
	cases := []struct {
		name    string
		chat    bool
		fault   string
		message string // in the SDK's error
		outcome measure.Outcome
	}{
		{name: "drop", fault: "drop_after=5", message: "broke off before its end", outcome: measure.AbortedMidstream},
		{name: "drop, chat", chat: true, fault: "drop_after=5", message: "broke off before its end", outcome: measure.AbortedMidstream},
		{name: "stall", fault: "stall_after=5", message: "sent nothing for 1s", outcome: measure.UpstreamTimeout},
		{name: "stall, chat", chat: true, fault: "stall_after=5", message: "sent nothing for 1s", outcome: measure.UpstreamTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startSim(t, enginesim.Config{})
			f := startProxy(t, s.hs.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Second})
			outputs, err := sdkBroken(f.hs.URL, f.hs.Client(), tc.chat, tc.fault)
			var se *ssestream.StreamError
			if !errors.As(err, &se) || !strings.Contains(se.Message, tc.message) {
				t.Errorf("SDK error %v (%T); want a stream error saying %q", err, err, tc.message)
			}
			if outputs != 5 {
				t.Errorf("the SDK yielded %d chunks with output before the error, want 5", outputs)
			}
			if r := f.obs.last(t, 1).res; r.Outcome != tc.outcome || r.OutputChunks != 5 {
				t.Errorf("observed %v with %d outputs, want %v with 5", r.Outcome, r.OutputChunks, tc.outcome)
			}
			engineFreed(t, s, 0)
		})
	}
}

// sdkBroken streams one request with the OpenAI SDK and the given simulator faults, and
// returns how many chunks with output it yielded and the error that ended the stream.
func sdkBroken(base string, client *http.Client, chat bool, faults string) (int, error) {
	c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0),
		option.WithHTTPClient(client), option.WithHeader(enginesim.FaultHeader, faults))
	ctx := context.Background()
	outputs := 0
	if chat {
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: simModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say something")}, MaxTokens: openai.Int(100),
		})
		defer s.Close()
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				outputs++
			}
		}
		return outputs, s.Err()
	}
	s := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model: simModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("say something")}, MaxTokens: openai.Int(100),
	})
	defer s.Close()
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 && ch.Choices[0].Text != "" {
			outputs++
		}
	}
	return outputs, s.Err()
}

// TestEngineRestart takes slogate through an engine's life: not started yet, up, crashing
// with a stream in flight, down, and restarted at the same address. While the engine is
// unreachable clients get 502 with OpenAI error JSON; the stream in flight ends with an
// error event and an aborted connection; once the engine is back requests succeed again,
// with no restart of slogate; and the metrics count each request as it ended.
func TestEngineRestart(t *testing.T) {
	site := newEngineSite(t, enginesim.Config{})
	f := startMetered(t, site.url(), proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute})
	client := f.hs.Client()
	unreachable := func(phase string) {
		status, header, body := do(t, client, http.MethodPost, f.hs.URL+"/v1/completions", shortStream, nil)
		if status != http.StatusBadGateway || header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: status %d (%s), want 502 with JSON: %s", phase, status, header.Get("Content-Type"), body)
		}
		if e := apiError(t, body); e.Type != wire.TypeServer || e.Code != http.StatusBadGateway {
			t.Errorf("%s: error %+v, want server_error 502", phase, e)
		}
	}
	served := func(phase string) {
		resp := send(context.Background(), t, client, http.MethodPost, f.hs.URL+"/v1/completions", shortStream, nil)
		got := readSSE(resp.Body, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !got.done || got.err != nil || got.outputs() == 0 {
			t.Fatalf("%s: status %d, %d outputs, [DONE] %v, err %v; want a complete stream", phase, resp.StatusCode, got.outputs(), got.done, got.err)
		}
	}

	unreachable("not started")
	site.start()
	served("started")
	resp := send(context.Background(), t, client, http.MethodPost, f.hs.URL+"/v1/completions", longCompletion, nil)
	crashed := false
	got := readSSE(resp.Body, func(r sseRead) bool {
		if !crashed && r.outputs() == 3 {
			site.stop() // the engine crashes with the stream in flight
			crashed = true
		}
		return false
	})
	resp.Body.Close()
	if !crashed || got.done || got.err == nil {
		t.Errorf("crash: [DONE] %v, err %v after %d outputs; want an aborted body", got.done, got.err, got.outputs())
	}
	if e := got.errorEvent(); e == nil || e.Code != http.StatusBadGateway {
		t.Errorf("crash: error event %+v, want one with code 502", e)
	}
	unreachable("down")
	site.start()
	served("restarted")

	f.obs.wait(t, 5)
	want := map[string]int{"upstream_error 502": 2, "ok 200": 2, "aborted_midstream 200": 1}
	if m := f.requests(t); !maps.Equal(m, want) {
		t.Errorf("slogate_requests_total %v, want %v", m, want)
	}
}

// TestEngine5xxBurst sends bursts of concurrent streams to an engine that fails all of
// them with 503, then half, then none: each client gets either a complete stream or the
// engine's own OpenAI error JSON, slogate recovers with the engine, and the metrics count
// exactly what the clients saw.
func TestEngine5xxBurst(t *testing.T) {
	const burst = 16
	phases := []struct {
		name   string
		faults string
		check  func(ok, failed int) bool
	}{
		{name: "all fail", faults: "status=503", check: func(ok, _ int) bool { return ok == 0 }},
		{name: "half fail", faults: "status=503,rate=0.5", check: func(int, int) bool { return true }},
		{name: "recovered", check: func(_, failed int) bool { return failed == 0 }},
	}
	s := startSim(t, enginesim.Config{})
	f := startMetered(t, s.hs.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute})
	seen := make(map[string]int)
	for _, ph := range phases {
		var mu sync.Mutex
		var ok, failed int
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				status, err := streamOnce(f.hs.Client(), f.hs.URL, ph.faults)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("%s: %v", ph.name, err)
				case status == http.StatusOK:
					ok++
				default:
					failed++
				}
			})
		}
		wg.Wait()
		if !ph.check(ok, failed) || ok+failed != burst {
			t.Errorf("%s: %d complete streams and %d 503s", ph.name, ok, failed)
		}
		seen["ok 200"] += ok
		seen["upstream_error 503"] += failed
	}
	f.obs.wait(t, burst*len(phases))
	maps.DeleteFunc(seen, func(_ string, n int) bool { return n == 0 })
	if m := f.requests(t); !maps.Equal(m, seen) {
		t.Errorf("slogate_requests_total %v; the clients saw %v", m, seen)
	}
	engineFreed(t, s, 0)
}

// streamOnce sends one short stream with the given faults and checks the answer: a
// complete stream (200), or an OpenAI error body of a 5xx. It returns the status.
func streamOnce(client *http.Client, base, faults string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(shortStream))
	if err != nil {
		return 0, err
	}
	if faults != "" {
		req.Header.Set(enginesim.FaultHeader, faults)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if e, err := wire.DecodeError(body); resp.StatusCode < 500 || err != nil || e.Message == "" {
			return 0, fmt.Errorf("status %d with %s (%v); want a 5xx with OpenAI error JSON", resp.StatusCode, body, err)
		}
		return resp.StatusCode, nil
	}
	if got := readSSE(resp.Body, nil); !got.done || got.err != nil || got.outputs() == 0 {
		return 0, fmt.Errorf("stream: %d outputs, [DONE] %v, err %v", got.outputs(), got.done, got.err)
	}
	return resp.StatusCode, nil
}
