package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the connections its clients open,
// and those it closed.
type countingServer struct {
	*httptest.Server
	conns, closed atomic.Int32
}

func startCounting(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, ctx context.Context, rt http.RoundTripper, target string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{"prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

// readAllBody reads resp's body to its end and closes it.
func readAllBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// TestEngineTransportReuse: an answer read to its end gives its connection back for the
// next request, whether it was sized or chunked (a stream); one closed before its end,
// or that the engine marked Connection: close, does not.
func TestEngineTransportReuse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     http.HandlerFunc
		early bool // close the body before its end
		reuse bool
	}{
		{"sized", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, false, true},
		{"chunked stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 3 {
				io.WriteString(w, "data: {}\n\n")
				w.(http.Flusher).Flush()
			}
		}, false, true},
		{"closed before its end", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, true, false},
		{"Connection: close", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "ok")
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startCounting(t, tc.h)
			tr := newEngineTransport(0)
			defer tr.CloseIdleConnections()
			for range 3 {
				resp, err := post(t, context.Background(), tr, s.URL)
				if err != nil {
					t.Fatal(err)
				}
				if tc.early {
					br := bufio.NewReader(resp.Body)
					if _, err := br.ReadString('\n'); err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
						t.Error("a read after Close succeeded")
					}
				} else {
					readAllBody(t, resp)
				}
			}
			want := int32(3)
			if tc.reuse {
				want = 1
			}
			if got := s.conns.Load(); got != want {
				t.Errorf("%d connections for 3 requests, want %d", got, want)
			}
		})
	}
}

// TestEngineTransportStaleConn: a connection the engine closed while it was idle is
// not handed out again: the next request dials a new one and succeeds.
func TestEngineTransportStaleConn(t *testing.T) {
	s := startCounting(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := newEngineTransport(0)
	defer tr.CloseIdleConnections()
	for i := range 3 {
		resp, err := post(t, context.Background(), tr, s.URL)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := readAllBody(t, resp); got != "ok" {
			t.Fatalf("request %d: body %q", i, got)
		}
		s.CloseClientConnections() // the engine closes the idle connection
		waitFor(t, "the engine to close the connection", func() bool { return s.closed.Load() == int32(i+1) })
		waitFor(t, "the end to reach the idle connection's socket", func() bool {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			for _, conns := range tr.idle {
				return len(conns) == 1 && !alive(conns[0].nc)
			}
			return false
		})
	}
	if got := s.conns.Load(); got != 3 {
		t.Errorf("%d connections, want 3 (one per request, none reused after the engine closed it)", got)
	}
}

// TestEngineTransportCancel: a request's context ends a pending exchange at once with
// the context's error, while it waits for the headers or for the body, and its
// connection is not reused.
func TestEngineTransportCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	tr := newEngineTransport(0)
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := post(t, ctx, tr, s.URL+"/headers"); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting for headers: err %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	resp, err := post(t, ctx, tr, s.URL+"/body")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("reading the body: err %v, want context.Canceled", err)
	}
	resp.Body.Close()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if n := len(tr.idle); n != 0 {
		t.Errorf("%d hosts with idle connections after two cancelled exchanges, want none", n)
	}
}

// TestEngineTransportHeaderTimeout: the wait for the answer's headers is bounded, with
// a timeout error; the body after them is not.
func TestEngineTransportHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-body" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
			io.WriteString(w, "late")
			return
		}
		<-release
	})
	tr := newEngineTransport(100 * time.Millisecond)
	defer tr.CloseIdleConnections()
	_, err := post(t, context.Background(), tr, s.URL+"/slow-headers")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("err %v, want a timeout", err)
	}
	resp, err := post(t, context.Background(), tr, s.URL+"/slow-body")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllBody(t, resp); got != "late" {
		t.Errorf("body %q, want the one sent after the header timeout", got)
	}
}

// TestEngineTransportInformational: informational answers before the answer are
// skipped.
func TestEngineTransportInformational(t *testing.T) {
	s := startCounting(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "ok")
	})
	tr := newEngineTransport(0)
	defer tr.CloseIdleConnections()
	resp, err := post(t, context.Background(), tr, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllBody(t, resp); resp.StatusCode != http.StatusOK || got != "ok" {
		t.Errorf("status %d body %q, want 200 ok", resp.StatusCode, got)
	}
}

// TestEngineTransportReap: idle connections are closed once they have waited the idle
// timeout, and the pool holds at most maxIdle.
func TestEngineTransportReap(t *testing.T) {
	s := startCounting(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := newEngineTransport(0)
	tr.idleTimeout, tr.maxIdle = 50*time.Millisecond, 2
	defer tr.CloseIdleConnections()
	var resps []*http.Response
	for range 3 { // three at once: three connections
		resp, err := post(t, context.Background(), tr, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
	}
	for _, r := range resps {
		readAllBody(t, r)
	}
	waitFor(t, "every connection closed", func() bool { return s.closed.Load() == 3 })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 || tr.reaper != nil {
		t.Errorf("idle %v, reaper %v after the idle timeout", tr.idle, tr.reaper)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
