package proxy_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// sdkAnswer is what the OpenAI SDK made of one streamed answer.
type sdkAnswer struct {
	text   string
	finish string
	usage  usage
	chunks int
}

// usage is the token accounting of an answer.
type usage struct{ prompt, completion, total int64 }

func usageOf(u openai.CompletionUsage) usage {
	return usage{u.PromptTokens, u.CompletionTokens, u.TotalTokens}
}

// sdkStream streams one request with the OpenAI SDK from base (a server URL).
func sdkStream(t *testing.T, base string, client *http.Client, chat, includeUsage bool) sdkAnswer {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0), option.WithHTTPClient(client))
	var opts openai.ChatCompletionStreamOptionsParam
	if includeUsage {
		opts.IncludeUsage = openai.Bool(true)
	}
	var out sdkAnswer
	ctx := context.Background()
	if chat {
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         simModel,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say something")},
			MaxTokens:     openai.Int(24),
			StreamOptions: opts,
		})
		defer s.Close()
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
			out.chunks++
		}
		if err := s.Err(); err != nil {
			t.Fatalf("chat stream from %s: %v", base, err)
		}
		if len(acc.Choices) != 1 {
			t.Fatalf("chat stream from %s: %d choices", base, len(acc.Choices))
		}
		out.text, out.finish, out.usage = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, usageOf(acc.Usage)
		return out
	}
	s := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:         simModel,
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String("say something")},
		MaxTokens:     openai.Int(24),
		StreamOptions: opts,
	})
	defer s.Close()
	var text strings.Builder
	for s.Next() {
		ch := s.Current()
		out.chunks++
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
			if c.FinishReason != "" {
				out.finish = string(c.FinishReason)
			}
		}
		if ch.Usage.CompletionTokens > 0 {
			out.usage = usageOf(ch.Usage)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("completions stream from %s: %v", base, err)
	}
	out.text = text.String()
	return out
}

// createdSeconds matches the wall-clock "created" field of chunks and model cards.
var createdSeconds = regexp.MustCompile(`"created":\d+`)

// TestStreamMatchesDirect sends the same request to a simulator directly and to an
// identical one behind slogate, with the OpenAI SDK and raw: the client must get the same
// answer, and the same bytes (but for the wall-clock "created" field).
func TestStreamMatchesDirect(t *testing.T) {
	cases := []struct {
		name         string
		chat         bool
		includeUsage bool
	}{
		{"completions", false, false},
		{"completions with usage", false, true},
		{"chat", true, false},
		{"chat with usage", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The simulator's text depends on its request counter: two fresh, identical
			// simulators answer the same sequence of requests alike.
			direct := startSim(t, enginesim.Config{})
			_, f := startEnv(t, enginesim.Config{})

			want := sdkStream(t, direct.hs.URL, direct.hs.Client(), tc.chat, tc.includeUsage)
			got := sdkStream(t, f.hs.URL, f.hs.Client(), tc.chat, tc.includeUsage)
			if got != want {
				t.Errorf("SDK through slogate: %+v\n               direct: %+v", got, want)
			}
			if want.text == "" || want.finish == "" || (want.usage.completion > 0) != tc.includeUsage {
				t.Errorf("direct answer %+v: want text, a finish reason and usage only when asked", want)
			}

			path, body := "/v1/completions", `{"model":"sim-tiny","prompt":"raw bytes","max_tokens":24,"stream":true`
			if tc.chat {
				path, body = "/v1/chat/completions", `{"model":"sim-tiny","messages":[{"role":"user","content":"raw bytes"}],"max_tokens":24,"stream":true`
			}
			if tc.includeUsage {
				body += `,"stream_options":{"include_usage":true}`
			}
			body += "}"
			wantStatus, wantHeader, wantRaw := do(t, direct.hs.Client(), http.MethodPost, direct.hs.URL+path, body, nil)
			status, header, raw := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+path, body, nil)
			wantRaw, raw = createdSeconds.ReplaceAll(wantRaw, []byte(`"created":0`)), createdSeconds.ReplaceAll(raw, []byte(`"created":0`))
			if status != wantStatus || !bytes.Equal(raw, wantRaw) || len(raw) == 0 {
				t.Errorf("raw bytes through slogate (%d):\n%s\ndirect (%d):\n%s", status, raw, wantStatus, wantRaw)
			}
			for _, h := range []string{"Content-Type", "Cache-Control"} {
				if header.Get(h) != wantHeader.Get(h) {
					t.Errorf("%s = %q, direct %q", h, header.Get(h), wantHeader.Get(h))
				}
			}

			for i, o := range f.obs.wait(t, 2) {
				r := o.res
				if r.Outcome != measure.OK || !r.Ended || r.Tokens != measure.TokensUsage || r.OutputTokens != r.OutputChunks || r.OutputTokens == 0 {
					t.Errorf("request %d: %v, ended %v, %d tokens from %v in %d chunks; want ok, ended, usage = chunks", i, r.Outcome, r.Ended, r.OutputTokens, r.Tokens, r.OutputChunks)
				}
			}
			if r := f.obs.all()[0].res; r.FinishReason != want.finish || (tc.includeUsage && int64(r.OutputTokens) != want.usage.completion) {
				t.Errorf("observed finish %q, %d tokens; the SDK saw %q, %+v", r.FinishReason, r.OutputTokens, want.finish, want.usage)
			}
		})
	}
}

