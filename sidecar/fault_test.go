package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/internal/simtest"
	"github.com/slogate/slogate/wire"
)

// faultEnd is how one client's stream through a draining sidecar ended.
type faultEnd struct {
	status int   // 0 when no response arrived
	done   bool  // [DONE] arrived
	usage  bool  // a usage chunk arrived
	told   bool  // an error event said slogate was shutting down
	err    error // what ended reading; nil for a clean end of the body
}

// complete reports a stream that ended as it should: [DONE], usage and a clean end.
func (e faultEnd) complete() bool {
	return e.status == http.StatusOK && e.done && e.usage && e.err == nil
}

// faultStream streams a completion of n tokens with usage through base and reads it to
// its end.
func faultStream(base string, n int) faultEnd {
	body := fmt.Sprintf(`{"prompt":"drain me","max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, n)
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return faultEnd{err: err}
	}
	defer resp.Body.Close()
	end := faultEnd{status: resp.StatusCode}
	r := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return end
		}
		if err != nil {
			end.err = err
			return end
		}
		if ev.IsDone() {
			end.done = true
		} else if c, err := wire.DecodeChunk(ev.Data); err == nil && c.Usage != nil && len(c.Choices) == 0 {
			end.usage = true
		} else if err == nil && c.Error != nil && strings.Contains(c.Error.Message, "shutting down") {
			end.told = true
		}
	}
}

// TestFaultSIGTERMUnderLoad cancels the sidecar's context, as SIGTERM does in runServe,
// with streams in flight and more waiting in admission's queue. While it drains,
// /readyz answers 503 and new connections are refused. Every stream admitted before the
// signal either completes ([DONE] and usage) or, when the grace period runs out first,
// is cut short and told so (an error event, or 503 while queued); none ends as a
// silently truncated success. Every request is counted in slogate_requests_total, the
// cut ones as shutdown, and run returns nil.
func TestFaultSIGTERMUnderLoad(t *testing.T) {
	cases := []struct {
		name     string
		drain    time.Duration
		tokens   []int // the streams' lengths, at 5 ms a token
		complete int   // streams that must complete (the rest may, or end in a visible error)
		cut      int   // streams that cannot complete within the grace period
		// The drain lasts long enough to ask /readyz over HTTP; a short one may be over
		// before the question, so readiness is asked of the sidecar directly.
		readyzHTTP bool
	}{
		// 12 streams, 4 at a time: three waves of half a second, well inside 10 s.
		{name: "all finish within the grace period", drain: 10 * time.Second, tokens: faultRepeat(12, 100), complete: 12, readyzHTTP: true},
		// Four 15 s streams cannot finish in 300 ms; the short ones may.
		{name: "the grace period runs out", drain: 300 * time.Millisecond, tokens: append(faultRepeat(4, 3000), faultRepeat(8, 20)...), cut: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := faultFourAtATime(t, tc.drain)
			ends := make([]faultEnd, len(tc.tokens))
			var wg sync.WaitGroup
			for i, n := range tc.tokens {
				wg.Go(func() { ends[i] = faultStream(ts.data, n) })
			}
			waitFor(t, "4 streams in flight and the rest queued", func() bool {
				n, _ := ts.sc.admission.InFlight()
				q := ts.sc.admission.Stats().Tiers[0].Queued
				return n == 4 && q[admission.Interactive] == len(tc.tokens)-4
			})

			ts.stop()
			if tc.readyzHTTP {
				waitFor(t, "/readyz to answer 503", func() bool { return simtest.Status(ts.admin+"/readyz") == http.StatusServiceUnavailable })
			} else {
				waitFor(t, "readiness to turn false", func() bool { return ts.sc.Ready() != nil })
			}
			ts.awaitRefused(t)
			wg.Wait()
			if err := <-ts.done; err != nil {
				t.Errorf("run returned %v after draining, want nil", err)
			}
			ts.done <- nil // for the cleanup

			complete, cut := faultTally(t, ends, tc.tokens)
			if complete < tc.complete || cut < tc.cut || complete+cut != len(ends) {
				t.Errorf("%d streams complete and %d cut visibly; want at least %d complete and %d cut, of %d", complete, cut, tc.complete, tc.cut, len(ends))
			}
			var m map[string]int
			waitFor(t, "every request counted", func() bool {
				m = faultRequests(t, ts)
				return m["total"] == len(ends) && m["ok"] == complete && m["shutdown"] == cut
			})
			t.Logf("%d streams complete, %d cut; slogate_requests_total by outcome: %v", complete, cut, m)
		})
	}
}

// faultFourAtATime starts a sidecar with drain as its grace period, whose admission
// control lets 4 requests at a time through and queues the rest.
func faultFourAtATime(t *testing.T, drain time.Duration) *testSidecar {
	t.Helper()
	tiers := filepath.Join(t.TempDir(), "tiers.yaml")
	yaml := "tiers:\n  - name: all\n    max_in_flight: 4\n    max_queue: 16\n    max_queue_wait: 1m\n"
	if err := os.WriteFile(tiers, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return startTestSidecarWith(t, func(cfg *Config) {
		cfg.DrainTimeout, cfg.Admission, cfg.TiersFile = drain, "enforce", tiers
	})
}

// faultTally counts the streams that completed and those cut short when the grace
// period ran out, which their clients were told of (503 before the stream began, an
// error event and an aborted body after), and fails the test for any other end: a
// silent truncation, or a cut nobody explained.
func faultTally(t *testing.T, ends []faultEnd, tokens []int) (complete, cut int) {
	t.Helper()
	for i, e := range ends {
		switch {
		case e.complete():
			complete++
		case e.status == http.StatusServiceUnavailable, e.status == http.StatusOK && e.told && e.err != nil:
			cut++
		default:
			t.Errorf("stream %d (%d tokens) ended silently: status %d, [DONE] %v, usage %v, err %v", i, tokens[i], e.status, e.done, e.usage, e.err)
		}
	}
	return complete, cut
}

// faultRepeat returns n copies of v.
func faultRepeat(n, v int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// faultRequests sums the sidecar's slogate_requests_total by outcome, and in all under
// "total".
func faultRequests(t *testing.T, ts *testSidecar) map[string]int {
	t.Helper()
	families, err := ts.sc.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int)
	for _, f := range families {
		if f.GetName() != "slogate_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			n := int(m.GetCounter().GetValue())
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += n
				}
			}
			out["total"] += n
		}
	}
	return out
}
