package synth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// upstream serves handle as an engine would, over a real HTTP server, for answers the
// simulator never gives.
func upstream(t *testing.T, handle http.HandlerFunc) string {
	t.Helper()
	hs := httptest.NewServer(handle)
	t.Cleanup(hs.Close)
	return hs.URL
}

// sse writes server-sent events and flushes each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return sse{w, http.NewResponseController(w)}
}

func (s sse) data(d string) {
	fmt.Fprintf(s.w, "data: %s\n\n", d)
	_ = s.rc.Flush()
}

// textChunk is a completions chunk carrying text and, when usage >= 0, continuous usage.
func textChunk(text string, prompt, usage int, finish string) string {
	fin := "null"
	if finish != "" {
		fin = `"` + finish + `"`
	}
	u := "null"
	if usage >= 0 {
		u = fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, usage, prompt+usage)
	}
	return fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":%q,"finish_reason":%s}],"usage":%s}`, text, fin, u)
}

func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, completion, prompt+completion)
}

// stream answers with n text chunks (with continuous usage unless noUsage), the final
// usage chunk when usage >= 0, and [DONE] when done.
func stream(n, prompt, usage int, done, noUsage bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s := startSSE(w)
		for i := range n {
			fin, u := "", i+1
			if i == n-1 {
				fin = "length"
			}
			if noUsage {
				u = -1
			}
			s.data(textChunk(fmt.Sprintf(" w%d", i), prompt, u, fin))
		}
		if usage >= 0 {
			s.data(usageChunk(prompt, usage))
		}
		if done {
			s.data("[DONE]")
		}
	}
}

func TestSendSucceeds(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	tg := s.target(t, "sim-tiny")
	const input, output = 48, 24
	smp := tg.send(context.Background(), prompt{input: input, output: output, seed: 9}, farFuture)
	r := smp.Res
	checks := []struct {
		rule string
		ok   bool
	}{
		{"no failure", smp.Success() && smp.Failure == NoFailure && smp.Failure.String() == "none"},
		{"HTTP 200", smp.Status == http.StatusOK && r.Status == http.StatusOK && r.Outcome == measure.OK},
		{"non-empty output", r.OutputChunks > 0 && smp.Text != ""},
		{"end marker", r.Ended},
		{"valid usage", r.Tokens == measure.TokensUsage && r.InputTokens == input},
		{"exact output length", r.OutputTokens == output},
		{"finish reason", r.FinishReason == "length"},
		{"TTFT, TPOT and E2E", r.TTFT > 0 && r.TPOT > 0 && r.E2E >= r.TTFT},
		{"a gap per chunk after the first", len(r.Gaps) == r.OutputChunks-1},
		{"every token inside the window", smp.WindowTokens == output},
		{"not looped", !smp.Looped},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: sample %+v", c.rule, smp)
		}
	}
}

