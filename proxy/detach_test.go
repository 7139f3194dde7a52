package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
)

// Detached streams (proxy/detach.go): a stream answered 200 to an HTTP/1.1 client is
// taken over from net/http once its headers are out, and its connection goes back to
// the server afterwards. Every other test of the package runs with streams detached
// too (startProxy); these check what only detaching does: the connection's life around
// the stream, written and read here on a raw connection, byte by byte as a client sees it.

const detachStream = `{"model":"sim-tiny","prompt":"hi","max_tokens":6,"stream":true}`

// rawRequest returns an HTTP request for a completion, as a client writes it.
func rawRequest(proto, body string, header ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST /v1/completions %s\r\nHost: slogate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", proto, len(body))
	for _, h := range header {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// readStream reads one streamed answer from br and checks that it is complete: 200,
// chunked (or, for HTTP/1.0, to the connection's end), with its [DONE].
func readStream(t *testing.T, br *bufio.Reader, wantChunked bool) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"; chunked != wantChunked {
		t.Errorf("transfer encoding %v, want chunked %v", resp.TransferEncoding, wantChunked)
	}
	got := readSSE(resp.Body, nil)
	if !got.done || got.err != nil || got.outputs() == 0 {
		t.Fatalf("stream: %d output chunks, done %v, err %v; want a complete stream", got.outputs(), got.done, got.err)
	}
	return resp
}

func dial(t *testing.T, f *front) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", f.hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(hangLimit)); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// TestDetachedConnectionLives checks the connection of a detached stream between
// requests: it serves the client's next request and the one after, each stream
// detached again; it stays open past ReadHeaderTimeout while the client is idle (the
// server's IdleTimeout governs a kept-alive connection, as net/http's own), and a request
// the client sent ahead (pipelined) is answered after the stream.
func TestDetachedConnectionLives(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	f := startProxyServer(t, s.hs.URL, proxy.Config{InjectUsage: true}, 0, func(srv *http.Server) {
		srv.ReadHeaderTimeout = 50 * time.Millisecond
		srv.IdleTimeout = time.Hour
	})
	c, br := dial(t, f)
	write(t, c, rawRequest("HTTP/1.1", detachStream))
	readStream(t, br, true)
	// Idle four times ReadHeaderTimeout: a connection net/http took back as new would
	// have been closed by now.
	time.Sleep(4 * 50 * time.Millisecond)
	write(t, c, rawRequest("HTTP/1.1", detachStream))
	readStream(t, br, true)
	// Two requests in one write: the second arrives while the first streams.
	write(t, c, rawRequest("HTTP/1.1", detachStream)+rawRequest("HTTP/1.1", `{"model":"sim-tiny","prompt":"hi","max_tokens":3}`))
	readStream(t, br, true)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the pipelined request's answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"choices"`) {
		t.Fatalf("the pipelined request: status %d, %q, %v", resp.StatusCode, body, err)
	}
	if n := f.hijacked.Load(); n != 3 {
		t.Errorf("%d streams detached, want 3", n)
	}
	for i, o := range f.obs.wait(t, 4) {
		if o.res.Outcome != measure.OK || o.res.Status != http.StatusOK {
			t.Errorf("request %d: %v, status %d; want ok, 200", i, o.res.Outcome, o.res.Status)
		}
	}
}

// TestDetachedIdleTimeout checks that a parked connection is closed once the server's
// IdleTimeout passes without a request, and one whose client asked to close it is
// closed at the stream's end.
func TestDetachedIdleTimeout(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	f := startProxyServer(t, s.hs.URL, proxy.Config{InjectUsage: true}, 0, func(srv *http.Server) {
		srv.IdleTimeout = 100 * time.Millisecond
	})
	for _, header := range [][]string{nil, {"Connection: close"}} {
		c, br := dial(t, f)
		write(t, c, rawRequest("HTTP/1.1", detachStream, header...))
		readStream(t, br, true)
		if _, err := br.ReadByte(); err != io.EOF { // the deadline of dial bounds the wait
			t.Errorf("%v: after the stream, read %v; want the connection closed (EOF)", header, err)
		}
	}
	if n := f.hijacked.Load(); n != 2 {
		t.Errorf("%d streams detached, want 2", n)
	}
}

// TestDetachedOnlyHTTP11 checks that an HTTP/1.0 client's stream stays on net/http's
// path: it has no chunked encoding to be written in, and ends with the connection.
func TestDetachedOnlyHTTP11(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	f := startProxy(t, s.hs.URL, proxy.Config{InjectUsage: true})
	c, br := dial(t, f)
	write(t, c, rawRequest("HTTP/1.0", detachStream))
	readStream(t, br, false)
	if n := f.hijacked.Load(); n != 0 {
		t.Errorf("%d streams detached, want none", n)
	}
}

// heldStream is an upstream that streams one event, then holds the stream until
// released, then ends it.
func heldStream(t *testing.T) (*upstream, chan struct{}) {
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := `data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":"%s","finish_reason":null}]}` + "\n\n"
		fmt.Fprintf(w, chunk, "one")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, chunk, "two")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	return up, release
}

// openHeld opens a stream of a heldStream upstream through f and reads its first event.
func openHeld(t *testing.T, f *front) (*http.Response, *bufio.Reader) {
	t.Helper()
	c, br := dial(t, f)
	write(t, c, rawRequest("HTTP/1.1", detachStream))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := readSSE(resp.Body, func(r sseRead) bool { return r.outputs() == 1 }); r.outputs() != 1 {
		t.Fatalf("first event: %d outputs, err %v", r.outputs(), r.err)
	}
	return resp, br
}

// TestDetachedDrain checks a server's drain with a stream detached: the server's
// Shutdown does not wait for it (it is no longer the server's), WaitDetached does, the
// stream ends complete, and its connection is closed rather than parked.
func TestDetachedDrain(t *testing.T) {
	up, release := heldStream(t)
	f := startProxy(t, up.hs.URL, proxy.Config{})
	resp, br := openHeld(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	if err := f.hs.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := f.p.WaitDetached(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDetached with the stream held = %v, want the deadline", err)
	}
	close(release)
	rest := readSSE(resp.Body, nil)
	if !rest.done || rest.err != nil || rest.outputs() != 1 {
		t.Fatalf("the rest of the stream: %d outputs, done %v, err %v", rest.outputs(), rest.done, rest.err)
	}
	resp.Body.Close()
	if err := f.p.WaitDetached(ctx); err != nil {
		t.Fatalf("WaitDetached after the stream ended = %v", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the stream, read %v; want the connection closed (EOF)", err)
	}
	if o := f.obs.last(t, 1).res; o.Outcome != measure.OK {
		t.Errorf("outcome %v, want ok", o.Outcome)
	}
}

// TestCloseDetached checks that CloseDetached cuts a stream still running: its
// connection is closed without the chunked body's end, the engine's request is
// cancelled, and it is reported as cut by a shutdown.
func TestCloseDetached(t *testing.T) {
	up, _ := heldStream(t)
	f := startProxy(t, up.hs.URL, proxy.Config{})
	resp, _ := openHeld(t, f)
	defer resp.Body.Close()
	f.p.CloseDetached()
	rest := readSSE(resp.Body, nil)
	if rest.done || rest.err == nil {
		t.Errorf("after CloseDetached the client read done %v, err %v; want a truncated body", rest.done, rest.err)
	}
	if o := f.obs.last(t, 1).res; o.Outcome != measure.Shutdown {
		t.Errorf("outcome %v, want shutdown", o.Outcome)
	}
}
