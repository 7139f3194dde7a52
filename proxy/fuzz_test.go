package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// fuzzAnswer is what the fuzz upstream answers to every request it accepts.
var fuzzAnswer = []byte("data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" ok\",\"finish_reason\":\"stop\"}],\"usage\":null}\n\ndata: [DONE]\n\n")

// FuzzProxyRequest sends arbitrary bodies to both inference routes through slogate. The
// proxy must never fail: it answers 400 or 413 itself (as OpenAI error JSON, without
// forwarding), or passes on the upstream's answer unchanged; the upstream must only ever
// get a valid request (slogate may have added stream_options to it, and must have to a
// stream); and every request is reported to the observer exactly once.
func FuzzProxyRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","prompt":"hi","stream":true}`,
		`{"prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":false}}`,
		`{"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"messages":[],"stream":true,"stream_options":null}  ` + "\n",
		`{"prompt":"x","stream":true,"continuous_usage_stats":true}`,
		`{"prompt":"x","stream":"yes"}`,
		`{"prompt":"x","max_tokens":-3}`,
		`{"prompt":"x"} trailing`,
		`[]`,
		``,
		`{"prompt":"\ud800","stream":true}`,
		`{"prompt":"}","stream":true}`,
	} {
		f.Add(false, []byte(seed))
		f.Add(true, []byte(seed))
	}

	// One upstream and one proxy for the whole run.
	up := startUpstream(f, fuzzEngine)
	fr := startProxyKeeping(f, up.hs.URL, proxy.Config{InjectUsage: true, MaxBodyBytes: 4 << 10}, 1)
	client := fr.hs.Client()
	reported := 0

	f.Fuzz(func(t *testing.T, chat bool, body []byte) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		forwarded := up.count()
		resp, err := client.Post(fr.hs.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %q: %v", body, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("reading the answer to %q: %v", body, err)
		}
		reported++
		o := fr.obs.last(t, reported)
		if o.res.Status != resp.StatusCode || o.req.Route != wire.RouteOf(path) {
			t.Errorf("observed status %d route %v, client got %d on %s", o.res.Status, o.req.Route, resp.StatusCode, path)
		}
		checkFuzzAnswer(t, up, body, resp.StatusCode, got, forwarded)
	})
}

// fuzzEngine accepts only what an engine would read as a valid request, asking for usage
// at the end of every stream (slogate injects it), and answers it with fuzzAnswer.
func fuzzEngine(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, err := wire.Inspect(wire.RouteOf(r.URL.Path), body)
	switch {
	case !json.Valid(body) || err != nil:
		http.Error(w, fmt.Sprintf("forwarded an invalid request (%v)", err), http.StatusTeapot)
	case req.Stream && !req.IncludeUsage:
		http.Error(w, "forwarded a stream without include_usage", http.StatusTeapot)
	default:
		replay(fuzzAnswer, 0)(w, r)
	}
}

// checkFuzzAnswer checks slogate's answer to body: the upstream's, forwarded once, or
// slogate's own 400 or 413, not forwarded.
func checkFuzzAnswer(t *testing.T, up *upstream, body []byte, status int, got []byte, forwarded int) {
	t.Helper()
	nowForwarded := up.count()
	switch status {
	case http.StatusOK:
		if !bytes.Equal(got, fuzzAnswer) || nowForwarded != forwarded+1 {
			t.Errorf("200 with %q after %d forwarded requests; want the upstream's answer", got, nowForwarded-forwarded)
		}
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		e, err := wire.DecodeError(got)
		if err != nil || e.Type != wire.TypeInvalidRequest || e.Code != status {
			t.Errorf("%d answer %q (%v) is not slogate's error", status, got, err)
		}
		if nowForwarded != forwarded {
			t.Errorf("a refused request was forwarded")
		}
	default:
		msg := ""
		if rs := up.requests(); nowForwarded > forwarded {
			msg = fmt.Sprintf("; forwarded %q", rs[len(rs)-1].body)
		}
		t.Errorf("status %d for %q: %s%s", status, body, got, msg)
	}
}