func TestSendFailures(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	sim := s.target(t, "sim-tiny")
	const input, output = 16, 8
	tests := []struct {
		name   string
		target func(t *testing.T) *Target
		want   Failure
		status int
	}{
		{"HTTP status (fault status=503)", func(*testing.T) *Target { return faulty(sim, "status=503") }, HTTPStatus, 503},
		{"HTTP status (unknown model)", func(t *testing.T) *Target { return s.target(t, "no-such-model") }, HTTPStatus, 404},
		{"transport (fault drop_after=3)", func(*testing.T) *Target { return faulty(sim, "drop_after=3") }, Transport, 200},
		{"transport (nothing listening)", func(t *testing.T) *Target {
			hs := httptest.NewServer(http.NotFoundHandler())
			hs.Close()
			return newTarget(t, hs.URL, "m")
		}, Transport, 0},
		{"engine error (fault error_after=3, vLLM's nested error event)", func(*testing.T) *Target { return faulty(sim, "error_after=3") }, EngineError, 200},
		{"engine error (fault error_after=3, SGLang's flat error event)", func(t *testing.T) *Target {
			return faulty(startSim(t, enginesim.Config{Flavor: enginesim.FlavorSGLang}).target(t, "sim-tiny"), "error_after=3")
		}, EngineError, 200},
		{"engine error (an error event amid a stream that is otherwise complete)", upstreamTarget(func(w http.ResponseWriter, r *http.Request) {
			s := startSSE(w)
			for i := range output {
				s.data(textChunk(" x", input, i+1, ""))
			}
			s.data(`{"error": {"message": "boom", "type": "InternalServerError", "param": null, "code": 500}}`)
			s.data(usageChunk(input, output))
			s.data("[DONE]")
		}), EngineError, 200},
		{"empty output (usage and [DONE] only)", upstreamTarget(stream(0, input, 0, true, false)), EmptyOutput, 200},
		{"empty output (chunks without text)", upstreamTarget(func(w http.ResponseWriter, r *http.Request) {
			s := startSSE(w)
			s.data(textChunk("", input, 0, ""))
			s.data(textChunk("", input, 0, "length"))
			s.data(usageChunk(input, 0))
			s.data("[DONE]")
		}), EmptyOutput, 200},
		{"no end marker (the stream ends without [DONE])", upstreamTarget(stream(output, input, output, false, false)), NoEndMarker, 200},
		{"bad usage (no usage at all)", upstreamTarget(stream(output, input, -1, true, true)), BadUsage, 200},
		{"bad usage (no prompt tokens)", upstreamTarget(stream(output, 0, output, true, false)), BadUsage, 200},
		{"wrong length (fewer tokens than asked)", upstreamTarget(stream(output-3, input, output-3, true, false)), WrongLength, 200},
		{"wrong length (more tokens than asked)", upstreamTarget(stream(output+1, input, output+1, true, false)), WrongLength, 200},
		{"wrong length (usage disagrees)", upstreamTarget(stream(output, input, output-1, true, false)), WrongLength, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			smp := tc.target(t).send(context.Background(), prompt{input: input, output: output, seed: 1}, farFuture)
			if smp.Failure != tc.want || smp.Status != tc.status {
				t.Errorf("failure %v, status %d; want %v, %d (sample %+v)", smp.Failure, smp.Status, tc.want, tc.status, smp)
			}
			if smp.Success() {
				t.Error("Success() = true")
			}
		})
	}
}

// upstreamTarget returns a Target maker for an upstream serving handle.
func upstreamTarget(handle http.HandlerFunc) func(t *testing.T) *Target {
	return func(t *testing.T) *Target { return newTarget(t, upstream(t, handle), "m") }
}

// A request that the round's window closes on is cut, whether it had begun to stream or
// was still waiting for its answer; cut is not a failure of the engine.
func TestSendCut(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	tests := []struct {
		name, faults string
		tokens       bool // tokens arrived before the cut
	}{
		{"streaming (fault stall_after=2)", "stall_after=2", true},
		{"before the answer (fault delay=1m)", "delay=1m", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := faulty(s.target(t, "sim-tiny"), tc.faults)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			smp := tg.send(ctx, prompt{input: 16, output: 8, seed: 1}, farFuture)
			if smp.Failure != Cut || smp.Failure.String() != "cut" {
				t.Errorf("failure %v, want cut", smp.Failure)
			}
			if got := smp.WindowTokens > 0; got != tc.tokens {
				t.Errorf("window tokens %d, want some: %v", smp.WindowTokens, tc.tokens)
			}
		})
	}
}

// An answer is complete at [DONE]: if the body's end does not follow (the round's window
// closes first, or the connection breaks), the request still succeeded. (It was judged a
// transport failure when the window closed between [DONE] and the end of the body, which
// under load failed a few of a 128-stream cell's requests.)
func TestSendEndsAtDone(t *testing.T) {
	const input, output = 16, 4
	tests := []struct {
		name  string
		after func(w http.ResponseWriter, r *http.Request)
	}{
		{"the body stays open until the window closes", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"the connection breaks", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t, upstream(t, func(w http.ResponseWriter, r *http.Request) {
				stream(output, input, output, true, false)(w, r)
				tc.after(w, r)
			}), "m")
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			smp := tg.send(ctx, prompt{input: input, output: output, seed: 1}, farFuture)
			if !smp.Success() || !smp.Res.Ended || smp.Res.OutputTokens != output {
				t.Errorf("failure %v, ended %v, %d tokens; want a success", smp.Failure, smp.Res.Ended, smp.Res.OutputTokens)
			}
		})
	}
}

