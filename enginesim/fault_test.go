package enginesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/wire"
)

func TestParseFaults(t *testing.T) {
	cases := []struct {
		in   string
		want Faults
		err  bool
	}{
		{in: "", want: Faults{}},
		{in: " , ,", want: Faults{}},
		{in: "status=503", want: Faults{Status: 503, StatusRate: 1}}, // a status alone always fires
		{in: "status=429,rate=0.25", want: Faults{Status: 429, StatusRate: 0.25}},
		{in: "rate=1", want: Faults{Status: 500, StatusRate: 1}}, // a rate alone answers 500
		{in: "stall_after=3", want: Faults{StallAfter: 3}},
		{in: "drop_after=5", want: Faults{DropAfter: 5}},
		{in: "error_after=2", want: Faults{ErrorAfter: 2}},
		{in: "delay=300ms", want: Faults{FirstByteDelay: 300 * time.Millisecond}},
		{in: "delay=1h", want: Faults{FirstByteDelay: time.Hour}},
		{in: "delay=0s", want: Faults{}},
		{in: "loop", want: Faults{Loop: true}},
		{in: "reasoning=4", want: Faults{Reasoning: 4}},
		{in: " status = 500 , loop ,delay=2s ", want: Faults{Status: 500, StatusRate: 1, Loop: true, FirstByteDelay: 2 * time.Second}},
		{in: "stall_after=3,stall_after=7", want: Faults{StallAfter: 7}}, // the last one wins
		{in: "status=503,rate=0.5,stall_after=1,drop_after=2,delay=1ms,loop,reasoning=9",
			want: Faults{Status: 503, StatusRate: 0.5, StallAfter: 1, DropAfter: 2, FirstByteDelay: time.Millisecond, Loop: true, Reasoning: 9}},

		{in: "status=200", err: true},
		{in: "status=600", err: true},
		{in: "status=abc", err: true},
		{in: "status", err: true},
		{in: "rate=1.5", err: true},
		{in: "rate=0", err: true},
		{in: "rate=-0.1", err: true},
		{in: "rate=NaN", err: true},
		{in: "stall_after=0", err: true},
		{in: "stall_after=-1", err: true},
		{in: "drop_after=x", err: true},
		{in: "error_after=0", err: true},
		{in: "reasoning=", err: true},
		{in: "delay=-1s", err: true},
		{in: "delay=2h", err: true},
		{in: "delay=5", err: true},
		{in: "loop=true", err: true},
		{in: "explode", err: true},
		{in: "Status=503", err: true},
		{in: "status=503,bogus=1", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseFaults(tc.in)
			if tc.err {
				if !errors.Is(err, ErrBadFault) {
					t.Fatalf("ParseFaults(%q) = %+v, %v; want an error wrapping ErrBadFault", tc.in, got, err)
				}
				if got != (Faults{}) {
					t.Errorf("ParseFaults(%q) returned %+v with its error, want the zero value", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseFaults(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// formatFaults writes f in FaultHeader syntax, omitting the fields at their zero value.
func formatFaults(f Faults) string {
	var d []string
	if f.Status != 0 {
		d = append(d, "status="+strconv.Itoa(f.Status))
	}
	if f.StatusRate != 0 {
		d = append(d, "rate="+strconv.FormatFloat(f.StatusRate, 'g', -1, 64))
	}
	if f.StallAfter != 0 {
		d = append(d, "stall_after="+strconv.Itoa(f.StallAfter))
	}
	if f.DropAfter != 0 {
		d = append(d, "drop_after="+strconv.Itoa(f.DropAfter))
	}
	if f.ErrorAfter != 0 {
		d = append(d, "error_after="+strconv.Itoa(f.ErrorAfter))
	}
	if f.FirstByteDelay != 0 {
		d = append(d, "delay="+f.FirstByteDelay.String())
	}
	if f.Loop {
		d = append(d, "loop")
	}
	if f.Reasoning != 0 {
		d = append(d, "reasoning="+strconv.Itoa(f.Reasoning))
	}
	return strings.Join(d, ",")
}

func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{
		"", "status=503", "status=429,rate=0.25", "stall_after=3", "drop_after=5", "error_after=4", "delay=300ms",
		"loop", "reasoning=4", " status = 500 , loop ,delay=2s ", "rate=1e-3", "delay=1h0m0s",
		"status=503,rate=0.5,stall_after=1,drop_after=2,delay=1ms,loop,reasoning=9", "loop=1", "a=b=c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFaults(s)
		if err != nil {
			if !errors.Is(err, ErrBadFault) || got != (Faults{}) {
				t.Fatalf("ParseFaults(%q) = %+v, %v; want the zero value and ErrBadFault", s, got, err)
			}
			return
		}
		switch {
		case got.Status != 0 && (got.Status < 400 || got.Status > 599):
			t.Errorf("status %d outside 400-599", got.Status)
		case (got.Status == 0) != (got.StatusRate == 0):
			t.Errorf("status fault given by half: %+v", got)
		case got.Status != 0 && !(got.StatusRate > 0 && got.StatusRate <= 1):
			t.Errorf("rate %v outside (0,1]", got.StatusRate)
		case got.StallAfter < 0, got.DropAfter < 0, got.Reasoning < 0:
			t.Errorf("negative count in %+v", got)
		case got.FirstByteDelay < 0 || got.FirstByteDelay > time.Hour:
			t.Errorf("delay %v outside [0, 1h]", got.FirstByteDelay)
		}
		// What parses can be written back and parses to the same faults.
		back := formatFaults(got)
		again, err := ParseFaults(back)
		if err != nil || again != got {
			t.Errorf("ParseFaults(%q) = %+v; written back as %q it parses to %+v, %v", s, got, back, again, err)
		}
		// Merging onto no faults keeps every fault that was set.
		m := Faults{}.merge(got)
		if m.StallAfter != got.StallAfter || m.DropAfter != got.DropAfter || m.Loop != got.Loop ||
			m.Reasoning != got.Reasoning || m.FirstByteDelay != got.FirstByteDelay || m.Status != got.Status {
			t.Errorf("merge(%+v) = %+v", got, m)
		}
		if got.Status != 0 && m.StatusRate == 0 {
			t.Errorf("merge(%+v) leaves a status that never fires", got)
		}
	})
}

// faultHeader returns the header that sets faults for one request.
func faultHeader(v string) http.Header { return http.Header{FaultHeader: {v}} }

func TestFaultStatus(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Faults
		header string
		status int
	}{
		{name: "header status", header: "status=503", status: 503},
		{name: "header status and rate 1", header: "status=500,rate=1", status: 500},
		{name: "header 429", header: "status=429", status: 429},
		{name: "config status", cfg: Faults{Status: 503}, status: 503},
		{name: "config status and rate", cfg: Faults{Status: 502, StatusRate: 1}, status: 502},
		{name: "header overrides config", cfg: Faults{Status: 502, StatusRate: 1}, header: "status=504", status: 504},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := startSim(t, Config{Faults: tc.cfg})
			var h http.Header
			if tc.header != "" {
				h = faultHeader(tc.header)
			}
			status, _, body := sim.do(http.MethodPost, "/v1/completions", `{"prompt":"hi","max_tokens":2}`, h)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %s", status, tc.status, body)
			}
			if status == http.StatusOK {
				return
			}
			if e := apiError(t, body); e.Code != tc.status {
				t.Errorf("error code %v, want %d", e.Code, tc.status)
			}
			// The SDK sees the same status as an *openai.Error (no retries configured).
			_, err := sim.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: tinyModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			}, option.WithHeader(FaultHeader, tc.header))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
				t.Errorf("SDK error = %v, want *openai.Error with status %d", err, tc.status)
			}
			if st := sim.srv.Stats(); st.finishedTotal() != 0 || st.PromptTokens != 0 {
				t.Errorf("a faulted request reached the engine: %+v", st)
			}
		})
	}
}

