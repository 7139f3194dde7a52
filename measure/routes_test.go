package measure

import (
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/wire"
)

func genEvent(text string, tokens int, finish string) string {
	f := "null"
	if finish != "" {
		f = `{"type":"` + finish + `"}`
	}
	return `{"text":"` + text + `","meta_info":{"prompt_tokens":7,"completion_tokens":` + itoa(tokens) + `,"cached_tokens":2,"finish_reason":` + f + `}}`
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestRecorderRunningTotals: SGLang's /generate events repeat the answer so far, so an
// event whose completion tokens did not grow carries no output, and the first one that
// grew sets TTFT.
func TestRecorderRunningTotals(t *testing.T) {
	ms := time.Millisecond
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	r := NewRecorder(wire.RouteGenerate, true, Options{Clock: clk, KeepGaps: true})
	for _, s := range []step{
		{40 * ms, genEvent("", 0, "")}, // nothing generated yet
		{10 * ms, genEvent("Pa", 1, "")},
		{10 * ms, genEvent("Pa", 1, "")}, // the same totals again: no output
		{10 * ms, genEvent("Paris", 3, "")},
		{10 * ms, genEvent("Paris!", 4, "stop")},
		{1 * ms, "[DONE]"},
	} {
		clk.Step(s.after)
		r.Event(wire.Event{Data: []byte(s.data)})
	}
	res := r.Finish(200, OK)
	if res.TTFT != 50*ms || res.OutputChunks != 3 || res.OutputTokens != 4 || res.InputTokens != 7 || res.CachedTokens != 2 {
		t.Errorf("TTFT %v, chunks %d, tokens %d, input %d, cached %d; want 50ms, 3, 4, 7, 2",
			res.TTFT, res.OutputChunks, res.OutputTokens, res.InputTokens, res.CachedTokens)
	}
	if want := []time.Duration{20 * ms, 10 * ms}; len(res.Gaps) != 2 || res.Gaps[0] != want[0] || res.Gaps[1] != want[1] {
		t.Errorf("gaps %v, want %v", res.Gaps, want)
	}
	if res.Outcome != OK || !res.Ended || res.FinishReason != "stop" {
		t.Errorf("outcome %v, ended %v, finish %q", res.Outcome, res.Ended, res.FinishReason)
	}
}

func TestRecorderRouteBodies(t *testing.T) {
	for _, tc := range []struct {
		name          string
		route         wire.Route
		body          string
		input, output int
		outputChunks  int
		outcome       Outcome
		finish        string
	}{
		{"responses", wire.RouteResponses, `{"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],"status":"completed","usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}`, 5, 2, 1, OK, "stop"},
		{"responses failed", wire.RouteResponses, `{"object":"response","output":[],"status":"failed","usage":null}`, 0, 0, 0, EngineError, ""},
		{"generate", wire.RouteGenerate, `{"text":"Hi there","output_ids":[1,2],"meta_info":{"prompt_tokens":4,"completion_tokens":2,"finish_reason":{"type":"length","length":2}}}`, 4, 2, 1, OK, "length"},
		{"generate abort", wire.RouteGenerate, `{"text":"","meta_info":{"prompt_tokens":4,"completion_tokens":0,"finish_reason":{"type":"abort","message":"x"}}}`, 0, 0, 0, EngineError, ""},
		{"embeddings", wire.RouteEmbeddings, `{"object":"list","data":[{"index":0,"object":"embedding","embedding":[0.1,-0.2]}],"model":"e","usage":{"prompt_tokens":6,"total_tokens":6,"completion_tokens":0}}`, 6, 0, 0, OK, ""},
		{"rerank", wire.RouteRerank, `{"id":"r","model":"m","usage":{"total_tokens":9},"results":[{"index":0,"relevance_score":0.9}]}`, 0, 0, 0, OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(tc.route, false, Options{Clock: clock.NewFake(time.Unix(1, 0))})
			r.Body([]byte(tc.body))
			res := r.Finish(200, OK)
			if res.InputTokens != tc.input || res.OutputTokens != tc.output || res.OutputChunks != tc.outputChunks || res.Outcome != tc.outcome || res.FinishReason != tc.finish {
				t.Errorf("input %d output %d chunks %d outcome %v finish %q; want %d %d %d %v %q",
					res.InputTokens, res.OutputTokens, res.OutputChunks, res.Outcome, res.FinishReason, tc.input, tc.output, tc.outputChunks, tc.outcome, tc.finish)
			}
			if res.TTFT != 0 || res.TPOT != 0 {
				t.Errorf("a whole answer has no TTFT (%v) or TPOT (%v)", res.TTFT, res.TPOT)
			}
		})
	}
}
