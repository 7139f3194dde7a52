package proxy_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
)

// firehose is the stream of TestSlowClient: firehoseEvents chunks as fast as the socket
// takes them, then [DONE]; 32 MiB in all, far more than the socket buffers between
// slogate and a client hold.
const (
	firehoseEvent  = `data: {"id":"cmpl-f","object":"text_completion","created":1,"model":"sim-tiny","choices":[{"index":0,"text":" firehose token","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}` + "\n\n"
	firehoseEvents = (32 << 20) / len(firehoseEvent)
	firehoseDone   = "data: [DONE]\n\n"
	firehoseHeader = "X-Test-Firehose"
)

// TestSlowClient checks a client that stops reading a long, fast stream. slogate holds no
// more of it than its fixed buffers: once the socket buffers are full its writes block
// and it stops reading the engine, so its memory stays flat. The idle timeout does not
// take the blocked writes for a silent engine. The other streams through the same slogate
// carry on (no head-of-line blocking). Once the client reads again, it gets the whole
// stream, byte for byte, and the request counts as ok.
func TestSlowClient(t *testing.T) {
	var read atomic.Int64 // bytes slogate read of the firehose
	f := startFirehose(t, &read)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	slow := smallWindowClient(t)
	resp := send(context.Background(), t, slow, http.MethodPost, f.hs.URL+"/v1/completions",
		`{"model":"sim-tiny","prompt":"firehose","stream":true}`, http.Header{firehoseHeader: {"1"}})
	defer resp.Body.Close()

	// The client reads nothing. Wait until slogate stops reading the engine: no progress
	// for 2s, four times the idle timeout.
	held := plateau(t, &read, 10, 200*time.Millisecond)
	if total := int64(firehoseEvents*len(firehoseEvent) + len(firehoseDone)); held > 16<<20 || held >= total {
		t.Errorf("slogate read %d bytes of the engine's %d for a client that read none; want at most the socket buffers' worth", held, total)
	}
	var now runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&now)
	grew := int64(now.HeapInuse) - int64(before.HeapInuse)
	t.Logf("slogate read %d bytes of the stream for a client that read none; the heap grew by %d", held, grew)
	if grew > 16<<20 {
		t.Errorf("the heap grew by %d bytes while a client held %d bytes of a stream; want it bounded", grew, held)
	}

	const others = 8
	var wg sync.WaitGroup
	for range others {
		wg.Go(func() {
			if status, err := streamOnce(f.hs.Client(), f.hs.URL, ""); err != nil || status != http.StatusOK {
				t.Errorf("a stream beside the slow one: status %d, %v", status, err)
			}
		})
	}
	wg.Wait()
	if n := f.obs.count(); n != others {
		t.Errorf("%d requests ended while the slow client held its stream, want the %d others", n, others)
	}

	got, err := io.ReadAll(resp.Body)
	if err != nil || len(got) != firehoseEvents*len(firehoseEvent)+len(firehoseDone) || !bytes.HasSuffix(got, []byte(firehoseDone)) ||
		!bytes.Equal(got[:len(firehoseEvent)], []byte(firehoseEvent)) {
		t.Errorf("the slow client got %d bytes (%v), want the %d events and [DONE]", len(got), err, firehoseEvents)
	}
	r := f.obs.last(t, others+1).res
	if r.Outcome != measure.OK || r.OutputChunks != firehoseEvents || !r.Ended {
		t.Errorf("observed %v with %d outputs, ended %v; want ok with %d", r.Outcome, r.OutputChunks, r.Ended, firehoseEvents)
	}
}

// startFirehose starts slogate, with a short idle timeout, in front of an engine that
// answers requests with firehoseHeader with the firehose stream and others as the
// simulator does; read counts the bytes of the firehose slogate read.
func startFirehose(t *testing.T, read *atomic.Int64) *metered {
	t.Helper()
	s := startSim(t, enginesim.Config{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(firehoseHeader) == "" {
			s.srv.Handler().ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		ev := []byte(firehoseEvent)
		for range firehoseEvents {
			if _, err := w.Write(ev); err != nil {
				return
			}
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, firehoseDone)
	}))
	t.Cleanup(up.Close)
	base := &http.Transport{DisableCompression: true}
	t.Cleanup(base.CloseIdleConnections)
	return startMetered(t, up.URL, proxy.Config{InjectUsage: true, StreamIdleTimeout: 500 * time.Millisecond,
		Transport: countingTransport{base: base, n: read}})
}

// plateau waits until n has not changed for polls polls, every pause, and returns it.
func plateau(t *testing.T, n *atomic.Int64, polls int, pause time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last, same := n.Load(), 0
	for same < polls {
		if time.Now().After(deadline) {
			t.Fatalf("still moving after 60s: %d", last)
		}
		time.Sleep(pause)
		cur := n.Load()
		if cur == last && cur > 0 {
			same++
		} else {
			same = 0
		}
		last = cur
	}
	return last
}

// smallWindowClient is a client whose sockets have a 256 KiB receive buffer (the kernel
// doubles it), so that a client that stops reading fills its TCP window soon, as a
// client on a slow link would, rather than after the MiBs Linux autotunes to. The buffer
// holds several of loopback's 64 KiB segments: with a buffer smaller than one segment
// (16 KiB, as this client had), the receiver does not reopen a window that stays below
// a segment once the client reads again, and the sender waits for its zero-window
// probes, whose backoff reaches minutes (the test then ran for up to five).
func smallWindowClient(t *testing.T) *http.Client {
	dial := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 256<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: dial.DialContext, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// countingTransport counts the bytes of response bodies read through it, for requests
// carrying firehoseHeader.
type countingTransport struct {
	base *http.Transport
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil || r.Header.Get(firehoseHeader) == "" {
		return resp, err
	}
	resp.Body = countingBody{ReadCloser: resp.Body, n: c.n}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