// WindowTokens counts the tokens received up to the window's end, and none after: the
// stream is fed through a pipe, and the clock passes the window's end between two of its
// chunks.
func TestWindowTokens(t *testing.T) {
	start := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	windowEnd := start.Add(time.Second)
	clk := clock.NewFake(start)
	tg := &Target{Clock: clk}
	pr, pw := io.Pipe()
	done := make(chan Sample, 1)
	go func() {
		rec := measure.NewRecorder(wire.RouteCompletions, true, measure.Options{Clock: clk})
		done <- tg.read(pr, wire.RouteCompletions, rec, windowEnd)
	}()
	write := func(events ...string) {
		var b strings.Builder
		for _, e := range events {
			b.WriteString("data: " + e + "\n\n")
		}
		if _, err := io.WriteString(pw, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	write(textChunk(" a", 10, 1, ""), textChunk(" b", 10, 2, ""), textChunk(" c", 10, 3, ""))
	// A pipe write returns once the reader has taken the bytes, and the reader asks for
	// more only when it has handled every event it holds: after this comment, the first
	// three chunks have been read at the window's start.
	if _, err := io.WriteString(pw, ": sync\n\n"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(windowEnd.Add(time.Millisecond))
	write(textChunk(" d", 10, 4, ""), textChunk(" e", 10, 5, "length"), usageChunk(10, 5), "[DONE]")
	pw.Close()
	smp := <-done
	if smp.WindowTokens != 3 || smp.Res.OutputTokens != 5 || !smp.Res.Ended || smp.Text != " a b c d e" {
		t.Errorf("window tokens %d, output tokens %d, ended %v, text %q; want 3, 5, true, %q",
			smp.WindowTokens, smp.Res.OutputTokens, smp.Res.Ended, smp.Text, " a b c d e")
	}
}

// The prober says who it is: admission's probe class, the API key, JSON to the
// completions route; the gate's calls too.
func TestRequestHeaders(t *testing.T) {
	type seen struct{ method, path, priority, auth, contentType string }
	var mu sync.Mutex
	var got []seen
	url := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("X-Slogate-Priority"), r.Header.Get("Authorization"), r.Header.Get("Content-Type")})
		mu.Unlock()
		if r.URL.Path == "/v1/completions" {
			stream(2, 4, 2, true, false)(w, r)
			return
		}
		http.Error(w, "no", http.StatusBadRequest)
	})
	tg := newTarget(t, url+"/", "m") // a trailing slash is tolerated
	tg.APIKey = "sk-test"
	if smp := tg.send(context.Background(), prompt{input: 4, output: 2, seed: 1}, farFuture); !smp.Success() {
		t.Fatalf("send failed: %v", smp.Failure)
	}
	if _, _, err := tg.call(context.Background(), http.MethodGet, "/v1/models", nil); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"POST", "/v1/completions", ProbeClass, "Bearer sk-test", "application/json"},
		{"GET", "/v1/models", ProbeClass, "Bearer sk-test", "application/json"},
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests %+v\nwant %+v", got, want)
	}
}

func TestFailureNames(t *testing.T) {
	seen := map[string]bool{}
	for f := NoFailure; f < numFailures; f++ {
		name := f.String()
		if name == "unknown" || seen[name] || strings.ContainsAny(name, " -") {
			t.Errorf("failure %d has name %q", f, name)
		}
		seen[name] = true
	}
	if numFailures.String() != "unknown" {
		t.Errorf("out of range: %q", numFailures.String())
	}
}
