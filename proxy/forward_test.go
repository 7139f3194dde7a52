package proxy_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/slogate/slogate/proxy"
)

// TestForwardMatchesReverseProxy: slogate forwards inference requests itself, and the
// routes it passes through with httputil.ReverseProxy; what the engine receives and
// what the client gets back must not depend on which: the same hop-by-hop headers
// (those the Connection header names too) dropped both ways, the client's forwarding
// headers dropped, no User-Agent added, the query kept, the engine's trailers passed on.
// The request and the answer differ only where slogate measures (the body it sends,
// Content-Length). A stream, which slogate writes itself once detached, is checked too.
func TestForwardMatchesReverseProxy(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) { forwardMatches(t, stream) })
	}
}

func forwardMatches(t *testing.T, stream bool) {
	type seen struct {
		query  string
		header http.Header
		host   string
	}
	var mu sync.Mutex
	got := map[string]seen{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.URL.Path] = seen{r.URL.RawQuery, r.Header.Clone(), r.Host}
		mu.Unlock()
		h := w.Header()
		h.Set("Content-Type", "application/json")
		answer := `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
		if stream {
			h.Set("Content-Type", "text/event-stream")
			answer = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
		}
		h.Set("Connection", "X-Engine-Hop")
		h.Set("X-Engine-Hop", "dropped")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("X-Engine", "kept")
		h.Add("X-Engine-Many", "a")
		h.Add("X-Engine-Many", "b")
		h.Set("Trailer", "X-Engine-Trailer")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, answer)
		h.Set("X-Engine-Trailer", "done")
		h.Set(http.TrailerPrefix+"X-Engine-Unannounced", "late")
	}))
	t.Cleanup(up.Close)
	f := startProxy(t, up.URL, proxy.Config{})

	answers := map[string]*http.Response{}
	for _, path := range []string{"/v1/chat/completions", "/v1/not-inference"} {
		req, err := http.NewRequest(http.MethodPost, f.hs.URL+path+"?api-version=2&x=a%20b", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string][]string{
			"Connection":          {"keep-alive, X-Client-Hop"},
			"X-Client-Hop":        {"dropped"},
			"Keep-Alive":          {"300"},
			"Te":                  {"trailers"},
			"Proxy-Authorization": {"Basic x"},
			"Forwarded":           {"for=192.0.2.1"},
			"X-Forwarded-For":     {"192.0.2.1"},
			"Authorization":       {"Bearer key"},
			"X-Request-Id":        {"r1"},
			"X-Client-Many":       {"a", "b"},
			"User-Agent":          {""}, // none sent: none must be added
		} {
			req.Header[k] = v
		}
		resp, err := f.hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // the trailers come after the body
		resp.Body.Close()
		answers[path] = resp
	}

	mu.Lock()
	defer mu.Unlock()
	inf, pass := got["/v1/chat/completions"], got["/v1/not-inference"]
	for _, h := range []http.Header{inf.header, pass.header} {
		h.Del("Content-Length") // slogate sends the body it read, the ReverseProxy streams the client's
		h.Del("Accept-Encoding")
	}
	if inf.query != pass.query || inf.host != pass.host {
		t.Errorf("the engine got query %q and host %q for inference, %q and %q passed through", inf.query, inf.host, pass.query, pass.host)
	}
	if !headersEqual(inf.header, pass.header) {
		t.Errorf("the engine got, for inference:\n%v\npassed through:\n%v", inf.header, pass.header)
	}
	for _, k := range []string{"X-Client-Hop", "Keep-Alive", "Proxy-Authorization", "Forwarded", "X-Forwarded-For", "User-Agent"} {
		if v, ok := inf.header[k]; ok {
			t.Errorf("the engine got %s: %v", k, v)
		}
	}
	if inf.header.Get("Te") != "trailers" || inf.header.Get("Authorization") != "Bearer key" || len(inf.header["X-Client-Many"]) != 2 {
		t.Errorf("the engine lost headers it should get: %v", inf.header)
	}

	ri, rp := answers["/v1/chat/completions"], answers["/v1/not-inference"]
	for _, h := range []http.Header{ri.Header, rp.Header} {
		h.Del("Content-Length")
		h.Del("Date")
	}
	if !headersEqual(ri.Header, rp.Header) || !headersEqual(ri.Trailer, rp.Trailer) {
		t.Errorf("the client got, for inference:\n%v (trailer %v)\npassed through:\n%v (trailer %v)", ri.Header, ri.Trailer, rp.Header, rp.Trailer)
	}
	if ri.Header.Get("X-Engine-Hop") != "" || ri.Header.Get("Keep-Alive") != "" || ri.Header.Get("X-Engine") != "kept" ||
		ri.Trailer.Get("X-Engine-Trailer") != "done" || ri.Trailer.Get("X-Engine-Unannounced") != "late" {
		t.Errorf("the client got headers %v, trailer %v", ri.Header, ri.Trailer)
	}
	if n, want := f.hijacked.Load(), map[bool]int64{false: 0, true: 1}[stream]; n != want {
		t.Errorf("%d answers detached, want %d", n, want)
	}
}

// headersEqual compares two headers, each key's values in order.
func headersEqual(a, b http.Header) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]string])
}
