package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Bad input at the data listener: each case gets a clear 4xx (or, where HTTP itself
// cannot answer, a closed connection), never a 5xx from slogate or a crash, and the
// sidecar serves a good request afterwards.
func TestBadInput(t *testing.T) {
	ts := startTestSidecarWith(t, func(cfg *serveSettings) { cfg.MaxBodyBytes = 1 << 20 })
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
