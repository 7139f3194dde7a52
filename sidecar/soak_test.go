package sidecar

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/bench/soak"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// skipUnderRace skips a test that drives hundreds of clients for a minute: under the race
// detector the load would measure the detector. make test runs these tests once more
// without -race (the acceptance target).
func skipUnderRace(t *testing.T) {
	t.Helper()
	if simtest.Race {
		t.Skip("too slow under -race; make acceptance runs it without -race")
	}
}

// The CI-sized soak: 200 clients for 52 seconds.
const (
	soakClients  = 200
	soakDuration = 52 * time.Second
	soakEvery    = 1500 * time.Millisecond // between samples
	// The sidecar's timeouts, and the slow-headers fault's delay just past them: long
	// enough that no answer without a fault meets them on a busy machine (the longest
	// non-streaming answer, 32 tokens, takes under a second), short enough for a test
	// of a minute.
	soakTimeout = 8 * time.Second
)

// Acceptance (issue 9): "a soak ... at high concurrency against the simulator showing
// flat memory and goroutine counts; a CI-sized version (about a minute) in make test."
//
// TestAcceptanceSoak runs bench/soak's mix (streams, whole answers, clients leaving at
// every stage, 400s, 413s, passthrough, and engine faults in the third quarter of every
// 20 seconds) from 200 clients through a sidecar with admission enforced by tiers tight
// enough to queue and reject part of it, all in this process, in front of the simulator.
// Every 1.5 s it samples the process's goroutines, open fds and heap in use after a
// forced collection; soak.DefaultRule judges them as bench/soak.sh does. No request may
// get a 5xx it did not ask the engine for, a broken answer or none; slogate's
// slogate_requests_total must count every request the clients sent under the status they
// got; and once the clients are gone and the engine's idle connections closed, the
// goroutines and open fds must return to their level before the load.
func TestAcceptanceSoak(t *testing.T) {
	skipUnderRace(t)
	ts, engine, model := startSoakStack(t)
	before := settledSoakLevel()
	t.Logf("before the load: %d goroutines, %d open fds", before.goroutines, before.fds)

	var tally soak.Tally
	done := make(chan error, 1)
	go func() {
		done <- soak.Run(context.Background(), soak.Config{
			URL: ts.data, Model: model, Clients: soakClients, Duration: soakDuration,
			Grace: 2*soakTimeout + 5*time.Second, MaxBodyBytes: 64 << 10,
			Think: time.Second, FaultCycle: 20 * time.Second, SlowHeaders: soakTimeout + time.Second, Seed: 9,
		}, &tally)
	}()
	samples := soakSamples(t, ts, done)

	v := soak.Judge(samples, soak.DefaultRule)
	var report bytes.Buffer
	soak.WriteSamples(&report, samples, 2)
	report.WriteString("\n")
	v.WriteMarkdown(&report)
	report.WriteString("\n")
	tally.WriteMarkdown(&report)
	t.Logf("%d requests (%d asked the engine for a fault)\n%s", tally.Total(), tally.Faults(), report.String())
	if !v.Flat {
		t.Errorf("the samples are not flat")
	}
	for _, o := range []soak.Outcome{soak.Unexplained5xx, soak.Broken, soak.NoAnswer} {
		if n := tally.Outcomes(o); n > 0 {
			t.Errorf("%d requests ended as %s", n, o)
		}
	}
	if tally.Outcomes(soak.Rejected) == 0 || tally.Outcomes(soak.Cancelled) == 0 || tally.Outcomes(soak.EngineFault) == 0 {
		t.Errorf("the mix lacked rejections, cancellations or faults: the soak did not exercise them")
	}
	for _, p := range tally.Check(soakRequestsByCode(t, ts)) {
		t.Error(p)
	}

	// The clients closed their idle connections as they stopped; the engine closes its
	// own, as it would after its keep-alive timeout, so slogate's idle ones go too.
	engine.CloseClientConnections()
	soakBackToLevel(t, before)
}

