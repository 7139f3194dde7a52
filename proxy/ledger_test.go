package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// ledgerPrompt is the length of ledgerBody's prompt: token ids, which admission counts
// exactly.
const ledgerPrompt = 40

// ledgerBody is a completions request of ledgerPrompt token ids for max output tokens.
func ledgerBody(max int, stream bool) string {
	ids := make([]string, ledgerPrompt)
	for i := range ids {
		ids[i] = fmt.Sprint(1000 + i)
	}
	return fmt.Sprintf(`{"model":"sim-tiny","prompt":[%s],"max_tokens":%d,"ignore_eos":true,"stream":%v}`, strings.Join(ids, ","), max, stream)
}

// wantLedger fails unless admission's ledger counts requests in flight holding kv tokens.
func (f *front) wantLedger(t testing.TB, requests int, kv int64) {
	t.Helper()
	if n, got := f.ledger.InFlight(); n != requests || got != kv {
		t.Fatalf("the ledger counts %d requests, %d KV tokens in flight; want %d, %d", n, got, requests, kv)
	}
}

// panickingTransport panics on every request, as a bug on the way to the engine would,
// with the value net/http recovers silently.
type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic(http.ErrAbortHandler)
}

// TestLedgerThroughProxy sends one request through the proxy, with admission in each
// mode, for every way a request ends: while it streams, admission's ledger counts its
// prompt and every output chunk the client has seen, and once it has ended (reported to
// the observers) it has left the ledger, whatever ended it.
func TestLedgerThroughProxy(t *testing.T) {
	endings := []struct {
		name       string
		body       string        // default ledgerBody(6, true)
		faults     string        // the simulator's, for this request
		engine     string        // "": the simulator; "closed": nothing listens; "panic": the transport panics
		idle       time.Duration // StreamIdleTimeout; default a minute
		midway     int           // outputs the client reads before the ledger is checked and cut ends the request
		cut        func(f *front, leave context.CancelFunc)
		noAnswer   bool            // the client's request fails without a response
		outcome    measure.Outcome // checked unless anyOutcome
		anyOutcome bool
	}{
		{name: "answered", outcome: measure.OK},
		{name: "answered without a stream", body: ledgerBody(6, false), outcome: measure.OK},
		{name: "the client leaves mid-stream", faults: "stall_after=3", midway: 3,
			cut: func(_ *front, leave context.CancelFunc) { leave() }, outcome: measure.ClientCancelled},
		{name: "Shutdown cuts the stream short", faults: "stall_after=3", midway: 3,
			cut: func(f *front, _ context.CancelFunc) { f.p.Shutdown() }, outcome: measure.Shutdown},
		{name: "the stream goes silent past the idle timeout", faults: "stall_after=3", idle: 100 * time.Millisecond, outcome: measure.UpstreamTimeout},
		{name: "the engine fails the generation", faults: "error_after=3", outcome: measure.EngineError},
		// The copy to the client fails, and the ReverseProxy panics with ErrAbortHandler.
		{name: "the engine drops the connection mid-stream", faults: "drop_after=3", outcome: measure.AbortedMidstream},
		{name: "the engine answers 503", faults: "status=503", outcome: measure.UpstreamError},
		{name: "the engine is unreachable", engine: "closed", outcome: measure.UpstreamError},
		{name: "a panic on the way to the engine", engine: "panic", noAnswer: true, anyOutcome: true},
		{name: "refused by the proxy: never admitted", body: `{"model":"sim-tiny"}`, outcome: measure.BadRequest},
	}
	s := startSim(t, enginesim.Config{})
	for _, mode := range []admission.Mode{admission.Off, admission.Shadow, admission.Enforce} {
		for _, tc := range endings {
			t.Run(mode.String()+"/"+tc.name, func(t *testing.T) {
				cfg := proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute, Admission: newAdmission(t, mode, admission.DefaultConfig())}
				if tc.idle > 0 {
					cfg.StreamIdleTimeout = tc.idle
				}
				target := s.hs.URL
				switch tc.engine {
				case "closed":
					target = closedURL(t)
				case "panic":
					cfg.Transport = panickingTransport{}
				}
				f := startProxy(t, target, cfg)
				body := tc.body
				if body == "" {
					body = ledgerBody(6, true)
				}
				ctx, leave := context.WithCancel(t.Context())
				defer leave()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.hs.URL+"/v1/completions", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if tc.faults != "" {
					req.Header = fault(tc.faults)
				}
				resp, err := f.hs.Client().Do(req)
				switch {
				case tc.noAnswer && err == nil:
					resp.Body.Close()
					t.Fatalf("got an answer (%d), want the request to fail", resp.StatusCode)
				case !tc.noAnswer && err != nil:
					t.Fatal(err)
				case !tc.noAnswer:
					defer resp.Body.Close()
					if tc.midway > 0 {
						got := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() == tc.midway })
						if got.outputs() != tc.midway {
							t.Fatalf("the client read %d outputs (err %v), want %d", got.outputs(), got.err, tc.midway)
						}
						// The proxy reports each output to the ticket before it forwards it,
						// and the engine stalls after these.
						f.wantLedger(t, 1, ledgerPrompt+int64(tc.midway))
						tc.cut(f, leave)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				r := f.obs.last(t, 1).res
				if !tc.anyOutcome && r.Outcome != tc.outcome {
					t.Errorf("observed %v, want %v", r.Outcome, tc.outcome)
				}
				// The ticket is released before the observers see the request.
				f.wantLedger(t, 0, 0)
			})
		}
	}
}

