package sidecar

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// testSidecar is a simulator with a sidecar in front, both on loopback.
type testSidecar struct {
	sc          *Sidecar
	data, admin string // base URLs
	stop        context.CancelFunc
	done        chan error
}

func startTestSidecar(t *testing.T, drain time.Duration) *testSidecar {
	t.Helper()
	return startTestSidecarWith(t, func(cfg *Config) { cfg.DrainTimeout = drain })
}

// startTestSidecarWith is startTestSidecar with settings edited by edit.
func startTestSidecarWith(t *testing.T, edit func(*Config)) *testSidecar {
	t.Helper()
	p, _ := enginesim.LookupProfile("tiny")
	p.Timing = enginesim.Timing{StepBase: 0.005} // 5 ms per token
	return startTestSidecarOn(t, p, edit)
}

// startTestSidecarOn is startTestSidecarWith in front of a simulator of profile p.
func startTestSidecarOn(t *testing.T, p enginesim.Profile, edit func(*Config)) *testSidecar {
	t.Helper()
	up := simtest.Engine(t, enginesim.Config{Profile: p})
	cfg := testConfig(up.URL)
	edit(&cfg)
	return runTestSidecar(t, cfg, Options{})
}

// testConfig is the defaults with the engine at upstream, both listeners on free
// loopback ports, the admin API on, no DCGM, and errors logged only.
func testConfig(upstream string) Config {
	cfg := DefaultConfig()
	cfg.Upstream, cfg.Listen, cfg.AdminListen = upstream, "127.0.0.1:0", "127.0.0.1:0"
	cfg.EnableAdminAPI, cfg.DCGM, cfg.DrainTimeout = true, "off", 5*time.Second
	return cfg
}

// runTestSidecar runs a sidecar of cfg and opts until the test ends, and returns once it
// is ready.
func runTestSidecar(t *testing.T, cfg Config, opts Options) *testSidecar {
	t.Helper()
	sc, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ts := &testSidecar{sc: sc, data: "http://" + sc.Addr().String(), admin: "http://" + sc.AdminAddr().String(), stop: stop, done: make(chan error, 1)}
	go func() { ts.done <- sc.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ts.done })
	waitFor(t, "the sidecar to be ready", func() bool { return simtest.Status(ts.admin+"/readyz") == http.StatusOK })
	return ts
}

// awaitRefused waits until the data listener refuses new connections (it drains).
func (ts *testSidecar) awaitRefused(t *testing.T) {
	t.Helper()
	waitFor(t, "new connections to be refused", func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.data, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	simtest.WaitFor(t, what, 10*time.Second, cond)
}

// TestSIGTERMDrain: on shutdown, readiness turns false, new connections are refused, and
// a stream in flight finishes with [DONE] within the grace period; run returns nil.
func TestSIGTERMDrain(t *testing.T) {
	ts := startTestSidecar(t, 10*time.Second)
	stream := simtest.OpenStream(t, ts.data, 200) // about a second of tokens
	var wg sync.WaitGroup
	var done bool
	var streamErr error
	wg.Go(func() { done, streamErr = simtest.Rest(stream) })

	ts.stop()
	waitFor(t, "readiness to turn false", func() bool { return ts.sc.Ready() != nil })
	ts.awaitRefused(t)
	wg.Wait()
	if streamErr != nil || !done {
		t.Errorf("the in-flight stream ended with done=%v, err=%v; want a clean [DONE]", done, streamErr)
	}
	if err := <-ts.done; err != nil {
		t.Errorf("run returned %v after draining, want nil", err)
	}
	ts.done <- nil // for the cleanup
}

// TestDrainTimeout: a stream longer than the grace period is cut when it expires, and
// run still returns nil.
func TestDrainTimeout(t *testing.T) {
	ts := startTestSidecar(t, 200*time.Millisecond)
	stream := simtest.OpenStream(t, ts.data, 3000) // 15 s of tokens
	ts.stop()
	done, _ := simtest.Rest(stream)
	if done {
		t.Errorf("a stream longer than the drain timeout ended cleanly; want it cut")
	}
	if err := <-ts.done; err != nil {
		t.Errorf("run returned %v, want nil", err)
	}
	ts.done <- nil
}
