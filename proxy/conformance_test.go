package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/slogate/slogate/internal/conformance"
	"github.com/slogate/slogate/proxy"
)

// routePaths maps the corpus's route names to the paths a client sends them to, and
// routeBodies to a streaming request body of each.
var (
	routePaths = map[string]string{
		"completions":      "/v1/completions",
		"chat_completions": "/v1/chat/completions",
		"responses":        "/v1/responses",
		"generate":         "/generate",
	}
	routeBodies = map[string]string{
		"responses": `{"model":"m","input":"hi","stream":true}`,
		"generate":  `{"text":"hi","sampling_params":{"max_new_tokens":4},"stream":true}`,
	}
)

// TestStreamConformanceThroughProxy replays every transcript of the corpus
// (wire/testdata/streams) from an engine, in small uneven pieces, through the proxy: the
// client must get the engine's bytes unchanged, and the proxy must report the outcome and
// tokens the corpus names.
func TestStreamConformanceThroughProxy(t *testing.T) {
	streams, err := conformance.Streams()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		for _, piece := range []int{0, 7} {
			t.Run(fmt.Sprintf("%s/piece=%d", s.Name, piece), func(t *testing.T) {
				path, ok := routePaths[s.Expect.Route]
				if !ok {
					t.Fatalf("no path for route %q", s.Expect.Route)
				}
				up := startUpstream(t, replay(s.Body, piece))
				// include_usage is the client's own: the proxy has nothing to add or strip.
				f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: true})
				body, ok := routeBodies[s.Expect.Route]
				if !ok {
					body = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"prompt":"hi","messages":[{"role":"user","content":"hi"}]}`
				}
				resp, got := postAll(t, f.hs.URL+path, body)
				if resp.StatusCode != http.StatusOK || !bytes.Equal(got, s.Body) {
					t.Errorf("status %d; the client got\n%q\nthe engine sent\n%q", resp.StatusCode, got, s.Body)
				}
				if g := conformance.Of(f.obs.last(t, 1).res); g != s.Expect {
					t.Errorf("reported\n  %+v\nwant\n  %+v", g, s.Expect)
				}
			})
		}
	}
}

// TestErrorConformanceThroughProxy answers requests with every error answer of the
// corpus (wire/testdata/errors), the engines' refusals among them: the client must get
// the engine's status and bytes unchanged, with no Retry-After the engine did not send,
// and the proxy must report the outcome the corpus names.
func TestErrorConformanceThroughProxy(t *testing.T) {
	answers, err := conformance.Errors()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		t.Run(a.Name, func(t *testing.T) {
			path, ok := routePaths[a.Expect.Route]
			if !ok {
				t.Fatalf("no path for route %q", a.Expect.Route)
			}
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(a.Expect.Status)
				_, _ = w.Write(a.Body)
			})
			f := startProxy(t, up.hs.URL, proxy.Config{InjectUsage: true})
			body := fmt.Sprintf(`{"model":"m","stream":%v,"prompt":"hi","messages":[{"role":"user","content":"hi"}]}`, a.Expect.Stream)
			if a.Expect.Route == "generate" {
				body = fmt.Sprintf(`{"text":"hi","sampling_params":{"max_new_tokens":4},"stream":%v}`, a.Expect.Stream)
			}
			resp, got := postAll(t, f.hs.URL+path, body)
			if resp.StatusCode != a.Expect.Status || !bytes.Equal(got, a.Body) {
				t.Errorf("the client got %d %q; the engine sent %d %q", resp.StatusCode, got, a.Expect.Status, a.Body)
			}
			if ra := resp.Header.Get("Retry-After"); ra != "" {
				t.Errorf("Retry-After %q added to the engine's answer", ra)
			}
			res := f.obs.last(t, 1).res
			if res.Status != a.Expect.Status || res.Outcome.String() != a.Expect.Outcome || res.Stream != a.Expect.Stream {
				t.Errorf("reported status %d, outcome %s, stream %v; want %d, %s, %v", res.Status, res.Outcome, res.Stream, a.Expect.Status, a.Expect.Outcome, a.Expect.Stream)
			}
		})
	}
}

// postAll posts a JSON body to url and returns the response with its whole body read.
func postAll(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, got
}
