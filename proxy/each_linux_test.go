package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawEngine serves one request on a raw TCP listener with serve, which writes the
// answer's bytes to the connection and ends it as it likes; hold is closed when the
// test ends, for serve to keep the connection open until then. It returns the address.
func rawEngine(t *testing.T, serve func(c *net.TCPConn, hold <-chan struct{})) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hold, served := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		close(hold)
		ln.Close()
		<-served
	})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		serve(c.(*net.TCPConn), hold)
	}()
	return ln.Addr().String()
}

// eachWatcher returns a watcher stopped when the test ends.
func eachWatcher(t *testing.T) *watcher {
	t.Helper()
	w, err := newWatcher()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stop)
	return w
}

// postRaw sends a request to the raw engine at addr through an engineTransport of its
// own and returns the answer, whose body is closed when the test ends.
func postRaw(t *testing.T, ctx context.Context, addr string) *http.Response {
	t.Helper()
	tr := newEngineTransport(0)
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := post(t, ctx, tr, "http://"+addr+"/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

// chunk frames s as one chunk.
func chunk(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

// TestEngineBodyEach reads answers with each, straight from the socket, and checks what
// it returns and when: the data of every read, the end of a complete body, and the
// engine hanging up mid-body in each way it can, above all with its last bytes, where
// the poller's one readiness event carries both and only the watch tells the end.
func TestEngineBodyEach(t *testing.T) {
	event := "data: {\"choices\":[{\"text\":\"x\"}]}\n\n"
	big := "data: " + strings.Repeat("y", 5000) + "\n\n" // several reads of a 1 KiB buffer
	for _, tc := range []struct {
		name    string
		serve   func(c *net.TCPConn, hold <-chan struct{})
		data    string
		err     error // nil: a clean end
		trailer http.Header
	}{
		{name: "complete, with the headers", data: event + "data: [DONE]\n\n", serve: func(c *net.TCPConn, hold <-chan struct{}) {
			io.WriteString(c, sseHead+chunk(event)+chunk("data: [DONE]\n\n")+"0\r\n\r\n")
			<-hold // keeps the connection open: the end is the last chunk's
		}},
		{name: "complete, paced, with trailers", data: event + big + event, trailer: http.Header{"X-Done": {"1"}}, serve: func(c *net.TCPConn, hold <-chan struct{}) {
			io.WriteString(c, sseHead)
			for _, s := range []string{chunk(event), chunk(big), chunk(event), "0\r\nX-Done: 1\r\n\r\n"} {
				time.Sleep(20 * time.Millisecond)
				io.WriteString(c, s)
			}
			<-hold
		}},
		{name: "FIN after a pause", data: event, err: io.ErrUnexpectedEOF, serve: func(c *net.TCPConn, hold <-chan struct{}) {
			io.WriteString(c, sseHead+chunk(event))
			time.Sleep(50 * time.Millisecond)
			c.CloseWrite()
		}},
		{name: "reset with the last bytes", data: event, err: syscall.ECONNRESET, serve: func(c *net.TCPConn, hold <-chan struct{}) {
			io.WriteString(c, sseHead)
			time.Sleep(50 * time.Millisecond)
			io.WriteString(c, chunk(event))
			time.Sleep(10 * time.Millisecond) // the bytes arrive before the reset, which would discard them unread
			c.SetLinger(0)
			c.Close()
		}},
		{name: "malformed", data: event + "abc", err: errChunkMalformed, serve: func(c *net.TCPConn, hold <-chan struct{}) {
			io.WriteString(c, sseHead+chunk(event)+"3\r\nabcd")
			<-hold
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := eachWatcher(t)
			addr := rawEngine(t, tc.serve)
			resp := postRaw(t, context.Background(), addr)
			b := resp.Body.(*engineBody)
			if !b.canEach() {
				t.Fatal("a chunked answer cannot be read with each")
			}
			var got []byte
			reads := 0
			done := make(chan error, 1)
			go func() {
				done <- b.each(make([]byte, 1<<10), w, func(p []byte) error {
					reads++
					got = append(got, p...)
					return nil
				})
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second): // a missed end waits forever: far beyond any load's delay
				resp.Body.Close()
				t.Fatal("each did not return: the end of the body was missed")
			}
			resp.Body.Close()
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("each returned %v, want %v", err, tc.err)
			}
			if string(got) != tc.data {
				t.Errorf("data %q, want %q", got, tc.data)
			}
			if reads == 0 && tc.data != "" {
				t.Error("fn was never called")
			}
			if !sameHeader(resp.Trailer, tc.trailer) {
				t.Errorf("trailer %v, want %v", resp.Trailer, tc.trailer)
			}
		})
	}
}

// TestEngineBodyEachCancel: a request cancelled while each waits ends it at once with
// the context's error, and the connection is closed, not reused.
func TestEngineBodyEachCancel(t *testing.T) {
	w := eachWatcher(t)
	addr := rawEngine(t, func(c *net.TCPConn, hold <-chan struct{}) {
		io.WriteString(c, sseHead+chunk("data: 1\n\n"))
		<-hold
	})
	tr := newEngineTransport(0)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, ctx, tr, "http://"+addr+"/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	err = resp.Body.(*engineBody).each(make([]byte, 1<<10), w, func([]byte) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("each returned %v, want the context's error", err)
	}
	tr.mu.Lock()
	idle := len(tr.idle)
	tr.mu.Unlock()
	if idle != 0 {
		t.Error("the connection of a cancelled answer went back to the pool")
	}
}

