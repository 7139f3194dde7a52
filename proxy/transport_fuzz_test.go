package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzEngineTransport: whatever bytes the engine answers with, the transport returns an
// answer or an error, never panics or hangs, and puts a connection back in its pool only
// after an answer read cleanly to its end, with nothing left over.
func FuzzEngineTransport(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n6\r\ndata: \r\n0\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
		"garbage",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(2 * time.Second))
					buf := make([]byte, 4096)
					c.Read(buf) // the request
					io.WriteString(c, answer)
					c.(*net.TCPConn).CloseWrite() // the answer ends here
					c.Read(buf)                   // until the client is done with the connection
				}()
			}
		}()
		tr := newEngineTransport(time.Second)
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/v1/completions", strings.NewReader(`{}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return
		}
		_, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.mu.Lock()
		pooled := len(tr.idle) > 0
		tr.mu.Unlock()
		if pooled && rerr != nil {
			t.Errorf("a connection went back to the pool after a read failed: %v", rerr)
		}
		if ctx.Err() != nil {
			t.Errorf("the exchange took until the test's deadline")
		}
	})
}
