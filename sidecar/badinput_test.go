package sidecar

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bad input at the data listener: each case gets a clear 4xx (or, where HTTP itself
// cannot answer, a closed connection), never a 5xx from slogate or a crash, and the
// sidecar serves a good request afterwards.
func TestBadInput(t *testing.T) {
	ts := startTestSidecarWith(t, func(cfg *Config) { cfg.MaxBodyBytes = 1 << 20 })
	addr := strings.TrimPrefix(ts.data, "http://")
	deep := `{"model":"sim-tiny","prompt":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`
	cases := []struct {
		name string
		raw  string // the whole request as sent on the wire
		want int    // 0: the connection is closed without an answer
	}{
		{"body over --max-body-bytes", rawPost("/v1/completions", `{"prompt":"`+strings.Repeat("a", 2<<20)+`"}`), http.StatusRequestEntityTooLarge},
		{"deeply nested JSON", rawPost("/v1/completions", deep), http.StatusBadRequest},
		{"not JSON", rawPost("/v1/completions", `{"prompt":`), http.StatusBadRequest},
		{"invalid UTF-8 in the prompt", rawPost("/v1/completions", "{\"model\":\"sim-tiny\",\"prompt\":\"\xff\xfe\",\"max_tokens\":1}"), -1},
		{"10,000 headers", "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: b\r\n", 10_000) + "\r\n", 0},
		{"header block over 1 MiB", "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 0},
		{"HTTP/2 preface without h2c", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0},
		{"garbage request line", "\x00\x01\x02 nonsense\r\n\r\n", http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code := rawRequest(t, addr, tc.raw)
			switch {
			case tc.want == -1 && code >= 500:
				t.Errorf("status %d, want an answer below 500", code)
			case tc.want == 0 && code != 0 && (code < 400 || code >= 500):
				t.Errorf("status %d, want a 4xx or a closed connection", code)
			case tc.want > 0 && code != tc.want:
				t.Errorf("status %d, want %d", code, tc.want)
			}
		})
	}
	// Two requests pipelined on one connection are both answered, in order.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	get := "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(conn, get+get); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("pipelined response %d: %v %v", i, resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if code := rawRequest(t, addr, rawPost("/v1/completions", `{"model":"sim-tiny","prompt":"hi","max_tokens":2}`)); code != http.StatusOK {
		t.Errorf("a good request after the bad ones: %d", code)
	}
}

// rawPost returns a raw HTTP/1.1 POST of body to path.
func rawPost(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, len(body), body)
}

// rawRequest sends raw on a new connection and returns the response's status, or 0 when
// the connection closed without one.
func rawRequest(t *testing.T, addr, raw string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = io.WriteString(conn, raw) }() // the server may answer before reading it all
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closeSlack is how much later than its timeout a connection may be seen closed: room
// for a loaded two-core machine, not a measure of slogate.
const closeSlack = 5 * time.Second

// Slow clients at the data listener (slowloris): a client that trickles its headers,
// however steadily, has its connection closed (at most a 400 before) once
// --read-header-timeout has passed, and not before; 200 of them at once do not keep a
// normal request from being served; a kept-alive connection left idle is closed once
// --idle-timeout has passed.
func TestSlowClients(t *testing.T) {
	// Headers that would take 1000 s at one byte per 100 ms: they never finish.
	slowHeaders := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: " + strings.Repeat("a", 10_000)
	good := rawPost("/v1/completions", `{"model":"sim-tiny","prompt":"hi","max_tokens":2}`)

	t.Run("headers a byte at a time", func(t *testing.T) {
		t.Parallel()
		const timeout = 500 * time.Millisecond
		addr := slowTestSidecar(t, timeout, time.Minute)
		slow := trickle(t, addr, "", slowHeaders)
		if code := rawRequest(t, addr, good); code != http.StatusOK {
			t.Errorf("a normal request beside the slow one: %d, want 200", code)
		}
		closed, got, ok := awaitClose(slow.conn, timeout+closeSlack)
		if !ok {
			t.Fatalf("the slow client's connection is open %s after it was dialled (--read-header-timeout %s)", time.Since(slow.dialled).Round(time.Millisecond), timeout)
		}
		checkClosedAfter(t, "the slow client's connection", closed.Sub(slow.dialled), timeout)
		if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 400 ") {
			t.Errorf("the slow client got %q, want a 400 or no answer", got)
		}
	})

	t.Run("200 slow clients at once", func(t *testing.T) {
		t.Parallel()
		const n, timeout = 200, 3 * time.Second
		addr := slowTestSidecar(t, timeout, time.Minute)
		slow := make([]trickler, n)
		for i := range slow {
			slow[i] = trickle(t, addr, "", slowHeaders)
		}
		if code := rawRequest(t, addr, good); code != http.StatusOK {
			t.Errorf("a normal request beside %d slow ones: %d, want 200", n, code)
		}
		served := time.Now()
		var wg sync.WaitGroup
		for i, s := range slow {
			wg.Go(func() {
				closed, _, ok := awaitClose(s.conn, timeout+closeSlack)
				switch {
				case !ok:
					t.Errorf("slow client %d: its connection is open %s after it was dialled (--read-header-timeout %s)", i, time.Since(s.dialled).Round(time.Millisecond), timeout)
				case closed.Before(served):
					t.Errorf("slow client %d: its connection was closed before the normal request was served", i)
				default:
					checkClosedAfter(t, fmt.Sprintf("slow client %d's connection", i), closed.Sub(s.dialled), timeout)
				}
			})
		}
		wg.Wait()
	})

	t.Run("idle keep-alive connection", func(t *testing.T) {
		t.Parallel()
		const idle = 1500 * time.Millisecond // longer than the header timeout, so it is the one that acts
		addr := slowTestSidecar(t, 500*time.Millisecond, idle)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(idle + closeSlack))
		sent := time.Now()
		if _, err := io.WriteString(conn, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("GET /v1/models: %s, close=%v; want 200 on a kept-alive connection", resp.Status, resp.Close)
		}
		answered := time.Now()
		closed, got, ok := awaitClose(conn, idle+closeSlack)
		if !ok {
			t.Fatalf("the idle connection is open %s after its answer (--idle-timeout %s)", time.Since(answered).Round(time.Millisecond), idle)
		}
		// The server's idle clock starts after the request was sent and before the answer
		// was read, so the closure comes at least idle after the request was sent, and at
		// most idle plus the slack after the answer was read.
		if d := closed.Sub(sent); d < idle {
			t.Errorf("the idle connection was closed %s after the request, before --idle-timeout %s", d.Round(time.Millisecond), idle)
		}
		if d := closed.Sub(answered); d > idle+closeSlack {
			t.Errorf("the idle connection was closed %s after its answer, want within %s", d.Round(time.Millisecond), idle+closeSlack)
		}
		if len(got) > 0 {
			t.Errorf("the idle connection got bytes nobody asked for: %q", got)
		}
	})
}

