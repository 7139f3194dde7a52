package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/sidecar"
)

// setup says what stands between the client and the engine of one stack.
type setup struct {
	Name string
	// Admission is nil for the sidecar with admission off.
	Admission *admission.Config
	// Engine lets admission's saturation check act (the engine's queue and KV usage,
	// and its own ledger of tokens in flight); without it only the tiers' limits do.
	Engine bool
	SLO    measure.SLO
	// SatQueue and SatKV, when above 0, are the saturation thresholds of a setup with
	// Engine (the engine's waiting requests, its KV usage); 0 takes the sidecar's.
	SatQueue, SatKV float64
	// Scrape, when above 0, is how often the sidecar reads the engine's metrics; 0
	// takes the sidecar's default.
	Scrape time.Duration
	// Caps are the engine's own admission caps (0: off, as in the engine).
	Caps engineCaps
	// Flavor is the engine's in a virtual run (virtual.go): its caps, and whether its
	// metrics say why requests wait; "" is vLLM. The real-time stacks serve vLLM's.
	Flavor enginesim.Flavor
}

// stack is one simulated deployment, all in this process: a simulated engine on its own
// loopback server and, in front of it, the sidecar `slogate serve` runs (built by the
// same sidecar.New, with the setup's admission), with a client of its own.
type stack struct {
	setup   setup
	sim     *enginesim.Server
	simSrv  *httptest.Server
	sc      *sidecar.Sidecar
	ctrl    *admission.Controller // the sidecar's, when the setup has admission control
	client  *http.Client
	url     string // the sidecar's /v1/completions
	profile enginesim.Profile

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// newStack starts a stack for su in front of a fresh simulated engine of profile p
// (vLLM flavour). Close stops it.
func newStack(su setup, p enginesim.Profile) (*stack, error) {
	sim, err := enginesim.NewServer(su.Caps.apply(enginesim.Config{Profile: p, Flavor: enginesim.FlavorVLLM}))
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	st := &stack{setup: su, sim: sim, stop: stop, client: newClient(), profile: p}
	st.simSrv = quietServer(sim.Handler())
	st.wg.Go(func() { _ = sim.Run(ctx) })
	cfg, opts := sidecarFor(su, st.simSrv.URL)
	if st.sc, err = sidecar.New(cfg, opts); err != nil {
		st.Close()
		return nil, fmt.Errorf("%s: %w", su.Name, err)
	}
	if su.Admission != nil {
		st.ctrl = st.sc.Admission()
	}
	st.wg.Go(func() { _ = st.sc.Run(ctx) })
	st.url = "http://" + st.sc.Addr().String() + "/v1/completions"
	return st, nil
}

// sidecarFor returns the sidecar settings of su in front of the engine at upstream:
// serve's defaults on loopback ports, without DCGM, cutting requests at once when the
// stack closes; admission off without tiers, else enforced with them. A setup without
// engine signals gets saturation thresholds no engine reaches, so that only the tiers'
// own limits act.
func sidecarFor(su setup, upstream string) (sidecar.Config, sidecar.Options) {
	cfg := sidecar.DefaultConfig()
	cfg.Upstream, cfg.Listen, cfg.AdminListen, cfg.DCGM = upstream, "127.0.0.1:0", "127.0.0.1:0", "off"
	cfg.SLOTTFT, cfg.SLOTPOT, cfg.DrainTimeout = time.Duration(su.SLO.TTFT), time.Duration(su.SLO.TPOT), 0
	cfg.Admission = "off"
	var opts sidecar.Options
	if su.Admission != nil {
		cfg.Admission, opts.Tiers = "enforce", su.Admission
		switch {
		case !su.Engine:
			cfg.SaturationQueue, cfg.SaturationKV = math.Inf(1), math.Inf(1)
		case su.SatQueue > 0 || su.SatKV > 0:
			cfg.SaturationQueue, cfg.SaturationKV = orSidecar(su.SatQueue, cfg.SaturationQueue), orSidecar(su.SatKV, cfg.SaturationKV)
		}
		if su.Scrape > 0 {
			cfg.ScrapeInterval = su.Scrape
		}
	}
	return cfg, opts
}

// orSidecar returns v, or the sidecar's default def when v is 0.
func orSidecar(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

// quietServer starts a loopback HTTP server whose error log is discarded (the cut-off
// cancels streams mid-write on purpose).
func quietServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	return srv
}

// Close stops the stack: the sidecar (its requests cut short at once), the engine's
// server and loop.
func (st *stack) Close() {
	if st.sim == nil { // a virtual run's: no servers
		return
	}
	st.stop()
	st.wg.Wait()
	st.simSrv.CloseClientConnections()
	st.simSrv.Close()
	st.client.CloseIdleConnections()
}
