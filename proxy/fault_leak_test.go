package proxy_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/proxy"
)

// leakKinds are the requests of TestNoLeaksUnderFaults, in turn: each sends one and
// returns the slogate_requests_total key ("outcome code") of what its client saw.
var leakKinds = []struct {
	name string
	send func(ctx context.Context, client *http.Client, base string) (string, error)
}{
	{"complete stream", func(ctx context.Context, c *http.Client, base string) (string, error) {
		return streamSeen(ctx, c, base, shortStream, "", 0)
	}},
	{"engine 503", func(ctx context.Context, c *http.Client, base string) (string, error) {
		return streamSeen(ctx, c, base, shortStream, "status=503", 0)
	}},
	{"dropped mid-stream", func(ctx context.Context, c *http.Client, base string) (string, error) {
		return streamSeen(ctx, c, base, longCompletion, "drop_after=3", 0)
	}},
	{"stalled until the idle timeout", func(ctx context.Context, c *http.Client, base string) (string, error) {
		return streamSeen(ctx, c, base, longCompletion, "stall_after=2", 0)
	}},
	{"client leaves mid-stream", func(ctx context.Context, c *http.Client, base string) (string, error) {
		return streamSeen(ctx, c, base, longCompletion, "", 2)
	}},
	{"not streaming", func(ctx context.Context, c *http.Client, base string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(`{"model":"sim-tiny","prompt":"hi","max_tokens":8}`))
		if err != nil {
			return "", err
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return "", err
		}
		return fmt.Sprintf("ok %d", resp.StatusCode), nil
	}},
}

// streamSeen sends a stream with the given simulator faults and reads it, leaving after
// leaveAfter outputs when it is not 0, and returns what the client saw as a
// slogate_requests_total key.
func streamSeen(ctx context.Context, client *http.Client, base, body, faults string, leaveAfter int) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	if faults != "" {
		req.Header.Set(enginesim.FaultHeader, faults)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Sprintf("upstream_error %d", resp.StatusCode), nil
	}
	got := readSSE(resp.Body, func(r sseRead) bool { return leaveAfter > 0 && r.outputs() == leaveAfter })
	e := got.errorEvent()
	switch {
	case leaveAfter > 0 && !got.done && got.err == nil:
		return "client_cancelled 499", nil
	case got.done && got.err == nil && e == nil:
		return "ok 200", nil
	case got.err != nil && e != nil && e.Code == http.StatusGatewayTimeout:
		return "upstream_timeout 200", nil
	case got.err != nil && e != nil && e.Code == http.StatusBadGateway && got.outputs() > 0:
		return "aborted_midstream 200", nil
	}
	return "", fmt.Errorf("unexpected stream: %d outputs, [DONE] %v, err %v, error event %+v", got.outputs(), got.done, got.err, e)
}

// TestNoLeaksUnderFaults sends 1,000 requests through slogate, 32 at a time, taking turns
// among the faults of the suite: complete streams, engine 503s, streams dropped by the
// engine or stalled until the idle timeout, clients that leave mid-stream, non-streaming
// answers. The metrics must count exactly what the clients saw, and slogate must give
// back what the requests held: goroutines, file descriptors (once idle connections are
// closed) and heap (after a GC, near its baseline). TestMain's goleak checks goroutines
// once more at the end.
func TestNoLeaksUnderFaults(t *testing.T) {
	const total, concurrency = 1000, 32
	s := startSim(t, enginesim.Config{})
	f := startMeteredKeeping(t, s.hs.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: 300 * time.Millisecond}, 1)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, DisableCompression: true}}
	quiesce := func() {
		client.CloseIdleConnections()
		s.hs.CloseClientConnections() // the proxy's idle connections to the engine
	}

	run := func(n int) map[string]int {
		seen := make(map[string]int)
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := make(chan int)
		for range concurrency {
			wg.Go(func() {
				for i := range next {
					k := leakKinds[i%len(leakKinds)]
					key, err := k.send(context.Background(), client, f.hs.URL)
					mu.Lock()
					if err != nil {
						t.Errorf("%s: %v", k.name, err)
					}
					seen[key]++
					mu.Unlock()
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		return seen
	}
	warm := run(2 * len(leakKinds)) // fill the pools and create every metric series
	f.obs.wait(t, 2*len(leakKinds))
	quiesce()
	goroutines, fds, heap := settle(t, -1, -1, 0)

	seen := run(total)
	for k, n := range warm {
		seen[k] += n
	}
	f.obs.wait(t, total+2*len(leakKinds))
	if m := f.requests(t); !maps.Equal(m, seen) {
		t.Errorf("slogate_requests_total %v; the clients saw %v", m, seen)
	}
	for _, want := range []string{"ok 200", "upstream_error 503", "aborted_midstream 200", "upstream_timeout 200", "client_cancelled 499"} {
		if seen[want] == 0 {
			t.Errorf("no request ended as %q: the fault was not exercised (%v)", want, seen)
		}
	}
	engineFreed(t, s, 1)
	if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
		t.Errorf("InFlight = %d, %d after every request ended", n, kv)
	}
	quiesce()
	settle(t, goroutines, fds, heap)
}

// settle waits until the process holds no more goroutines and file descriptors than
// the given baselines, or without baselines (-1) until no HTTP connection is left (the
// closed ones go away asynchronously); it returns the counts and the heap in use after a
// GC. With a baseline heap, it fails when the heap has grown by more than 8 MiB: a
// thousand requests that each left a buffer behind would exceed it.
func settle(t *testing.T, goroutines, fds int, heap uint64) (int, int, uint64) {
	t.Helper()
	var g, n int
	eventually(t, "goroutines and file descriptors back to their baseline", func() (bool, string) {
		g, n = runtime.NumGoroutine(), openFDs(t)
		if goroutines < 0 {
			c := connGoroutines()
			return c == 0, fmt.Sprintf("%d goroutines of HTTP connections", c)
		}
		return g <= goroutines && n <= fds, fmt.Sprintf("%d goroutines (baseline %d), %d fds (baseline %d)", g, goroutines, n, fds)
	})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if heap > 0 {
		t.Logf("heap in use %d bytes after the burst, %d before", ms.HeapInuse, heap)
		if ms.HeapInuse > heap+8<<20 {
			t.Errorf("heap in use %d bytes after the burst, %d before: grew by more than 8 MiB", ms.HeapInuse, heap)
		}
	}
	return g, n, ms.HeapInuse
}

// connGoroutines counts the goroutines of open HTTP connections: the servers' and the
// clients' (a transport's read and write loops).
func connGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := string(buf)
	return strings.Count(all, "net/http.(*conn).serve(") + strings.Count(all, "net/http.(*persistConn).readLoop(") +
		strings.Count(all, "net/http.(*persistConn).writeLoop(")
}

// openFDs counts the process's open file descriptors; the test is skipped where
// /proc/self/fd does not exist.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}