// TestLedgerCountsOnlyAdmitted: a request waiting in admission's queue does not count in
// the ledger, however long it waits; it counts from the moment it is granted, with its
// output as it streams, and leaves when it ends.
func TestLedgerCountsOnlyAdmitted(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	adm := oneAtATime(t)
	f := startProxy(t, s.hs.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute, Admission: adm})
	// stream starts a long stream that stalls after outputs, and reads them.
	stream := func(ctx context.Context, outputs int) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.hs.URL+"/v1/completions", strings.NewReader(ledgerBody(3000, true)))
		if err != nil {
			return nil, err
		}
		req.Header = fault(fmt.Sprintf("stall_after=%d", outputs))
		resp, err := f.hs.Client().Do(req)
		if err != nil {
			return nil, err
		}
		if got := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() == outputs }); got.outputs() != outputs {
			resp.Body.Close()
			return nil, fmt.Errorf("the client read %d outputs (err %v), want %d", got.outputs(), got.err, outputs)
		}
		return resp, nil
	}
	first, leaveFirst := context.WithCancel(t.Context())
	defer leaveFirst()
	a, err := stream(first, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Body.Close()
	f.wantLedger(t, 1, ledgerPrompt+2)

	second, leaveSecond := context.WithCancel(t.Context())
	defer leaveSecond()
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() { // admitted only once the first has gone
		resp, err := stream(second, 1)
		got <- answer{resp, err}
	}()
	eventually(t, "the second request queued", func() (bool, string) {
		q := adm.Stats().Tiers[0].Queued
		return q[admission.Interactive] == 1, fmt.Sprintf("queued %v", q)
	})
	f.wantLedger(t, 1, ledgerPrompt+2)

	leaveFirst()
	b := waitRecv(t, "the second request's first output", got)
	if b.err != nil {
		t.Fatal(b.err)
	}
	defer b.resp.Body.Close()
	f.wantLedger(t, 1, ledgerPrompt+1)
	leaveSecond()
	f.obs.wait(t, 2)
	f.wantLedger(t, 0, 0)
}

// TestPrefillThroughProxy: a streaming request counts in its tier's prompts in prefill
// from its admission until the proxy forwards its first output chunk, and no longer
// while it goes on streaming. (One that does not stream would count only until an
// estimate of its prefill's end: 40 tokens at the bound's 50,000 a second.)
func TestPrefillThroughProxy(t *testing.T) {
	cfg := admission.DefaultConfig()
	for i := range cfg.Tiers {
		cfg.Tiers[i].MaxPrefillTokens = 100000
	}
	s := startSim(t, enginesim.Config{})
	f := startProxy(t, s.hs.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute, Admission: newAdmission(t, admission.Enforce, cfg)})
	prefill := func() int64 { return f.ledger.Stats().Tiers[0].PrefillTokens }
	send := func(ctx context.Context, body, faults string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.hs.URL+"/v1/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = fault(faults)
		resp, err := f.hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// Before its first output: the engine holds the whole answer back for a while.
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := send(t.Context(), ledgerBody(6, true), "delay=5s")
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	deadline := time.Now().Add(hangLimit)
	for n, _ := f.ledger.InFlight(); n == 0; n, _ = f.ledger.InFlight() {
		if time.Now().After(deadline) {
			t.Fatal("the delayed request was never admitted")
		}
		time.Sleep(time.Millisecond)
	}
	if got := prefill(); got != ledgerPrompt {
		t.Errorf("waiting for its first output: %d prompt tokens in prefill, want its %d", got, ledgerPrompt)
	}
	<-done
	if got := prefill(); got != 0 {
		t.Errorf("after it ended: %d prompt tokens in prefill", got)
	}

	// Streaming on after its first outputs: the engine stalls after three.
	ctx, leave := context.WithCancel(t.Context())
	resp := send(ctx, ledgerBody(6, true), "stall_after=3")
	got := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() == 3 })
	if got.outputs() != 3 {
		t.Fatalf("the client read %d outputs (err %v), want 3", got.outputs(), got.err)
	}
	f.wantLedger(t, 1, ledgerPrompt+3)
	if got := prefill(); got != 0 {
		t.Errorf("streaming after its first output: %d prompt tokens in prefill, want 0", got)
	}
	leave()
	resp.Body.Close()
}

// TestPrefillPassthrough: a stream whose event outgrows the proxy's parser is passed
// through unmeasured from there on, so its first output can no longer be seen; its
// prompt leaves the tier's prefill as passthrough starts, not at the stream's end.
func TestPrefillPassthrough(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		big := strings.Repeat("x", wire.DefaultMaxEvent+1024)
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":%q}]}\n\n", big)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer upstream.Close()
	defer close(release)
	cfg := admission.DefaultConfig()
	cfg.Tiers[0].MaxPrefillTokens = 100000
	f := startProxy(t, upstream.URL, proxy.Config{StreamIdleTimeout: time.Minute, Admission: newAdmission(t, admission.Enforce, cfg)})
	resp, err := f.hs.Client().Post(f.hs.URL+"/v1/completions", "application/json", strings.NewReader(ledgerBody(6, true)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, wire.DefaultMaxEvent)); err != nil {
		t.Fatalf("reading the large event: %v", err)
	}
	f.wantLedger(t, 1, ledgerPrompt) // still open
	if got := f.ledger.Stats().Tiers[0].PrefillTokens; got != 0 {
		t.Errorf("passed through: %d prompt tokens in prefill, want 0", got)
	}
}
