package measure

import (
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/wire"
)

const (
	roleChunk    = `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`
	textChunk    = `{"choices":[{"index":0,"text":" hi","finish_reason":null}]}`
	contentChunk = `{"choices":[{"index":0,"delta":{"content":" hi"}}]}`
	thinkChunk   = `{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`
	toolChunk    = `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}`
	lastChunk    = `{"choices":[{"index":0,"text":"!","finish_reason":"length"}]}`
	usageChunk   = `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":4,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":3}}}`
	emptyFinish  = `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
)

// step is one event arriving after a delay.
type step struct {
	after time.Duration
	data  string // "[DONE]" for the end marker, ":" prefix for a comment
}

func feed(t *testing.T, stream bool, steps []step) (Result, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	var gaps []time.Duration
	r := NewRecorder(wire.RouteCompletions, stream, Options{Clock: clk, KeepGaps: true, OnGap: func(g time.Duration) { gaps = append(gaps, g) }})
	for _, s := range steps {
		clk.Step(s.after)
		ev := wire.Event{Data: []byte(s.data)}
		if len(s.data) > 0 && s.data[0] == ':' {
			ev = wire.Event{Comment: true, Data: []byte(s.data[1:])}
		}
		r.Event(ev)
	}
	res := r.Finish(200, OK)
	if len(gaps) != len(res.Gaps) {
		t.Errorf("OnGap saw %d gaps, Result holds %d", len(gaps), len(res.Gaps))
	}
	return res, clk
}

func TestRecorderStreams(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		steps   []step
		want    Result // fields compared: TTFT, TPOT, E2E, OutputChunks, MaxGap, tokens, Ended, FinishReason, Outcome
		gaps    []time.Duration
		wantSrc TokenSource
	}{
		{
			name:  "text with usage",
			steps: []step{{100 * ms, textChunk}, {10 * ms, textChunk}, {30 * ms, textChunk}, {20 * ms, lastChunk}, {1 * ms, usageChunk}, {0, "[DONE]"}},
			want: Result{TTFT: 100 * ms, E2E: 161 * ms, TPOT: 61 * ms / 3, OutputChunks: 4, MaxGap: 30 * ms,
				InputTokens: 7, CachedTokens: 3, OutputTokens: 4, Ended: true, FinishReason: "length", Outcome: OK},
			gaps: []time.Duration{10 * ms, 30 * ms, 20 * ms}, wantSrc: TokensUsage,
		},
		{
			name:  "role chunk and comments are not output",
			steps: []step{{5 * ms, roleChunk}, {5 * ms, ": keep-alive"}, {40 * ms, contentChunk}, {10 * ms, contentChunk}, {0, emptyFinish}, {0, "[DONE]"}},
			want: Result{TTFT: 50 * ms, E2E: 60 * ms, TPOT: 10 * ms, OutputChunks: 2, MaxGap: 10 * ms,
				OutputTokens: 2, Ended: true, FinishReason: "stop", Outcome: OK},
			gaps: []time.Duration{10 * ms}, wantSrc: TokensChunks,
		},
		{
			name:  "reasoning and tool calls are output",
			steps: []step{{20 * ms, thinkChunk}, {20 * ms, toolChunk}, {0, "[DONE]"}},
			want: Result{TTFT: 20 * ms, E2E: 40 * ms, TPOT: 20 * ms, OutputChunks: 2, MaxGap: 20 * ms,
				OutputTokens: 2, Ended: true, Outcome: OK},
			gaps: []time.Duration{20 * ms}, wantSrc: TokensChunks,
		},
		{
			name:    "one token has no TPOT",
			steps:   []step{{20 * ms, lastChunk}, {0, "[DONE]"}},
			want:    Result{TTFT: 20 * ms, E2E: 20 * ms, OutputChunks: 1, OutputTokens: 1, Ended: true, FinishReason: "length", Outcome: OK},
			wantSrc: TokensChunks,
		},
		{
			name:    "stream that breaks off after output",
			steps:   []step{{20 * ms, textChunk}, {20 * ms, textChunk}},
			want:    Result{TTFT: 20 * ms, E2E: 40 * ms, TPOT: 20 * ms, OutputChunks: 2, MaxGap: 20 * ms, OutputTokens: 2, Outcome: AbortedMidstream},
			gaps:    []time.Duration{20 * ms},
			wantSrc: TokensChunks,
		},
		{
			name:  "no output at all",
			steps: []step{{20 * ms, roleChunk}, {0, "[DONE]"}},
			want:  Result{E2E: 20 * ms, Ended: true, Outcome: OK},
		},
		{
			// vLLM ends a generation that failed with the nested error object, then [DONE].
			name: "error event after output",
			steps: []step{{20 * ms, contentChunk}, {20 * ms, contentChunk},
				{5 * ms, `{"error": {"message": "boom", "type": "InternalServerError", "param": null, "code": 500}}`}, {0, "[DONE]"}},
			want: Result{TTFT: 20 * ms, E2E: 45 * ms, TPOT: 25 * ms, OutputChunks: 2, MaxGap: 20 * ms, OutputTokens: 2, Ended: true,
				ErrorEvent: true, Outcome: EngineError},
			gaps: []time.Duration{20 * ms}, wantSrc: TokensChunks,
		},
		{
			// SGLang's flat form, before any output.
			name: "flat error event before output",
			steps: []step{{20 * ms, roleChunk},
				{5 * ms, `{"object": "error", "message": "boom", "type": "BadRequestError", "param": null, "code": 400}`}, {0, "[DONE]"}},
			want: Result{E2E: 25 * ms, Ended: true, ErrorEvent: true, Outcome: EngineError},
		},
		{
			// The error names the failure better than the missing [DONE].
			name:    "error event, then the stream breaks off",
			steps:   []step{{20 * ms, contentChunk}, {5 * ms, `{"error":{"message":"boom","code":500}}`}},
			want:    Result{TTFT: 20 * ms, E2E: 25 * ms, OutputChunks: 1, OutputTokens: 1, ErrorEvent: true, Outcome: EngineError},
			wantSrc: TokensChunks,
		},
		{
			name:    "data that is not a chunk is ignored",
			steps:   []step{{10 * ms, "not json"}, {10 * ms, textChunk}, {0, "[DONE]"}},
			want:    Result{TTFT: 20 * ms, E2E: 20 * ms, OutputChunks: 1, OutputTokens: 1, Ended: true, Outcome: OK},
			wantSrc: TokensChunks,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := feed(t, true, tc.steps)
			w := tc.want
			if got.TTFT != w.TTFT || got.E2E != w.E2E || got.TPOT != w.TPOT || got.MaxGap != w.MaxGap {
				t.Errorf("TTFT/E2E/TPOT/MaxGap = %v/%v/%v/%v, want %v/%v/%v/%v", got.TTFT, got.E2E, got.TPOT, got.MaxGap, w.TTFT, w.E2E, w.TPOT, w.MaxGap)
			}
			if got.OutputChunks != w.OutputChunks || got.OutputTokens != w.OutputTokens || got.InputTokens != w.InputTokens || got.CachedTokens != w.CachedTokens {
				t.Errorf("chunks/output/input/cached = %d/%d/%d/%d, want %d/%d/%d/%d", got.OutputChunks, got.OutputTokens, got.InputTokens, got.CachedTokens,
					w.OutputChunks, w.OutputTokens, w.InputTokens, w.CachedTokens)
			}
			if got.ErrorEvent != w.ErrorEvent {
				t.Errorf("ErrorEvent = %v, want %v", got.ErrorEvent, w.ErrorEvent)
			}
			if got.Ended != w.Ended || got.FinishReason != w.FinishReason || got.Outcome != w.Outcome || got.Tokens != tc.wantSrc {
				t.Errorf("ended/finish/outcome/source = %v/%q/%v/%v, want %v/%q/%v/%v", got.Ended, got.FinishReason, got.Outcome, got.Tokens,
					w.Ended, w.FinishReason, w.Outcome, tc.wantSrc)
			}
			if len(got.Gaps) != len(tc.gaps) {
				t.Fatalf("gaps = %v, want %v", got.Gaps, tc.gaps)
			}
			for i := range tc.gaps {
				if got.Gaps[i] != tc.gaps[i] {
					t.Errorf("gap %d = %v, want %v", i, got.Gaps[i], tc.gaps[i])
				}
			}
		})
	}
}

func TestRecorderBody(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cases := []struct {
		name    string
		body    string
		output  int
		ended   bool
		outcome Outcome // with status 200
	}{
		{"completion", `{"object":"text_completion","choices":[{"index":0,"text":"hello","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`, 5, true, OK},
		{"chat", `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, 1, true, OK},
		{"error body", `{"error":{"message":"no","type":"BadRequestError","code":400}}`, 0, false, EngineError},
		{"flat error body", `{"object":"error","message":"no","type":"BadRequestError","code":400}`, 0, false, EngineError},
		{"garbage", `<html>`, 0, false, OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(wire.RouteCompletions, false, Options{Clock: clk})
			clk.Step(300 * time.Millisecond)
			r.Body([]byte(tc.body))
			res := r.Finish(200, OK)
			if res.OutputTokens != tc.output || res.Ended != tc.ended || res.E2E != 300*time.Millisecond {
				t.Errorf("output/ended/E2E = %d/%v/%v, want %d/%v/300ms", res.OutputTokens, res.Ended, res.E2E, tc.output, tc.ended)
			}
			if res.TTFT != 0 || res.TPOT != 0 {
				t.Errorf("a non-streaming answer has TTFT %v and TPOT %v, want none", res.TTFT, res.TPOT)
			}
			if res.Outcome != tc.outcome {
				t.Errorf("outcome = %v, want %v", res.Outcome, tc.outcome)
			}
		})
	}
}

func TestFinishKeepsCallerOutcome(t *testing.T) {
	r := NewRecorder(wire.RouteChatCompletions, true, Options{Clock: clock.NewFake(time.Time{})})
	r.Event(wire.Event{Data: []byte(contentChunk)})
	if got := r.Finish(499, ClientCancelled); got.Outcome != ClientCancelled || got.Status != 499 {
		t.Errorf("Finish(499, ClientCancelled) = %v/%d", got.Outcome, got.Status)
	}
}

func TestOutcomeNames(t *testing.T) {
	want := []string{"ok", "client_cancelled", "upstream_error", "upstream_timeout", "aborted_midstream", "engine_error", "bad_request", "rejected", "shutdown"}
	got := Outcomes()
	if len(got) != len(want) {
		t.Fatalf("%d outcomes, want %d", len(got), len(want))
	}
	for i, o := range got {
		if o.String() != want[i] {
			t.Errorf("outcome %d = %q, want %q", i, o, want[i])
		}
	}
	if Outcome(200).String() != "unknown" {
		t.Errorf("an out-of-range outcome should read unknown")
	}
	for src, name := range map[TokenSource]string{TokensNone: "none", TokensUsage: "usage", TokensChunks: "chunks"} {
		if src.String() != name {
			t.Errorf("%d.String() = %q, want %q", src, src, name)
		}
	}
}
