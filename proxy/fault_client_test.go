package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/signal"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
)

// The fault suite, client side: clients that leave before their answer began. A client
// leaving mid-stream is TestClientGoesAway; a slow reader is TestSlowClient.

// leaveEnv is what a TestClientLeavesEarly case runs against.
type leaveEnv struct {
	s         *sim                  // the simulator; nil when the engine is a holding upstream
	up        *upstream             // the holding upstream; nil with the simulator
	cancelled <-chan struct{}       // the holding upstream's cancelled requests
	adm       *admission.Controller // nil without admission control
}

// TestClientLeavesEarly checks a client that leaves before its answer began: while it
// waits in admission's queue, while the engine has not sent its response headers, and
// while the engine holds it in its own queue (headers sent, no first token yet). Every
// time the engine's side of the request ends too (or the engine never saw it), the
// request counts as client_cancelled with 499 and no output, and admission's slot and
// queue place are released.
func TestClientLeavesEarly(t *testing.T) {
	cases := []struct {
		name      string
		hold      bool                            // the engine is an upstream that holds every request without answering
		maxSeqs   int                             // the simulator's batch size; 0: the profile's
		admission bool                            // admission enforces one request in flight and a queue
		blocker   bool                            // a stalled stream occupies the engine (or admission's slot) first
		at        func(t *testing.T, e *leaveEnv) // waits until the request is in place
		engineSaw bool                            // the request reached the engine
	}{
		{name: "queued in admission", admission: true, blocker: true, at: func(t *testing.T, e *leaveEnv) {
			eventually(t, "the request queued", func() (bool, string) {
				q := e.adm.Stats().Tiers[0].Queued
				return q[admission.Interactive] == 1, fmt.Sprintf("queued %v", q)
			})
		}},
		{name: "before the response headers", hold: true, engineSaw: true, at: func(t *testing.T, e *leaveEnv) {
			e.up.await(t, 1)
		}},
		{name: "in the engine's queue, before the first token", maxSeqs: 1, blocker: true, engineSaw: true, at: func(t *testing.T, e *leaveEnv) {
			e.s.await(t, "the request queued behind the blocker", func(st enginesim.Stats) (bool, string) {
				return st.Running == 1 && st.Waiting == 1, fmt.Sprintf("running %d, waiting %d", st.Running, st.Waiting)
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, f := startLeaveEnv(t, tc.hold, tc.maxSeqs, tc.admission)
			var blocker *leaver
			if tc.blocker {
				blocker = leave(f.hs.Client(), f.hs.URL, fault("stall_after=2"))
				awaitCount(t, "the blocker's outputs", &blocker.mu, &blocker.chunks, &blocker.read, 1)
				if n, _ := f.ledger.InFlight(); n != 1 {
					t.Fatalf("%d in flight while the blocker streams, want 1", n)
				}
			}
			victim := leave(f.hs.Client(), f.hs.URL, nil)
			tc.at(t, e)
			if err := victim.stop(); err == nil {
				t.Errorf("the client that left got no error")
			}
			r := f.obs.last(t, 1).res
			if r.Outcome != measure.ClientCancelled || r.Status != proxy.StatusClientClosed || r.OutputChunks != 0 || r.TTFT != 0 {
				t.Errorf("observed %+v; want client_cancelled, 499, no output", r)
			}
			if tc.admission && r.Tier != "all" {
				t.Errorf("observed tier %q, want all", r.Tier)
			}
			e.checkEngineSide(t, tc.engineSaw)
			if m := f.requests(t); m["client_cancelled 499"] != 1 || len(m) != 1 {
				t.Errorf("slogate_requests_total %v; want one client_cancelled with code 499", m)
			}
			if blocker != nil {
				_ = blocker.stop()
				f.obs.last(t, 2)
				engineFreed(t, e.s, 0)
			}
			e.checkReleased(t, f)
		})
	}
}

// startLeaveEnv starts the engine of a TestClientLeavesEarly case (a holding upstream,
// or a simulator running maxSeqs sequences at most) and slogate in front of it, with
// admission control enforcing one request at a time when admit is set.
func startLeaveEnv(t *testing.T, hold bool, maxSeqs int, admit bool) (*leaveEnv, *metered) {
	t.Helper()
	e := &leaveEnv{}
	cfg := proxy.Config{InjectUsage: true, StreamIdleTimeout: time.Minute}
	var target string
	if hold {
		e.up, e.cancelled = holdingUpstream(t)
		target = e.up.hs.URL
	} else {
		e.s = startSim(t, enginesim.Config{Profile: tinyProfile(t, func(p *enginesim.Profile) {
			if maxSeqs > 0 {
				p.MaxNumSeqs = maxSeqs
			}
		})})
		target = e.s.hs.URL
	}
	if admit {
		e.adm = oneAtATime(t)
		cfg.Admission = e.adm
	}
	return e, startMetered(t, target, cfg)
}

// checkEngineSide checks that the engine's side of the request that left ended: the
// holding upstream saw it cancelled, the simulator aborted it, or (when it never reached
// the engine) the simulator runs only the blocker.
func (e *leaveEnv) checkEngineSide(t *testing.T, engineSaw bool) {
	t.Helper()
	switch {
	case e.up != nil:
		waitRecv(t, "the upstream request to be cancelled", e.cancelled)
	case engineSaw:
		e.s.await(t, "the engine to abort the request", func(st enginesim.Stats) (bool, string) {
			aborted := st.FinishedByReason["abort"]
			return st.Waiting == 0 && aborted == 1, fmt.Sprintf("waiting %d, aborted %d", st.Waiting, aborted)
		})
	default:
		if st := e.s.srv.Stats(); st.Running+st.Waiting != 1 || e.s.aborted() != 0 {
			t.Errorf("engine: running %d, waiting %d, aborted %d; want only the blocker", st.Running, st.Waiting, e.s.aborted())
		}
	}
}

// checkReleased checks that once every request ended nothing holds a place: not
// admission's slots or queue, not its ledger of requests in flight.
func (e *leaveEnv) checkReleased(t *testing.T, f *metered) {
	t.Helper()
	if e.adm != nil {
		if ts := e.adm.Stats().Tiers[0]; ts.InFlight != 0 || ts.Queued != [len(ts.Queued)]int{} {
			t.Errorf("admission holds %d in flight, %v queued after all requests ended", ts.InFlight, ts.Queued)
		}
	}
	if n, kv := f.ledger.InFlight(); n != 0 || kv != 0 {
		t.Errorf("InFlight = %d, %d after all requests ended", n, kv)
	}
}

// oneAtATime is admission control that enforces one request in flight, with a queue
// whose wait outlasts any test.
func oneAtATime(t testing.TB) *admission.Controller {
	t.Helper()
	return newAdmission(t, admission.Enforce, admission.Config{Tiers: []admission.TierConfig{
		{Name: "all", MaxInFlight: 1, MaxQueue: 4, MaxQueueWait: measure.Duration(time.Hour)},
	}})
}

// holdingUpstream never answers: it holds every request until the proxy goes away, and
// then sends on cancelled.
func holdingUpstream(t testing.TB) (*upstream, <-chan struct{}) {
	t.Helper()
	cancelled := make(chan struct{}, 16)
	u := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		cancelled <- struct{}{}
	})
	return u, cancelled
}

// leaver is a client streaming a long completion on its own goroutine until stopped.
type leaver struct {
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	chunks int            // reads that returned output
	read   signal.Changed // of chunks
}

// leave starts a client streaming longCompletion from base with the given header.
func leave(client *http.Client, base string, header http.Header) *leaver {
	ctx, cancel := context.WithCancel(context.Background())
	l := &leaver{cancel: cancel, done: make(chan error, 1)}
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(longCompletion))
		if err != nil {
			l.done <- err
			return
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			l.done <- err
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, 4<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 && strings.Contains(string(buf[:n]), `"text":"`) {
				l.mu.Lock()
				l.chunks++
				l.read.Broadcast()
				l.mu.Unlock()
			}
			if err == io.EOF {
				l.done <- nil // the answer ended before the client left
				return
			}
			if err != nil {
				l.done <- err
				return
			}
		}
	}()
	return l
}

// stop makes the client leave and returns the error its request ended with: nil when
// the answer had ended before.
func (l *leaver) stop() error {
	l.cancel()
	return <-l.done
}
