package synth

import (
	"net/http"
	"testing"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simnet"
)

// Virtual time: a test that calls startVirtualSim inside a testing/synctest bubble runs
// the simulator's engine, its HTTP handlers and the prober on the bubble's clock, over an
// in-memory network (internal/memnet). The clock advances only when every goroutine
// waits, so the engine keeps its model's time exactly and the prober measures it with
// nothing of the machine's time added: what such a test asserts does not depend on the
// machine's load. What the wall clock adds is measured by the benchmarks
// (BenchmarkProberOverhead, docs/benchmarks.md).

// startVirtualSim starts a simulator for cfg (the tiny profile when cfg has none) served
// on an in-memory network (internal/simnet), behind a wireClock, until the test ends. Call it inside the
// synctest bubble the test runs in.
func startVirtualSim(t *testing.T, cfg enginesim.Config) *virtualSim {
	t.Helper()
	var wc *wireClock
	srv, ms := simnet.Start(t, cfg, func(h http.Handler) http.Handler {
		wc = &wireClock{h: h}
		return wc
	})
	return &virtualSim{sim: &sim{srv: srv, url: ms.URL, wire: wc}, client: ms.Client}
}

// virtualSim is a sim on the in-memory network, reached only through its client.
type virtualSim struct {
	*sim
	client *http.Client
}

// target returns a Target for the simulator's model, on the in-memory network.
func (s *virtualSim) target(_ testing.TB, model string) *Target {
	return &Target{BaseURL: s.url, Model: model, Client: s.client}
}

// countedVirtualSim is countedSim on the in-memory network: a simulator for cfg behind a
// counter, and a Target for it. Call it inside the synctest bubble the test runs in.
func countedVirtualSim(t *testing.T, cfg enginesim.Config) (*counter, *Target) {
	t.Helper()
	if cfg.Profile.Name == "" {
		cfg.Profile = simProfile(t, "tiny", nil)
	}
	var c *counter
	_, ms := simnet.Start(t, cfg, func(h http.Handler) http.Handler {
		c = &counter{h: h}
		return c
	})
	return c, &Target{BaseURL: ms.URL, Model: cfg.Profile.Model, Client: ms.Client}
}
