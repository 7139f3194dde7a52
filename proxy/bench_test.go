package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/tracing"
	"github.com/slogate/slogate/wire"
)

// BenchmarkProxyStream measures what the proxy costs per streamed token. C clients each
// stream one completion of benchTokens tokens per op from an in-process upstream, either
// directly or through a Proxy wired as `slogate serve` wires it (usage injection and the
// stream idle timeout on, the exporter as observer). The upstream sends a token only after
// the client received the previous one, so every chunk travels the path alone (one
// upstream read, one parse and decode, one write and flush), as chunks paced by an
// engine do; nothing is batched.
//
// Reported per streamed token: wall ns (with -cpu 1, the CPU cost of the whole
// in-process system: upstream, proxy and clients), allocations and bytes. The proxy's
// own cost is the proxied figure minus the direct one of the same run.
//
//	go test -run '^$' -bench BenchmarkProxyStream -cpu 1 -count 5 ./proxy
func BenchmarkProxyStream(b *testing.B) {
	for _, c := range []int{1, 64, 512} {
		for _, via := range []string{"direct", "proxied"} {
			b.Run(fmt.Sprintf("streams=%d/%s", c, via), func(b *testing.B) {
				benchStreams(b, c, via == "proxied", nil)
			})
		}
	}
}

// BenchmarkProxyTracing measures what tracing adds per streamed token, as
// BenchmarkProxyStream measures the proxy: off; on with a head ratio of 0, where no
// request is sampled and none is kept by the tail rule (every request ends ok inside
// its SLO: 99% of requests at the default ratio, 0.01); and on with a ratio of 1, every
// request's three spans exported (to an exporter that discards them, so the cost is
// slogate's, not the network's).
//
//	go test -run '^$' -bench BenchmarkProxyTracing -cpu 1 -count 5 ./proxy
func BenchmarkProxyTracing(b *testing.B) {
	for _, c := range []int{64, 512} {
		for _, tc := range []struct {
			name  string
			ratio float64 // < 0: off
		}{{"off", -1}, {"ratio=0", 0}, {"ratio=1", 1}} {
			b.Run(fmt.Sprintf("streams=%d/tracing=%s", c, tc.name), func(b *testing.B) {
				var tr *tracing.Tracing
				if tc.ratio >= 0 {
					var err error
					if tr, err = tracing.NewExporting(context.Background(), tracing.Config{SampleRatio: tc.ratio}, discard{}); err != nil {
						b.Fatal(err)
					}
					defer tr.Shutdown(context.Background())
				}
				benchStreams(b, c, true, tr)
			})
		}
	}
}

// discard is a span exporter that keeps nothing.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// benchTokens is the output length of every benchmark request.
const benchTokens = 64

// benchEnv is the benchmarks' system: the lockstep upstream, and the proxy in front of
// it when proxied, wired as `slogate serve` wires it (its own transport, usage injection
// and the stream idle timeout on, the exporter as observer and judge).
type benchEnv struct {
	up     *lockstepUpstream
	client *http.Client
	target string // where the clients send: the proxy, or the upstream directly
	closes []func()
}

