package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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
				resp, err := http.Post(f.hs.URL+path, "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
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