// slowTestSidecar starts a sidecar with the data listener's header and idle timeouts
// set, and returns its data address.
func slowTestSidecar(t *testing.T, header, idle time.Duration) string {
	t.Helper()
	ts := startTestSidecarWith(t, func(cfg *Config) { cfg.ReadHeaderTimeout, cfg.IdleTimeout = header, idle })
	return strings.TrimPrefix(ts.data, "http://")
}

// trickler is a client connection that sends its request slowly.
type trickler struct {
	conn    net.Conn
	dialled time.Time // before the dial, so before the server accepted the connection
}

// trickle dials addr, sends head at once and then slow one byte every 100 ms, until
// slow runs out or a write fails. The test's end closes the connection and waits for
// the sender.
func trickle(t *testing.T, addr, head, slow string) trickler {
	t.Helper()
	dialled := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		for i := range len(slow) {
			if _, err := conn.Write([]byte{slow[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Cleanup(func() { conn.Close(); wg.Wait() })
	return trickler{conn: conn, dialled: dialled}
}

// awaitClose reads conn until the server closes it (end of file, or a reset) and
// returns when it saw that and the bytes that came before; ok is false when patience
// ran out first or the read failed otherwise.
func awaitClose(conn net.Conn, patience time.Duration) (closed time.Time, got []byte, ok bool) {
	_ = conn.SetReadDeadline(time.Now().Add(patience))
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
			return time.Now(), got, true
		default:
			return time.Time{}, got, false
		}
	}
}

// checkClosedAfter fails the test unless took, the time from before the dial to the
// closure, lies between timeout and timeout plus closeSlack.
func checkClosedAfter(t *testing.T, what string, took, timeout time.Duration) {
	t.Helper()
	if took < timeout || took > timeout+closeSlack {
		t.Errorf("%s was closed %s after the dial, want between %s and %s", what, took.Round(time.Millisecond), timeout, timeout+closeSlack)
	}
}

// TestSlowBody: a client that sends whole headers and then trickles its body, for ever,
// is answered 408 (or has its connection closed) once the body's deadline has passed,
// on an inference route (whose body slogate reads before it decides) and on a route
// slogate passes through to the engine (--body-timeout).
func TestSlowBody(t *testing.T) {
	const timeout = 500 * time.Millisecond
	ts := startTestSidecarWith(t, func(cfg *Config) {
		cfg.ReadHeaderTimeout, cfg.BodyTimeout = timeout, timeout
	})
	addr := strings.TrimPrefix(ts.data, "http://")
	for _, path := range []string{"/v1/completions", "/tokenize"} {
		t.Run(path, func(t *testing.T) {
			body := `{"model":"sim-tiny","prompt":"` + strings.Repeat("a", 10_000) + `"}`
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
			slow := trickle(t, addr, head, body)
			closed, got, ok := awaitClose(slow.conn, timeout+closeSlack)
			if !ok {
				t.Fatalf("the slow body's connection is open %s after it was dialled; got %q", time.Since(slow.dialled).Round(time.Millisecond), got)
			}
			checkClosedAfter(t, "the slow body's connection", closed.Sub(slow.dialled), timeout)
			if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 408 ") {
				t.Errorf("the slow body got %q, want a 408 or no answer", got)
			}
		})
	}
}