// TestFaultStall checks that a stalled stream sends exactly the tokens before the stall
// and then nothing, not even when the engine has finished the request, until the client
// gives up.
func TestFaultStall(t *testing.T) {
	cases := []struct {
		name, path, body string
		cfg              Faults
		header           string
	}{
		{"completions header", "/v1/completions", `{"prompt":"hi","max_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, Faults{}, "stall_after=3"},
		{"chat header", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"ignore_eos":true,"stream":true}`, Faults{}, "stall_after=3"},
		{"completions config", "/v1/completions", `{"prompt":"hi","max_tokens":16,"ignore_eos":true,"stream":true}`, Faults{StallAfter: 3}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim := startSim(t, Config{Faults: tc.cfg})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var h http.Header
			if tc.header != "" {
				h = faultHeader(tc.header)
			}
			tokens := 0
			got := sim.stream(ctx, tc.path, tc.body, h, func(c wire.Chunk) bool {
				if c.OutputBytes() > 0 {
					tokens++
				}
				if tokens == 3 {
					// The engine goes on to finish all 16 tokens; the stream stays silent.
					sim.await("the engine finishes the request", func() (bool, string) {
						st := sim.srv.Stats()
						return st.FinishedByReason["length"] == 1, fmt.Sprintf("%+v", st)
					})
					time.AfterFunc(50*time.Millisecond, cancel) // the client gives up
				}
				return true
			})
			text, chunks := got.output()
			if chunks != 3 || sim.countText(text) != 3 {
				t.Errorf("%d chunks, %d tokens before the stall; want 3", chunks, sim.countText(text))
			}
			if got.done || len(got.usageOnly()) != 0 {
				t.Error("a stalled stream ended properly")
			}
			if !errors.Is(got.err, context.Canceled) {
				t.Errorf("reading ended with %v, want the client's cancellation", got.err)
			}
		})
	}
}