// startSoakStack starts the simulator (profile tiny at a tenth of its speed: 20 ms a
// token, as bench/soak.sh runs it) on httptest, and a sidecar in front with
// soak.Tiers enforced and the soak's timeouts. It returns the engine's server too, whose
// connections the test closes at the end.
func startSoakStack(t *testing.T) (*testSidecar, *httptest.Server, string) {
	t.Helper()
	p, _ := enginesim.LookupProfile("tiny")
	up := simtest.Engine(t, enginesim.Config{Profile: p, Speed: 0.1})

	tiers := filepath.Join(t.TempDir(), "tiers.yaml")
	if err := os.WriteFile(tiers, []byte(soak.Tiers(soakClients)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(up.URL)
	cfg.Admission, cfg.TiersFile, cfg.MaxBodyBytes = "enforce", tiers, 64<<10
	cfg.UpstreamTimeout, cfg.StreamIdleTimeout = soakTimeout, soakTimeout
	ts := runTestSidecar(t, cfg, Options{})
	http.DefaultClient.CloseIdleConnections() // the readiness check's connection
	return ts, up, p.Model
}

// soakSamples samples the process every soakEvery while the clients send requests (not
// while the last ones drain) and returns once the load is done; it fails the test at
// once if the sidecar stops.
func soakSamples(t *testing.T, ts *testSidecar, done <-chan error) []soak.Sample {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(soakEvery)
	defer tick.Stop()
	var samples []soak.Sample
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the load: %v", err)
			}
			return samples
		case err := <-ts.done:
			ts.done <- err // for the cleanup
			t.Fatalf("the sidecar stopped during the soak: %v", err)
		case <-tick.C:
			if time.Since(start) > soakDuration {
				continue
			}
			l := measureSoakLevel()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms) // after the collection measureSoakLevel forced
			samples = append(samples, soak.Sample{
				At: time.Since(start), Goroutines: float64(l.goroutines), FDs: float64(l.fds),
				Heap: float64(ms.HeapInuse), RSS: -1, Requests: float64(faultRequests(t, ts)["total"]),
			})
		}
	}
}

// soakLevel is what must return to where it was before the load.
type soakLevel struct{ goroutines, fds int }

// measureSoakLevel forces a collection (so that finished goroutines' and connections'
// finalizers have run) and counts goroutines and open fds (-1 where /proc/self/fd is
// missing).
func measureSoakLevel() soakLevel {
	runtime.GC()
	fds := -1
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	return soakLevel{goroutines: runtime.NumGoroutine(), fds: fds}
}

// settledSoakLevel returns the lowest goroutines and fds seen over a second of idleness (a
// scrape of the engine in flight holds one of each for a moment).
func settledSoakLevel() soakLevel {
	low := measureSoakLevel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range 10 {
		<-tick.C
		l := measureSoakLevel()
		low.goroutines, low.fds = min(low.goroutines, l.goroutines), min(low.fds, l.fds)
	}
	return low
}

// soakBackToLevel waits up to 20 s for goroutines and open fds to return to before, and
// fails with the goroutines left over if they do not.
func soakBackToLevel(t *testing.T, before soakLevel) {
	t.Helper()
	start := time.Now()
	var l soakLevel
	back := func() bool {
		l = measureSoakLevel()
		return l.goroutines <= before.goroutines && l.fds <= before.fds
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !back() {
		select {
		case <-tick.C:
		case <-deadline:
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("20s after the load: %d goroutines and %d open fds, before it %d and %d; goroutines:\n%s",
				l.goroutines, l.fds, before.goroutines, before.fds, b.String())
		}
	}
	t.Logf("after the load: %d goroutines, %d open fds, back to their level within %s", l.goroutines, l.fds, time.Since(start).Round(time.Millisecond))
}

// soakRequestsByCode sums the sidecar's slogate_requests_total by code.
func soakRequestsByCode(t *testing.T, ts *testSidecar) map[int]float64 {
	t.Helper()
	families, err := ts.sc.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]float64)
	for _, f := range families {
		if f.GetName() != "slogate_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "code" {
					continue
				}
				code, err := strconv.Atoi(l.GetValue())
				if err != nil {
					t.Fatalf("slogate_requests_total has code %q", l.GetValue())
				}
				out[code] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}
