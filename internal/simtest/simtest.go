// Package simtest holds what the end-to-end tests of slogate's commands and of its
// sidecar share: a simulated engine on loopback, streams through slogate, and waiting
// for a condition. It is imported only by tests.
package simtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/wire"
)

// Engine serves a simulator of cfg on an httptest server until the test ends.
func Engine(t testing.TB, cfg enginesim.Config) *httptest.Server {
	t.Helper()
	return WrappedEngine(t, cfg, func(h http.Handler) http.Handler { return h })
}

// WrappedEngine serves a simulator of cfg on an httptest server until the test ends,
// behind the handler wrap makes of the simulator's: a test's way to watch or alter the
// requests the engine sees.
func WrappedEngine(t testing.TB, cfg enginesim.Config, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	sim, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go sim.Run(ctx)
	up := httptest.NewServer(wrap(sim.Handler()))
	t.Cleanup(func() { up.Close(); stop() })
	return up
}

// KeyedEngine serves a simulator of profile p on loopback and returns its host:port and
// a count of the POST requests that carried key as their bearer token, which shows the
// key was sent; it serves requests without the key too.
func KeyedEngine(t testing.TB, p enginesim.Profile, key string) (string, *atomic.Int64) {
	t.Helper()
	var keyed atomic.Int64
	up := WrappedEngine(t, enginesim.Config{Profile: p}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get("Authorization") == "Bearer "+key {
				keyed.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	return strings.TrimPrefix(up.URL, "http://"), &keyed
}

// WaitFor polls cond every 10 ms until it holds, failing the test after patience.
func WaitFor(t testing.TB, what string, patience time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(patience)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s", patience, what)
		case <-tick.C:
		}
	}
}

// Status returns the status code of GET url, or 0 when the request fails.
func Status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Get returns the body of GET url, whatever its status; it fails the test when the
// request fails.
func Get(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Send sends req and returns the status and the whole body; it fails the test when the
// request fails.
func Send(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Post sends an empty POST to url and returns its status; it fails the test when the
// request fails.
func Post(t testing.TB, url string) int {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// OpenStream starts a streaming completion of n tokens at base and returns its body once
// the first event arrived.
func OpenStream(t testing.TB, base string, n int) *wire.SSEReader {
	t.Helper()
	body := fmt.Sprintf(`{"prompt":"drain me","max_tokens":%d,"ignore_eos":true,"stream":true}`, n)
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Rest reads the stream to its end and reports whether [DONE] arrived.
func Rest(r *wire.SSEReader) (done bool, err error) {
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return done, nil
		}
		if err != nil {
			return done, err
		}
		done = done || ev.IsDone()
	}
}

// FreeAddr returns a loopback address no one listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// NoSecrets fails the test if text, described by what, contains any of the secrets.
func NoSecrets(t testing.TB, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s contains the credential %q", what, s)
		}
	}
}

// Buffer is a bytes.Buffer safe for concurrent use, e.g. as a log's writer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len returns the number of bytes written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// ProbeWorkload is a probe workload file the tiny simulator serves in a second or two.
const ProbeWorkload = `name: tiny-shapes
kind: shapes
shapes:
  - {name: S, input: 64, output: 16}
concurrency: [1, 2]
duration: 300ms
`

// GuessedTiers is a tiers file of one tier, "all", with limits nobody measured.
const GuessedTiers = `tiers:
  - name: all
    max_in_flight: 64
    max_queue: 16
`