// readGolden returns a file of testdata.
func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cutTransport reads each response body whole and hands it to the proxy in reads that end
// at the given offsets, or one byte per read when cuts is nil, so that the proxy meets
// exactly the splits of the stream a test wants, such as between a "\r" and its "\n".
type cutTransport struct {
	base *http.Transport
	cuts []int
}

func (c cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = &cutBody{data: data, cuts: c.cuts}
	return resp, nil
}

// cutBody returns data in reads that end at cuts (offsets into data) and at its end;
// with nil cuts, one byte per read.
type cutBody struct {
	data []byte
	cuts []int
	pos  int
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.pos == len(b.data) {
		return 0, io.EOF
	}
	end := b.pos + 1
	if b.cuts != nil {
		end = len(b.data)
		for _, c := range b.cuts {
			if c > b.pos {
				end = min(end, c)
			}
		}
	}
	n := copy(p, b.data[b.pos:end])
	b.pos += n
	return n, nil
}

func (b *cutBody) Close() error { return nil }

// TestRecordedStreamBytes replays a recorded stream (comments, CRLF line endings,
// multi-line data, a data line that is not JSON) through slogate: the client gets exactly
// the engine's bytes, minus the usage chunk when slogate asked for it.
func TestRecordedStreamBytes(t *testing.T) {
	withUsage, plain := readGolden(t, "engine_usage.sse"), readGolden(t, "engine_plain.sse")
	usageStart, usageEnd := usageChunk(t, withUsage, plain)
	cases := []struct {
		name          string
		inject        bool
		clientUsage   bool
		piece         int   // the engine flushes pieces of this many bytes (0: at once)
		contentLength bool  // the engine sends a Content-Length
		oneByte       bool  // the proxy reads the engine one byte at a time
		cuts          []int // the proxy reads the engine in reads ending at these offsets
		want          []byte
		tokens        measure.TokenSource
	}{
		{name: "client asked for usage", inject: true, clientUsage: true, want: withUsage, tokens: measure.TokensUsage},
		{name: "client asked for usage, small pieces", inject: true, clientUsage: true, piece: 7, want: withUsage, tokens: measure.TokensUsage},
		{name: "slogate injected usage", inject: true, want: plain, tokens: measure.TokensUsage},
		{name: "slogate injected usage, small pieces", inject: true, piece: 5, want: plain, tokens: measure.TokensUsage},
		{name: "slogate injected usage, Content-Length", inject: true, contentLength: true, want: plain, tokens: measure.TokensUsage},
		{name: "slogate injected usage, one byte per read", inject: true, oneByte: true, want: plain, tokens: measure.TokensUsage},
		{name: "slogate injected usage, read cut in the CRLF before it", inject: true, cuts: []int{usageStart - 1}, want: plain, tokens: measure.TokensUsage},
		{name: "slogate injected usage, read cut in its final CRLF", inject: true, cuts: []int{usageEnd - 1}, want: plain, tokens: measure.TokensUsage},
		{name: "slogate injected usage, reads cut in both CRLFs", inject: true, cuts: []int{usageStart - 1, usageEnd - 1}, want: plain, tokens: measure.TokensUsage},
		{name: "client asked for usage, one byte per read", inject: true, clientUsage: true, oneByte: true, want: withUsage, tokens: measure.TokensUsage},
		{name: "client asked for usage, reads cut in CRLFs", inject: true, clientUsage: true, cuts: []int{usageStart - 1, usageEnd - 1}, want: withUsage, tokens: measure.TokensUsage},
		{name: "no usage anywhere", want: plain, tokens: measure.TokensChunks},
		{name: "no usage anywhere, one byte per read", oneByte: true, want: plain, tokens: measure.TokensChunks},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, recordedEngine(plain, withUsage, tc.piece, tc.contentLength))
			cfg := proxy.Config{InjectUsage: tc.inject}
			if tc.oneByte || tc.cuts != nil {
				base := &http.Transport{DisableCompression: true}
				t.Cleanup(base.CloseIdleConnections)
				cfg.Transport = cutTransport{base: base, cuts: tc.cuts}
			}
			f := startProxy(t, up.hs.URL, cfg)
			body := `{"model":"rec","prompt":"hi","stream":true}`
			if tc.clientUsage {
				body = `{"model":"rec","prompt":"hi","stream":true,"stream_options":{"include_usage":true}}`
			}
			status, header, got := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", body, nil)
			if status != http.StatusOK || !bytes.Equal(got, tc.want) {
				t.Errorf("client got %d:\n%q\nwant:\n%q", status, got, tc.want)
			}
			if cl := header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(got)) {
				t.Errorf("Content-Length %s, body %d bytes", cl, len(got))
			}
			r := f.obs.last(t, 1).res
			wantIn := 0
			if tc.tokens == measure.TokensUsage {
				wantIn = 5
			}
			if r.Outcome != measure.OK || r.Status != 200 || !r.Ended || r.FinishReason != "stop" ||
				r.OutputChunks != 3 || r.OutputTokens != 3 || r.InputTokens != wantIn || r.Tokens != tc.tokens || r.TTFT <= 0 {
				t.Errorf("observed %+v; want ok, 200, ended, stop, 3 chunks, 3 tokens from %v, %d in, a TTFT", r, tc.tokens, wantIn)
			}
		})
	}
}

