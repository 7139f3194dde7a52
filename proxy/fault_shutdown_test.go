package proxy_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
)

// TestShutdown: when a server's grace period runs out, Shutdown cuts every request in
// flight short, wherever it is, and tells its client: a stream mid-answer ends with an
// error event (code 503) and an aborted connection, never as a complete answer; a request
// waiting in admission's queue or for the engine's headers gets 503. Each counts as
// shutdown, with the status its client got; the engine's side of each request ends, and
// nothing holds a place afterwards.
func TestShutdown(t *testing.T) {
	t.Run("streaming and queued in admission", func(t *testing.T) {
		s := startSim(t, enginesim.Config{})
		adm := oneAtATime(t)
		f := startMetered(t, s.hs.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute, Admission: adm})
		resp := send(context.Background(), t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", longCompletion, fault("stall_after=2"))
		defer resp.Body.Close()
		first := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() == 2 })
		queued := make(chan result, 1)
		go func() {
			code, _, body := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", longCompletion, nil)
			queued <- result{code, body}
		}()
		eventually(t, "the second request queued", func() (bool, string) {
			q := adm.Stats().Tiers[0].Queued
			return q[admission.Interactive] == 1, fmt.Sprintf("queued %v", q)
		})

		if n := f.p.Shutdown(); n != 2 {
			t.Errorf("Shutdown cut %d requests, want 2", n)
		}
		rest := readSSE(resp.Body, nil)
		checkShutdownEvent(t, rest)
		if first.outputs()+rest.outputs() != 2 {
			t.Errorf("the stream carried %d outputs, want the 2 sent before the stall", first.outputs()+rest.outputs())
		}
		q := waitRecv(t, "the queued request's answer", queued)
		if q.code != http.StatusServiceUnavailable || !strings.Contains(apiError(t, q.body).Message, "shutting down") {
			t.Errorf("the queued request got %d %s; want 503 saying slogate is shutting down", q.code, q.body)
		}
		f.obs.wait(t, 2)
		if m := f.requests(t); !maps.Equal(m, map[string]int{"shutdown 200": 1, "shutdown 503": 1}) {
			t.Errorf("slogate_requests_total %v; want one shutdown 200 (the stream) and one shutdown 503 (the queued)", m)
		}
		engineFreed(t, s, 1)
		if ts := adm.Stats().Tiers[0]; ts.InFlight != 0 || ts.Queued != [len(ts.Queued)]int{} {
			t.Errorf("admission holds %d in flight, %v queued after Shutdown", ts.InFlight, ts.Queued)
		}
		if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
			t.Errorf("InFlight = %d, %d after Shutdown", n, kv)
		}
		// Shutdown is not a mode: a request after it is served.
		if code, _, body := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", `{"prompt":"after","max_tokens":3,"ignore_eos":true}`, nil); code != http.StatusOK {
			t.Errorf("a request after Shutdown got %d %s, want 200", code, body)
		}
	})

	t.Run("before the response headers", func(t *testing.T) {
		up, cancelled := holdingUpstream(t)
		f := startMetered(t, up.hs.URL, proxy.Config{InjectUsage: true})
		answered := make(chan result, 1)
		go func() {
			code, _, body := do(t, f.hs.Client(), http.MethodPost, f.hs.URL+"/v1/completions", longCompletion, nil)
			answered <- result{code, body}
		}()
		up.await(t, 1)
		if n := f.p.Shutdown(); n != 1 {
			t.Errorf("Shutdown cut %d requests, want 1", n)
		}
		a := waitRecv(t, "the answer", answered)
		if a.code != http.StatusServiceUnavailable || !strings.Contains(apiError(t, a.body).Message, "shutting down") {
			t.Errorf("got %d %s; want 503 saying slogate is shutting down", a.code, a.body)
		}
		waitRecv(t, "the upstream request to be cancelled", cancelled)
		if r := f.obs.last(t, 1).res; r.Outcome != measure.Shutdown || r.Status != http.StatusServiceUnavailable {
			t.Errorf("observed %v %d, want shutdown 503", r.Outcome, r.Status)
		}
	})
}

// result is a whole answer: its status and body.
type result struct {
	code int
	body []byte
}

// checkShutdownEvent checks that a stream Shutdown cut ended with the error event and
// an aborted body, without [DONE].
func checkShutdownEvent(t *testing.T, r sseRead) {
	t.Helper()
	e := r.errorEvent()
	switch {
	case e == nil:
		t.Errorf("the cut stream carried no error event")
	case e.Code != http.StatusServiceUnavailable || !strings.Contains(e.Message, "shutting down"):
		t.Errorf("error event %+v; want code 503 saying slogate is shutting down", *e)
	}
	if r.done || r.err == nil {
		t.Errorf("the cut stream ended with done=%v err=%v; want an aborted body without [DONE]", r.done, r.err)
	}
}