// TestFaultDrop checks that a dropped connection gives the client an unexpected EOF
// after exactly the tokens before the drop, and never [DONE].
func TestFaultDrop(t *testing.T) {
	t.Run("raw stream", func(t *testing.T) {
		sim := startSim(t, Config{})
		got := sim.stream(context.Background(), "/v1/completions",
			`{"prompt":"hi","max_tokens":16,"ignore_eos":true,"stream":true}`, faultHeader("drop_after=5"), nil)
		text, chunks := got.output()
		if chunks != 5 || sim.countText(text) != 5 {
			t.Errorf("%d chunks, %d tokens before the drop; want 5", chunks, sim.countText(text))
		}
		if got.done || !errors.Is(got.err, io.ErrUnexpectedEOF) {
			t.Errorf("stream ended with [DONE] %v, error %v; want no [DONE] and io.ErrUnexpectedEOF", got.done, got.err)
		}
		sim.await("the dropped request leaves the engine", sim.idle)
	})
	t.Run("sdk chat stream", func(t *testing.T) {
		sim := startSim(t, Config{Faults: Faults{DropAfter: 5}})
		s := sim.client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model:     tinyModel,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			MaxTokens: openai.Int(16),
		}, option.WithJSONSet("ignore_eos", true))
		defer s.Close()
		tokens := 0
		for s.Next() {
			if c := s.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				tokens++
			}
		}
		if tokens != 5 {
			t.Errorf("%d tokens before the drop, want 5", tokens)
		}
		if err := s.Err(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("stream error = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("sdk non-streaming", func(t *testing.T) {
		sim := startSim(t, Config{})
		_, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model:     tinyModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
			MaxTokens: openai.Int(8),
		}, option.WithHeader(FaultHeader, "drop_after=5"))
		var apiErr *openai.Error
		if err == nil || errors.As(err, &apiErr) {
			t.Errorf("error = %v, want a transport error", err)
		}
	})
	// With several tokens per chunk (speculative decoding), the earlier of a stall and a
	// drop decides where the stream is cut, whichever is named first.
	t.Run("drop before stall in one chunk", func(t *testing.T) {
		p := tinyProfile(t, func(p *Profile) { p.Speculation = Speculation{DraftTokens: 7, AcceptRate: 1} })
		sim := startSim(t, Config{Profile: p})
		got := sim.stream(context.Background(), "/v1/completions",
			`{"prompt":"hi","max_tokens":16,"ignore_eos":true,"stream":true}`, faultHeader("stall_after=6,drop_after=3"), nil)
		text, _ := got.output()
		if n := sim.countText(text); n != 3 || got.done || !errors.Is(got.err, io.ErrUnexpectedEOF) {
			t.Errorf("%d tokens, [DONE] %v, error %v; want 3 tokens then io.ErrUnexpectedEOF", n, got.done, got.err)
		}
	})
}

func TestFaultDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	cases := []struct {
		name   string
		cfg    Faults
		header string
	}{
		{"header", Faults{}, "delay=300ms"},
		{"config", Faults{FirstByteDelay: delay}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sim := startSim(t, Config{Faults: tc.cfg})
			start := time.Now()
			res, err := sim.client.Completions.New(context.Background(), openai.CompletionNewParams{
				Model:     tinyModel,
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
				MaxTokens: openai.Int(4),
			}, option.WithHeader(FaultHeader, tc.header), option.WithJSONSet("ignore_eos", true))
			if err != nil {
				t.Fatal(err)
			}
			// A lower bound the code guarantees, not a performance measure.
			if elapsed := time.Since(start); elapsed < delay {
				t.Errorf("answered after %v, before the %v delay", elapsed, delay)
			}
			if res.Usage.CompletionTokens != 4 {
				t.Errorf("completion tokens = %d, want 4", res.Usage.CompletionTokens)
			}
		})
	}
}

func TestFaultLoop(t *testing.T) {
	const phrase = " I say it once more."
	sim := startSim(t, Config{})
	cases := []struct {
		name, path, body string
	}{
		{"completions", "/v1/completions", `{"prompt":"hi","max_tokens":12,"ignore_eos":true}`},
		{"completions stream", "/v1/completions", `{"prompt":"hi","max_tokens":12,"ignore_eos":true,"stream":true}`},
		{"chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"ignore_eos":true}`},
		{"chat stream", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"ignore_eos":true,"stream":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var text string
			if strings.Contains(tc.body, `"stream":true`) {
				got := sim.stream(context.Background(), tc.path, tc.body, faultHeader("loop"), nil)
				text, _ = got.output()
			} else {
				status, _, body := sim.do(http.MethodPost, tc.path, tc.body, faultHeader("loop"))
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, body)
				}
				res, err := wire.DecodeResponse(body)
				if err != nil {
					t.Fatal(err)
				}
				text = res.Choices[0].Text
				if m := res.Choices[0].Message; m != nil {
					text = deref(m.Content)
				}
			}
			if want := strings.Repeat(phrase, 2); text != want {
				t.Errorf("text = %q, want %q", text, want)
			}
		})
	}
}