// usageChunk returns where the usage chunk starts and ends in the recorded stream
// withUsage (both offsets follow a "\r\n"), checking that plain is the same stream
// without it.
func usageChunk(t *testing.T, withUsage, plain []byte) (start, end int) {
	t.Helper()
	start = bytes.Index(withUsage, []byte(`data: {"id":"cmpl-rec","object":"text_completion","created":1700000000,"model":"rec","choices":[]`))
	end = start + bytes.Index(withUsage[start:], []byte("\r\n\r\n")) + 4
	if start < 0 || !bytes.Equal(append(withUsage[:start:start], withUsage[end:]...), plain) {
		t.Fatal("testdata: engine_plain.sse is not engine_usage.sse without its usage chunk")
	}
	return start, end
}

// recordedEngine answers a completions request with a recorded stream: withUsage when
// the request asks for usage, plain otherwise, flushed in pieces of piece bytes, with a
// Content-Length when contentLength is set.
func recordedEngine(plain, withUsage []byte, piece int, contentLength bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := wire.Inspect(wire.RouteCompletions, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer := plain
		if req.IncludeUsage {
			answer = withUsage
		}
		if contentLength {
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		}
		replay(answer, piece)(w, r)
	}
}

// TestOversizedEvent checks the fallback for an event larger than the parser's limit: the
// rest of the stream passes through byte for byte, unmeasured, and a stream that still
// ends with [DONE] is not reported as broken.
func TestOversizedEvent(t *testing.T) {
	chunk := func(text string) string {
		return `data: {"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"` + text + `","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}` + "\n\n"
	}
	huge := "data: " + strings.Repeat("x", 2<<20) + "\n\n"
	if len(huge) <= wire.DefaultMaxEvent {
		t.Fatal("the test event is not over the limit")
	}
	cases := []struct {
		name    string
		body    string
		outputs int // output chunks measured before the fallback
		ended   bool
	}{
		{name: "after output", body: chunk(" a") + huge + chunk(" b") + "data: [DONE]\n\n", outputs: 1, ended: true},
		{name: "first", body: huge + chunk(" a") + "data: [DONE]\r\n\r\n", ended: true},
		{name: "after output, no end marker", body: chunk(" a") + huge + chunk(" b"), outputs: 1},
		{name: "at the end, unterminated", body: chunk(" a") + chunk(" b") + strings.TrimSuffix(huge, "\n\n"), outputs: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, replay([]byte(tc.body), 64<<10))
			f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: true})
			status, _, got := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", `{"prompt":"x","stream":true}`, nil)
			if status != http.StatusOK || string(got) != tc.body {
				t.Errorf("client got %d, %d bytes; want 200 and the %d bytes sent (equal: %v)", status, len(got), len(tc.body), string(got) == tc.body)
			}
			r := f.obs.last(t, 1).res
			if r.Status != http.StatusOK || r.OutputChunks != tc.outputs || r.Ended != tc.ended {
				t.Errorf("observed status %d, %d output chunks, ended %v; want 200, %d, %v", r.Status, r.OutputChunks, r.Ended, tc.outputs, tc.ended)
			}
			wantOutcome := measure.OK
			if tc.outputs > 0 && !tc.ended {
				wantOutcome = measure.AbortedMidstream
			}
			if r.Outcome != wantOutcome {
				t.Errorf("outcome %v, want %v", r.Outcome, wantOutcome)
			}
		})
	}
}