func newBenchEnv(b *testing.B, proxied bool, tracing *tracing.Tracing) *benchEnv {
	e := &benchEnv{up: newLockstepUpstream()}
	upSrv := httptest.NewServer(e.up)
	e.closes = append(e.closes, upSrv.Close)
	e.target = upSrv.URL
	if proxied {
		u, err := url.Parse(upSrv.URL)
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		metrics := exporter.New(reg, exporter.Options{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond,
			ServedModels: func() []string { return []string{"bench"} }})
		p := proxy.New(proxy.Config{Upstream: u, InjectUsage: true, StreamIdleTimeout: time.Minute, Observers: []proxy.Observer{metrics},
			Tracing: tracing, Judge: metrics})
		pSrv := httptest.NewUnstartedServer(p)
		if os.Getenv("BENCH_ATTACHED") == "" { // as `slogate serve` runs: streams detached
			if err := p.Detach(pSrv.Config); err != nil {
				b.Fatal(err)
			}
		}
		pSrv.Start()
		e.closes = append(e.closes, pSrv.Close, func() { // before Close: no connection returns to it then
			_ = pSrv.Config.Shutdown(context.Background())
			p.CloseDetached()
		}, p.CloseIdleConnections)
		e.target = pSrv.URL
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	e.client = &http.Client{Transport: tr}
	e.closes = append(e.closes, tr.CloseIdleConnections)
	return e
}

// close stops the servers and closes the idle connections, last opened first.
func (e *benchEnv) close() {
	for i := len(e.closes) - 1; i >= 0; i-- {
		e.closes[i]()
	}
}

func benchStreams(b *testing.B, c int, proxied bool, tracing *tracing.Tracing) {
	env := newBenchEnv(b, proxied, tracing)
	defer env.close()
	up, client, target := env.up, env.client, env.target
	body := fmt.Sprintf(`{"model":"bench","prompt":"benchmark the proxy","max_tokens":%d,"stream":true}`, benchTokens)

	round := func() {
		var wg sync.WaitGroup
		for i := range c {
			wg.Go(func() {
				if err := up.stream(client, target+"/v1/completions", body, strconv.Itoa(i)); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round() // open the connections
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rounds := 0
	for b.Loop() {
		round()
		rounds++
	}
	runtime.ReadMemStats(&after)
	tokens := float64(rounds) * float64(c) * benchTokens
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tokens, "ns/token")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/tokens, "allocs/token")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/tokens, "B/token")
}

// lockstepUpstream is a completions endpoint that streams max_tokens vLLM-shaped chunks,
// each once the client has received the one before (the client signals on its stream's
// channel, named by the X-Bench-Stream header), then the usage chunk if asked and [DONE].
type lockstepUpstream struct {
	mu    sync.Mutex
	turns map[string]chan struct{}
}

func newLockstepUpstream() *lockstepUpstream {
	return &lockstepUpstream{turns: make(map[string]chan struct{})}
}

func (u *lockstepUpstream) turn(id string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch, ok := u.turns[id]
	if !ok {
		ch = make(chan struct{}, 1)
		u.turns[id] = ch
	}
	return ch
}

func (u *lockstepUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, err := wire.Inspect(wire.RouteCompletions, body)
	if err != nil || !req.Stream {
		http.Error(w, "want a streaming completions request", http.StatusBadRequest)
		return
	}
	turn := u.turn(r.Header.Get("X-Bench-Stream"))
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	rc := http.NewResponseController(w)
	head := `data: {"id":"cmpl-bench","object":"text_completion","created":1,"model":"bench","choices":[`
	buf := make([]byte, 0, 512)
	for k := range req.MaxTokens {
		if k > 0 {
			select {
			case <-turn:
			case <-r.Context().Done():
				return
			}
		}
		finish := "null"
		if k == req.MaxTokens-1 {
			finish = `"length"`
		}
		buf = append(buf[:0], head...)
		buf = append(buf, `{"index":0,"text":" token","logprobs":null,"finish_reason":`...)
		buf = append(buf, finish...)
		buf = append(buf, `,"stop_reason":null}],"usage":null}`+"\n\n"...)
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			return
		}
	}
	buf = buf[:0]
	if req.IncludeUsage {
		buf = fmt.Appendf(buf, "%s],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n",
			head, 5+req.MaxTokens, req.MaxTokens)
	}
	buf = append(buf, "data: [DONE]\n\n"...)
	_, _ = w.Write(buf)
}

// stream sends one request as stream id and reads it to the end, giving the upstream
// its turn after every token but the last.
func (u *lockstepUpstream) stream(client *http.Client, target, body, id string) error {
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Bench-Stream", id)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	turn := u.turn(id)
	r := wire.NewSSEReader(resp.Body, 0)
	n := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if bytes.HasPrefix(ev.Data, []byte("{")) && !bytes.Contains(ev.Data, []byte(`"choices":[]`)) {
			if n++; n < benchTokens {
				turn <- struct{}{}
			}
		}
	}
	if n != benchTokens {
		return fmt.Errorf("stream %s: %d tokens, want %d", id, n, benchTokens)
	}
	return nil
}
