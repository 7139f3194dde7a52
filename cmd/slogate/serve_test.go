package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/wire"
)

// testSidecar is a simulator with a sidecar in front, both on loopback.
type testSidecar struct {
	sc          *sidecar
	data, admin string // base URLs
	stop        context.CancelFunc
	done        chan error
}

func startTestSidecar(t *testing.T, drain time.Duration) *testSidecar {
	t.Helper()
	return startTestSidecarWith(t, func(cfg *serveSettings) { cfg.DrainTimeout = drain })
}

// startTestSidecarWith is startTestSidecar with settings edited by edit.
func startTestSidecarWith(t *testing.T, edit func(*serveSettings)) *testSidecar {
	t.Helper()
	p, _ := enginesim.LookupProfile("tiny")
	p.Timing = enginesim.Timing{StepBase: 0.005} // 5 ms per token
	return startTestSidecarOn(t, p, edit)
}

// startTestSidecarOn is startTestSidecarWith in front of a simulator of profile p.
func startTestSidecarOn(t *testing.T, p enginesim.Profile, edit func(*serveSettings)) *testSidecar {
	t.Helper()
	up := startTestEngine(t, enginesim.Config{Profile: p})
	cfg, err := demoSidecarSettings(strings.TrimPrefix(up.URL, "http://"), "error")
	if err != nil {
		t.Fatal(err)
	}
	edit(&cfg)
	return runTestSidecar(t, cfg, slog.New(slog.DiscardHandler))
}

// startTestEngine serves a simulator of cfg on httptest until the test ends.
func startTestEngine(t *testing.T, cfg enginesim.Config) *httptest.Server {
	t.Helper()
	sim, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go sim.Run(ctx)
	up := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { up.Close(); stop() })
	return up
}

// runTestSidecar runs a sidecar of cfg, logging to log, on loopback ports until the test
// ends, and returns once it is ready.
func runTestSidecar(t *testing.T, cfg serveSettings, log *slog.Logger) *testSidecar {
	t.Helper()
	sc, err := newSidecar(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	data, admin, err := listenPair("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ts := &testSidecar{sc: sc, data: "http://" + data.Addr().String(), admin: "http://" + admin.Addr().String(), stop: stop, done: make(chan error, 1)}
	go func() { ts.done <- sc.run(ctx, data, admin) }()
	t.Cleanup(func() { stop(); <-ts.done })
	waitFor(t, "the sidecar to be ready", func() bool { return status(ts.admin+"/readyz") == http.StatusOK })
	return ts
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForLong(t, what, 10*time.Second, cond)
}

// waitForLong is waitFor with a patience fit for work measured in tens of seconds.
func waitForLong(t *testing.T, what string, patience time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", patience, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openStream starts a streaming completion of n tokens through the sidecar and returns
// its body once the first event arrived.
func openStream(t *testing.T, base string, n int) *wire.SSEReader {
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

// rest reads the stream to its end and reports whether [DONE] arrived.
func rest(r *wire.SSEReader) (done bool, err error) {
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

// TestSIGTERMDrain: on shutdown, readiness turns false, new connections are refused, and
// a stream in flight finishes with [DONE] within the grace period; run returns nil.
func TestSIGTERMDrain(t *testing.T) {
	ts := startTestSidecar(t, 10*time.Second)
	stream := openStream(t, ts.data, 200) // about a second of tokens
	var wg sync.WaitGroup
	var done bool
	var streamErr error
	wg.Go(func() { done, streamErr = rest(stream) })

	ts.stop()
	waitFor(t, "readiness to turn false", func() bool { return ts.sc.ready() != nil })
	waitFor(t, "new connections to be refused", func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.data, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	wg.Wait()
	if streamErr != nil || !done {
		t.Errorf("the in-flight stream ended with done=%v, err=%v; want a clean [DONE]", done, streamErr)
	}
	if err := <-ts.done; err != nil {
		t.Errorf("run returned %v after draining, want nil", err)
	}
	ts.done <- nil // for the cleanup
}

// TestDrainTimeout: a stream longer than the grace period is cut when it expires, and
// run still returns nil.
func TestDrainTimeout(t *testing.T) {
	ts := startTestSidecar(t, 200*time.Millisecond)
	stream := openStream(t, ts.data, 3000) // 15 s of tokens
	ts.stop()
	done, _ := rest(stream)
	if done {
		t.Errorf("a stream longer than the drain timeout ended cleanly; want it cut")
	}
	if err := <-ts.done; err != nil {
		t.Errorf("run returned %v, want nil", err)
	}
	ts.done <- nil
}

// TestServeSIGTERM runs `slogate serve` as a process, sends it SIGTERM while a stream is
// in flight, and expects the stream to finish and the process to exit 0.
func TestServeSIGTERM(t *testing.T) {
	p, _ := enginesim.LookupProfile("tiny")
	p.Timing = enginesim.Timing{StepBase: 0.005}
	up := startTestEngine(t, enginesim.Config{Profile: p})
	data, admin := freeAddr(t), freeAddr(t)
	cmd := exec.Command(os.Args[0], "serve", "--upstream", up.URL, "--listen", data, "--admin-listen", admin, "--log-level", "error")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "slogate serve to be ready", func() bool { return status("http://"+admin+"/readyz") == http.StatusOK })
	stream := openStream(t, "http://"+data, 200)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done, err := rest(stream)
	if err != nil || !done {
		t.Errorf("the in-flight stream ended with done=%v, err=%v; want a clean [DONE]", done, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("slogate serve exited with %v after SIGTERM, want 0; stderr:\n%s", err, stderr.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
