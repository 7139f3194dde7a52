package soak

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	"github.com/slogate/slogate/wire"
)

// end is how one request ended, as its client saw it.
type end struct {
	outcome    Outcome
	status     int           // 0: no status was read
	reached    bool          // slogate's handler certainly read the request
	retryAfter time.Duration // of a 429
}

// do sends r and reads its answer as r's kind behaves. ctx is the load's hard deadline:
// a request it cuts ends as NoAnswer, for it hung.
func (m *mix) do(ctx context.Context, r request) end {
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(reqCtx, r.method, m.cfg.URL+r.path, body)
	if err != nil {
		panic(err) // the URL was checked when the load started
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.batch {
		req.Header.Set("X-Slogate-Priority", "batch")
	}
	if r.faults != "" {
		req.Header.Set(faultHeader, r.faults)
	}
	var read, ours chan struct{}
	if r.kind == CancelWaiting {
		var answered func()
		req, read, ours, answered = leaveWaiting(req, r.wait, cancel)
		defer answered()
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return failed(read, ours)
	}
	defer resp.Body.Close()
	e := end{status: resp.StatusCode, reached: r.method == http.MethodPost}
	switch s := resp.StatusCode; {
	case s == http.StatusOK:
		e.outcome = m.answer(r, resp, cancel)
	case s == http.StatusTooManyRequests:
		e.outcome = Rejected
		ms, _ := strconv.ParseInt(resp.Header.Get("Retry-After-Ms"), 10, 64)
		e.retryAfter = time.Duration(max(ms, 1)) * time.Millisecond
	case s == http.StatusBadRequest:
		e.outcome = BadRequest
	case s == http.StatusRequestEntityTooLarge:
		e.outcome = TooLarge
	case s >= 400 && s < 500:
		e.outcome = OtherClient
	case s >= 500 && r.fault.engineStatus():
		e.outcome = EngineFault
	default:
		e.outcome = Unexplained5xx
	}
	if e.outcome != OK && e.outcome != Cancelled {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return e
}

// leaveWaiting prepares req, a CancelWaiting request, to be abandoned wait after slogate
// started reading it. slogate reads every inference body before deciding anything, and a
// Go server sends 100 Continue as its handler starts reading: the sign that the request
// counts in slogate_requests_total, however early it is abandoned. It returns the request
// to send, a channel closed on that sign, one closed when the client gives up (just
// before it calls cancel), and the function to call once the answer came or the request
// failed.
func leaveWaiting(req *http.Request, wait time.Duration, cancel context.CancelFunc) (_ *http.Request, read, ours chan struct{}, answered func()) {
	read, ours = make(chan struct{}), make(chan struct{})
	var once sync.Once
	req.Header.Set("Expect", "100-continue")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got100Continue: func() { once.Do(func() { close(read) }) },
	}))
	done := make(chan struct{})
	go func() {
		select {
		case <-read:
		case <-done:
			return
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			close(ours)
			cancel()
		case <-done:
		}
	}()
	return req, read, ours, func() { close(done) }
}

// failed classifies a request that got no response: abandoned on purpose, cut by the
// load's hard deadline, or failed.
func failed(read, ours chan struct{}) end {
	e := end{outcome: NoAnswer, reached: closed(read)}
	if ours != nil && closed(ours) {
		e.outcome = Cancelled
	}
	return e
}

func closed(c chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// answer reads a 200 answer as r's kind does and says how it ended.
func (m *mix) answer(r request, resp *http.Response, cancel context.CancelFunc) Outcome {
	switch r.kind {
	case CancelFirstToken, CancelWaiting:
		cancel()
		return Cancelled
	case Whole, Passthrough:
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return Broken
		}
		if r.kind == Passthrough {
			return OK
		}
		if c, err := wire.DecodeResponse(data); err != nil || len(c.Choices) == 0 {
			return Broken
		}
		return OK
	case StreamCompletion, StreamChat, CancelMidstream:
		return m.stream(r, resp, cancel)
	}
	return Broken // a malformed or oversized request answered 200
}

// stream reads an event stream to its end, or for CancelMidstream until r.events events
// came and the client leaves.
func (m *mix) stream(r request, resp *http.Response, cancel context.CancelFunc) Outcome {
	sse := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
	events := 0
	for {
		ev, err := sse.Next()
		switch {
		case err == nil && ev.IsDone():
			if _, err := sse.Next(); !errors.Is(err, io.EOF) && r.fault == NoFault {
				return Broken // anything after [DONE] but the end of the body
			}
			return OK
		case err != nil:
			if r.fault.streams() {
				return EngineFault
			}
			return Broken
		case ev.Comment:
			continue
		}
		events++
		if r.kind == CancelMidstream && events >= r.events {
			cancel()
			return Cancelled
		}
	}
}