// TestEngineBodyEachHangUpWithLastBytes: the engine's last bytes and its FIN arrive
// while fn is busy, so that the poller has one readiness event for both: the read
// takes the bytes and does not report the end, and without the watch each would wait
// for an event that never comes. It is the engines' shape of a generation that fails
// mid-stream: uvicorn closes the transport right after the last chunk it wrote
// (uvicorn/protocols/http/httptools_impl.py, RequestResponseCycle.run_asgi), and
// enginesim's drop fault does the same.
func TestEngineBodyEachHangUpWithLastBytes(t *testing.T) {
	w := eachWatcher(t)
	busy, sent := make(chan struct{}), make(chan struct{})
	addr := rawEngine(t, func(c *net.TCPConn, hold <-chan struct{}) {
		io.WriteString(c, sseHead+chunk("data: 1\n\n"))
		select {
		case <-busy:
		case <-hold:
			return
		}
		io.WriteString(c, chunk("data: 2\n\n"))
		c.CloseWrite()
		close(sent)
		<-hold
	})
	resp := postRaw(t, context.Background(), addr)
	var got []byte
	done := make(chan error, 1)
	go func() {
		first := true
		done <- resp.Body.(*engineBody).each(make([]byte, 1<<10), w, func(p []byte) error {
			got = append(got, p...)
			if first {
				first = false
				close(busy)
				<-sent
				time.Sleep(50 * time.Millisecond) // the FIN is in before each waits again
			}
			return nil
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a missed end waits forever: far beyond any load's delay
		resp.Body.Close()
		<-done
		t.Fatal("each did not return: the engine's hang-up was missed")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != "data: 1\n\ndata: 2\n\n" {
		t.Fatalf("each returned %v after %q, want io.ErrUnexpectedEOF after both events", err, got)
	}
}

// TestEngineWireCorpus replays the answers of testdata/wire, uvicorn's framing byte for
// byte (testdata/wire/README.md), from an engine that writes each in one write and then
// keeps the connection open (a complete answer) or closes it (an aborted one): each
// must return what net/http's reader returns of the same bytes, and end as it does.
func TestEngineWireCorpus(t *testing.T) {
	for _, tc := range []struct {
		file  string
		close bool
		err   error
	}{
		{file: "uvicorn_stream_complete.http"},
		{file: "uvicorn_stream_abort.http", close: true, err: io.ErrUnexpectedEOF},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "wire", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			head, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
			if !ok || !bytes.Contains(bytes.ToLower(head), []byte("transfer-encoding: chunked")) {
				t.Fatalf("%s is not a chunked answer", tc.file)
			}
			want, _, _, wantErr := netHTTPChunked(body)
			if (wantErr != nil) != (tc.err != nil) {
				t.Fatalf("net/http reads %s with error %v", tc.file, wantErr)
			}
			w := eachWatcher(t)
			addr := rawEngine(t, func(c *net.TCPConn, hold <-chan struct{}) {
				c.Write(raw)
				if tc.close {
					c.CloseWrite()
				}
				<-hold
			})
			resp := postRaw(t, context.Background(), addr)
			var got []byte
			err = resp.Body.(*engineBody).each(make([]byte, 1<<10), w, func(p []byte) error {
				got = append(got, p...)
				return nil
			})
			if !errors.Is(err, tc.err) || tc.err == nil && err != nil {
				t.Fatalf("each returned %v, want %v", err, tc.err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("each read\n%q\nnet/http reads\n%q", got, want)
			}
		})
	}
}