// TestClientClosesAfterDone checks a client that closes the stream as soon as it has the
// end marker, as the OpenAI SDKs do, while the engine has not ended its body yet: the
// answer was complete, so the request is not reported as cancelled.
func TestClientClosesAfterDone(t *testing.T) {
	answer := []byte("data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" b\",\"finish_reason\":\"length\"}]}\n\n" +
		"data: [DONE]\n\n")
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		replay(answer, 0)(w, r)
		<-r.Context().Done() // the body ends only when the proxy goes away
	})
	f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: true})
	resp := send(context.Background(), t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", `{"prompt":"x","stream":true}`, nil)
	sr := wire.NewSSEReader(resp.Body, 0)
	for {
		ev, err := sr.Next()
		if err != nil {
			t.Fatalf("stream ended before [DONE]: %v", err)
		}
		if ev.IsDone() {
			break
		}
	}
	resp.Body.Close()
	r := f.obs.last(t, 1).res
	if r.Outcome != measure.OK || r.Status != http.StatusOK || !r.Ended || r.OutputChunks != 2 || r.FinishReason != "length" {
		t.Errorf("observed %v, status %d, ended %v, %d output chunks, finish %q; want ok, 200, ended, 2, length", r.Outcome, r.Status, r.Ended, r.OutputChunks, r.FinishReason)
	}
}