// TestFaultReasoning checks that the first N tokens of a chat answer come as
// reasoning_content and the rest as content.
func TestFaultReasoning(t *testing.T) {
	sim := startSim(t, Config{})
	t.Run("chat stream", func(t *testing.T) {
		got := sim.stream(context.Background(), "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"think"}],"max_tokens":10,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
			faultHeader("reasoning=4"), nil)
		var kinds []string
		var reasoning, content strings.Builder
		for _, c := range got.chunks {
			for _, ch := range c.Choices {
				d := ch.Delta
				if d == nil {
					t.Fatalf("chat chunk without a delta")
				}
				switch {
				case deref(d.ReasoningContent) != "" && deref(d.Content) != "":
					t.Errorf("one delta carries both reasoning and content")
				case deref(d.ReasoningContent) != "":
					kinds = append(kinds, "r")
					reasoning.WriteString(*d.ReasoningContent)
				case deref(d.Content) != "":
					kinds = append(kinds, "c")
					content.WriteString(*d.Content)
				}
			}
		}
		if want := "r r r r c c c c c c"; strings.Join(kinds, " ") != want {
			t.Errorf("token kinds = %v, want %s", kinds, want)
		}
		if sim.countText(reasoning.String()) != 4 || sim.countText(content.String()) != 6 {
			t.Errorf("reasoning %q, content %q; want 4 and 6 tokens", reasoning.String(), content.String())
		}
		if u := got.usageOnly(); len(u) != 1 || u[0].Usage.CompletionTokens != 10 {
			t.Errorf("usage chunks = %+v, want one with 10 completion tokens", u)
		}
	})
	t.Run("chat", func(t *testing.T) {
		status, _, body := sim.do(http.MethodPost, "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"think"}],"max_tokens":10,"ignore_eos":true}`, faultHeader("reasoning=4"))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		res, err := wire.DecodeResponse(body)
		if err != nil {
			t.Fatal(err)
		}
		m := res.Choices[0].Message
		if sim.countText(deref(m.ReasoningContent)) != 4 || sim.countText(deref(m.Content)) != 6 {
			t.Errorf("reasoning %q, content %q; want 4 and 6 tokens", deref(m.ReasoningContent), deref(m.Content))
		}
	})
	t.Run("completions ignore it", func(t *testing.T) {
		got := sim.stream(context.Background(), "/v1/completions",
			`{"prompt":"think","max_tokens":10,"ignore_eos":true,"stream":true}`, faultHeader("reasoning=4"), nil)
		text, chunks := got.output()
		if chunks != 10 || sim.countText(text) != 10 {
			t.Errorf("%d chunks, %d tokens of text; want 10", chunks, sim.countText(text))
		}
	})
}

// TestFaultError checks a generation that fails after 5 tokens: the flavor's engine sends
// the tokens, then its error event, then still [DONE] (no usage chunk, even when asked),
// and releases the request; a non-streaming request gets 500 with the error. The error
// event has the shape of the conformance corpus's transcript for that engine (keys, their
// order, Python's separators), message, type and code aside.
func TestFaultError(t *testing.T) {
	shape := regexp.MustCompile(`("message": )"[^"]*"|("type": )"[^"]*"|("code": )\d+`)
	blank := func(s string) string { return shape.ReplaceAllString(s, "$1$2$3_") }
	cases := []struct {
		flavor Flavor
		corpus string // the transcript whose error event the simulator's must match
	}{
		{FlavorVLLM, "vllm_chat_error_midstream.sse"},
		{FlavorSGLang, "sglang_chat_error_flat.sse"},
	}
	for _, tc := range cases {
		t.Run(string(tc.flavor), func(t *testing.T) {
			sim := startSim(t, Config{Flavor: tc.flavor})
			status, _, body := sim.do(http.MethodPost, "/v1/chat/completions",
				`{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
				faultHeader("error_after=5"))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
			if len(events) < 3 || events[len(events)-1] != "data: [DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", body)
			}
			got := strings.TrimPrefix(events[len(events)-2], "data: ")
			c, err := wire.DecodeChunk([]byte(got))
			if err != nil || c.Error == nil || c.Error.Code != http.StatusInternalServerError {
				t.Fatalf("event before [DONE] = %q (%v); want an error with code 500", got, err)
			}
			outputs := 0
			for _, ev := range events[:len(events)-2] {
				if c, err := wire.DecodeChunk([]byte(strings.TrimPrefix(ev, "data: "))); err == nil && c.OutputBytes() > 0 {
					outputs++
				} else if err == nil && c.UsageOnly() {
					t.Errorf("a usage chunk in a failed stream: %q", ev)
				}
			}
			if outputs != 5 {
				t.Errorf("%d output chunks before the error, want 5", outputs)
			}
			corpus, err := os.ReadFile(filepath.Join("..", "wire", "testdata", "streams", tc.corpus))
			if err != nil {
				t.Fatal(err)
			}
			var want string
			for _, line := range strings.Split(string(corpus), "\n") {
				if strings.Contains(line, `"error"`) {
					want = strings.TrimPrefix(line, "data: ")
				}
			}
			if blank(got) != blank(want) {
				t.Errorf("error event\n  %s\nhas not the shape of %s's\n  %s", got, tc.corpus, want)
			}
			sim.await("the failed request leaves the engine", sim.idle)

			status, _, body = sim.do(http.MethodPost, "/v1/completions", `{"prompt":"hi","max_tokens":16,"ignore_eos":true}`, faultHeader("error_after=5"))
			if status != http.StatusInternalServerError || apiError(t, body).Code != http.StatusInternalServerError {
				t.Errorf("non-streaming: %d %s; want 500 with the error", status, body)
			}
		})
	}
}
