package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// FuzzProxyResponse sends one request through slogate to an engine that answers with
// arbitrary bytes, as an event stream or a plain body, handed to the proxy in reads cut
// at arbitrary offsets. The client must get exactly the engine's bytes, in order, but
// for the usage chunks slogate asked for itself, which it removes whole (an event the
// engine sent, as an SSE parser reading the whole answer at once delimits it); and the
// request must be reported exactly once, with the status the client got.
func FuzzProxyResponse(f *testing.F) {
	// Small seeds: the fuzzer minimises every input it finds new coverage with by
	// removing ranges of its bytes, one request each, which takes long for a stream of a
	// kilobyte (TestRecordedStreamBytes replays the recorded ones).
	usage := `data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	text := `data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}`
	for _, s := range []string{
		text + "\n\n" + usage + "\n\ndata: [DONE]\n\n", text + "\r\n\r\n" + usage + "\r\n\r\ndata: [DONE]\r\n\r\n",
		usage + "\r\rdata: [DONE]\r\r", usage + "\n\n" + usage + "\n", usage, ": c\n\n" + text + "\n: c\n\n",
		"\xef\xbb\xbf" + usage + "\n\n", "", "data:\n\n", "event: error\ndata: {\"error\":{\"message\":\"m\"}}\n\n",
	} {
		f.Add(true, true, []byte(s), uint16(len(s)/2), uint16(len(s)-1))
		f.Add(true, false, []byte(s), uint16(1), uint16(2))
	}
	f.Add(true, true, []byte(usage+"\r\n\r\n"), uint16(len(usage)+1), uint16(len(usage)+3))
	f.Add(false, true, []byte(`{"choices":[{"index":0,"text":"a","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), uint16(3), uint16(0))
	f.Add(false, true, []byte("not json"), uint16(0), uint16(0))

	up := &fuzzUpstream{}
	fronts := map[bool]*front{}
	for _, inject := range []bool{false, true} {
		fronts[inject] = startProxyKeeping(f, "http://engine.invalid", proxy.Config{InjectUsage: inject, Transport: up}, 1)
	}
	reported := map[bool]int{}

	f.Fuzz(func(t *testing.T, stream, inject bool, answer []byte, cut1, cut2 uint16) {
		up.set(stream, answer, []int{int(cut1) % (len(answer) + 1), int(cut2) % (len(answer) + 1)})
		fr := fronts[inject]
		body := `{"model":"m","prompt":"x"}`
		if stream {
			body = `{"model":"m","prompt":"x","stream":true}`
		}
		resp, err := fr.hs.Client().Post(fr.hs.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("reading the answer to %q: %v", answer, err)
		}
		want := answer
		if stream && inject {
			want = withoutUsage(answer)
		}
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Fatalf("the engine answered\n%q\nthe client got %d\n%q\nwant\n%q", answer, resp.StatusCode, got, want)
		}
		reported[inject]++
		if o := fr.obs.last(t, reported[inject]); o.res.Status != resp.StatusCode {
			t.Fatalf("reported status %d, the client got %d", o.res.Status, resp.StatusCode)
		}
	})
}

// withoutUsage returns an event stream without its usage-only chunks, as a parser that
// reads it at once delimits its events.
func withoutUsage(stream []byte) []byte {
	p := wire.NewSSEParser(wire.DefaultMaxEvent)
	var out []byte
	_ = p.Feed(stream, func(ev wire.Event) error {
		if !ev.Comment && !ev.IsDone() {
			if c, err := wire.ScanChunk(ev.Data); err == nil && !c.IsError && c.UsageOnly() {
				return nil
			}
		}
		out = append(out, ev.Raw...)
		return nil
	})
	return append(out, p.Pending()...)
}

// fuzzUpstream is an engine behind a RoundTripper: it answers every request with its
// answer, as an event stream or JSON, handed out in reads that end at its cuts.
type fuzzUpstream struct {
	mu     sync.Mutex
	stream bool
	answer []byte
	cuts   []int
}

func (u *fuzzUpstream) set(stream bool, answer []byte, cuts []int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stream, u.answer, u.cuts = stream, bytes.Clone(answer), cuts
}

func (u *fuzzUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	h := http.Header{"Content-Type": {"application/json"}}
	if u.stream {
		h.Set("Content-Type", "text/event-stream")
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &cutBody{data: u.answer, cuts: append([]int{}, u.cuts...)}, ContentLength: -1, Request: r,
	}, nil
}
