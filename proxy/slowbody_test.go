package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
)

// TestBodyTimeout: a client that trickles its request body gets 408 once BodyTimeout has
// passed since its headers, as OpenAI error JSON, and its connection is closed; nothing
// reaches the engine. The deadline covers the body only: a body that arrives in time is
// served, and its answer may stream for longer than BodyTimeout.
func TestBodyTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	body := `{"model":"sim-tiny","prompt":"slow","max_tokens":4,"stream":true}`
	cases := []struct {
		name   string
		pieces int           // the body is sent in this many pieces
		pause  time.Duration // between two pieces
		status int
	}{
		{name: "trickled past the deadline", pieces: 4, pause: time.Second, status: http.StatusRequestTimeout},
		{name: "in time, answer longer than the deadline", pieces: 2, pause: 20 * time.Millisecond, status: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			events := strings.Repeat(answerChunk(" a", ""), 4) + "data: [DONE]\n\n"
			up := startUpstream(t, replaySlowly([]byte(events), 4, 2*timeout/4))
			f := startProxy(t, up.hs.URL, proxy.Config{BodyTimeout: timeout})
			c, err := net.Dial("tcp", strings.TrimPrefix(f.hs.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // the test cannot hang
			fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: slogate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
			stop, wrote := make(chan struct{}), make(chan struct{})
			defer func() { close(stop); <-wrote }()
			go func() {
				defer close(wrote)
				step := (len(body) + tc.pieces - 1) / tc.pieces
				for rest := body; len(rest) > 0; {
					n := min(step, len(rest))
					if _, err := io.WriteString(c, rest[:n]); err != nil {
						return
					}
					rest = rest[n:]
					select {
					case <-stop:
						return
					case <-time.After(tc.pause):
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the response: %v", err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || err != nil {
				t.Fatalf("status %d, body read error %v: %s; want %d", resp.StatusCode, err, got, tc.status)
			}
			o := f.obs.last(t, 1)
			if tc.status == http.StatusOK {
				if !strings.HasSuffix(string(got), "data: [DONE]\n\n") || o.res.Outcome != measure.OK {
					t.Errorf("observed %v; the answer (%d bytes) should be whole and ok: %q", o.res.Outcome, len(got), got)
				}
				return
			}
			if e := apiError(t, got); !strings.Contains(e.Message, "did not arrive") || !resp.Close {
				t.Errorf("error %q, connection closing %v; want the body timeout named and the connection closed", e.Message, resp.Close)
			}
			if o.res.Outcome != measure.BadRequest || o.res.Status != http.StatusRequestTimeout {
				t.Errorf("observed %v %d, want bad_request 408", o.res.Outcome, o.res.Status)
			}
			if n := up.count(); n != 0 {
				t.Errorf("the engine got %d requests, want none", n)
			}
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
				t.Errorf("after the 408 the connection gave %v, want it closed", err)
			}
		})
	}
}

// replaySlowly answers with body as an event stream in pieces pieces, pause apart.
func replaySlowly(body []byte, pieces int, pause time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		step := (len(body) + pieces - 1) / pieces
		for rest := body; len(rest) > 0; {
			n := min(step, len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			_ = rc.Flush()
			rest = rest[n:]
			time.Sleep(pause)
		}
	}
}

// isReset reports a connection the other side reset.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
