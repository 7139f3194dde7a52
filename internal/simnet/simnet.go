// Package simnet serves the engine simulator (package enginesim) on an in-memory network
// (package memnet) for the tests of what runs in front of it: the prober, the calibration
// and the proxy. Started inside a testing/synctest bubble, the engine, its handlers and
// their clients all run on the bubble's clock, so a test sees the timings of the
// simulator's model and nothing of the machine's load.
package simnet

import (
	"context"
	"net/http"
	"testing"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/memnet"
)

// Start runs a simulated engine for cfg (the tiny profile when cfg has none) and serves
// its handler, wrapped by wrap when wrap is not nil, on an in-memory network until the
// test ends: then the network closes first and the engine stops. Inside a synctest
// bubble, call it in the bubble.
func Start(t testing.TB, cfg enginesim.Config, wrap func(http.Handler) http.Handler) (*enginesim.Server, *memnet.Server) {
	t.Helper()
	if cfg.Profile.Name == "" {
		p, err := enginesim.LookupProfile("tiny")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Profile = p
	}
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		t.Fatalf("enginesim.NewServer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	var h http.Handler = srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ms := memnet.NewServer(h)
	t.Cleanup(func() {
		ms.Close()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("simulator Run returned %v, want nil", err)
		}
	})
	return srv, ms
}
