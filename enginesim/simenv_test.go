package enginesim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/wire"
)

// HTTP-level tests of the simulator: a real Server driven by Run, served by httptest,
// spoken to by the real OpenAI Go SDK and by raw requests decoded with package wire.

const tinyModel = "sim-tiny"

// simEnv is one simulated engine served over HTTP for the duration of a test.
type simEnv struct {
	t      testing.TB
	srv    *Server
	hs     *httptest.Server
	client openai.Client
}

// tinyProfile returns the built-in tiny profile, changed by edit when edit is not nil.
func tinyProfile(t testing.TB, edit func(*Profile)) Profile {
	t.Helper()
	p, err := LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&p)
	}
	return p
}

// startSim starts a simulator for cfg (the tiny profile when cfg has none) and stops it
// when the test ends: the HTTP server first (it waits for the handlers), then the engine.
func startSim(t testing.TB, cfg Config) *simEnv {
	t.Helper()
	if cfg.Profile.Name == "" {
		cfg.Profile = tinyProfile(t, nil)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	})
	client := openai.NewClient(
		option.WithBaseURL(hs.URL+"/v1"),
		option.WithAPIKey("x"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(hs.Client()),
	)
	return &simEnv{t: t, srv: srv, hs: hs, client: client}
}

// do sends a request (with a JSON body unless body is "") and returns the status, the
// headers and the whole response body.
func (e *simEnv) do(method, path, body string, header http.Header) (int, http.Header, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.hs.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.hs.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, data
}

// postJSON posts v, encoded as JSON, and decodes a 200 answer into out.
func (e *simEnv) postJSON(path string, v, out any) {
	e.t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	status, _, data := e.do(http.MethodPost, path, string(body), nil)
	if status != http.StatusOK {
		e.t.Fatalf("POST %s: status %d, body %s", path, status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		e.t.Fatalf("POST %s: decoding %s: %v", path, data, err)
	}
}

// tokenize returns the token count POST /tokenize gives for body (a {"prompt"} or
// {"messages"} object), checking that the count matches the ids.
func (e *simEnv) tokenize(body any) int {
	e.t.Helper()
	var got struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}
	e.postJSON("/tokenize", body, &got)
	if got.Count != len(got.Tokens) {
		e.t.Fatalf("/tokenize: count %d but %d tokens", got.Count, len(got.Tokens))
	}
	return got.Count
}

// countText returns the number of tokens /tokenize finds in text.
func (e *simEnv) countText(text string) int {
	e.t.Helper()
	return e.tokenize(map[string]any{"prompt": text})
}

// userMessages is a one-message chat, in the shape the SDK sends.
func userMessages(content string) []map[string]any {
	return []map[string]any{{"role": "user", "content": content}}
}

// rawStream is an SSE response read to its end with wire.SSEReader.
type rawStream struct {
	chunks []wire.Chunk // decoded data events before [DONE]
	done   bool         // a data: [DONE] event arrived (and nothing after it)
	err    error        // what ended reading; nil for a clean end of the body
}

// output returns the output text of the chunks (completion text, reasoning and content)
// and the number of chunks that carried output.
func (r rawStream) output() (text string, chunks int) {
	var b strings.Builder
	for i := range r.chunks {
		c := &r.chunks[i]
		if c.OutputBytes() == 0 {
			continue
		}
		chunks++
		for _, ch := range c.Choices {
			b.WriteString(ch.Text)
			if d := ch.Delta; d != nil {
				b.WriteString(deref(d.ReasoningContent))
				b.WriteString(deref(d.Content))
			}
		}
	}
	return b.String(), chunks
}

// usageOnly returns the usage-only chunks.
func (r rawStream) usageOnly() []wire.Chunk {
	var out []wire.Chunk
	for _, c := range r.chunks {
		if c.UsageOnly() {
			out = append(out, c)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// stream posts body to path and reads the event stream until it ends, ctx ends or
// onChunk returns false. It fails the test unless the answer is a 200 event stream, and
// when any event follows [DONE].
func (e *simEnv) stream(ctx context.Context, path, body string, header http.Header, onChunk func(wire.Chunk) bool) rawStream {
	e.t.Helper()
	resp := e.post(ctx, path, body, header)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("POST %s: status %d, body %s", path, resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		e.t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	var out rawStream
	r := wire.NewSSEReader(resp.Body, 0)
	for {
		ev, err := r.Next()
		if err != nil {
			if err != io.EOF {
				out.err = err
			}
			return out
		}
		if ev.Comment {
			continue
		}
		if out.done {
			e.t.Errorf("event after [DONE]: %q", ev.Data)
			continue
		}
		if ev.IsDone() {
			out.done = true
			continue
		}
		c, err := wire.DecodeChunk(ev.Data)
		if err != nil {
			e.t.Fatalf("decoding chunk %q: %v", ev.Data, err)
		}
		out.chunks = append(out.chunks, c)
		if onChunk != nil && !onChunk(c) {
			return out
		}
	}
}

// await returns once cond holds, checking it after every change of the engine's state
// (Server.Await), and fails the test with what cond last reported if it does not hold
// within a generous limit, which only turns a hang into a failure.
func (e *simEnv) await(what string, cond func() (bool, string)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var state string
	if _, err := e.srv.Await(ctx, func(Stats) bool {
		var ok bool
		ok, state = cond()
		return ok
	}); err != nil {
		e.t.Fatalf("%s: not reached: %v; last state: %s", what, err, state)
	}
}

// apiError decodes an error response body, failing the test if it is not one.
func apiError(t testing.TB, body []byte) wire.APIError {
	t.Helper()
	e, err := wire.DecodeError(body)
	if err != nil {
		t.Fatalf("not an OpenAI error body: %v: %s", err, body)
	}
	if e.Message == "" {
		t.Errorf("error without a message: %s", body)
	}
	return e
}

// post sends a JSON body to path with header and returns the response, whose body the
// caller closes.
func (e *simEnv) post(ctx context.Context, path, body string, header http.Header) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.hs.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.hs.Client().Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}
