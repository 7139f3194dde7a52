package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/proxy"
)

// setup says what stands between the client and the engine of one stack.
type setup struct {
	Name string
	// Admission is nil for a plain proxy (no admission control).
	Admission *admission.Config
	// Engine feeds admission the engine scraper's snapshots, which its saturation check
	// weighs with its own KV tokens in flight; without it admission sees no engine
	// signal at all.
	Engine bool
	SLO    slo
}

// stack is one simulated deployment, all in this process: a simulated engine on its own
// loopback server, slogate's proxy in front of it on another (with, as the setup says,
// an engine scraper and an admission controller wired as `slogate serve` wires them),
// and a client of its own.
type stack struct {
	setup   setup
	sim     *enginesim.Server
	simSrv  *httptest.Server
	prx     *proxy.Proxy
	prxSrv  *httptest.Server
	scraper *engine.Scraper
	ctrl    *admission.Controller
	client  *http.Client
	url     string // the proxy's /v1/completions
	profile enginesim.Profile

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Intervals of the background loops, as `slogate serve` runs them (scrape-interval 1s).
const (
	scrapeInterval = time.Second
	admissionTick  = 20 * time.Millisecond
)

// newStack starts a stack for su in front of a fresh simulated engine of profile p
// (vLLM flavour). Close stops it.
func newStack(su setup, p enginesim.Profile) (*stack, error) {
	sim, err := enginesim.NewServer(enginesim.Config{Profile: p, Flavor: enginesim.FlavorVLLM})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	st := &stack{setup: su, sim: sim, stop: stop, client: newClient(), profile: p}
	st.simSrv = quietServer(sim.Handler())
	st.wg.Go(func() { _ = sim.Run(ctx) })
	upstream, _ := url.Parse(st.simSrv.URL)
	cfg := proxy.Config{Upstream: upstream, InjectUsage: true}
	if su.Admission != nil {
		if err := st.startAdmission(ctx, su); err != nil {
			st.Close()
			return nil, err
		}
		cfg.Admission = st.ctrl
	}
	st.prx = proxy.New(cfg)
	st.prxSrv = quietServer(st.prx)
	st.url = st.prxSrv.URL + "/v1/completions"
	return st, nil
}

// startAdmission builds the scraper (if the setup uses engine signals) and the admission
// controller in enforce mode, and runs them.
func (st *stack) startAdmission(ctx context.Context, su setup) error {
	opts := admission.Options{
		Mode: admission.Enforce,
		SLO:  admission.SLO{TTFT: admission.Duration(su.SLO.TTFT), TPOT: admission.Duration(su.SLO.TPOT)},
	}
	if su.Engine {
		st.scraper = engine.NewScraper(engine.ScraperConfig{BaseURL: st.simSrv.URL, Kind: engine.KindVLLM, Interval: scrapeInterval})
		st.wg.Go(func() { _ = st.scraper.Run(ctx) })
		opts.Engine = st.scraper // admission counts its own KV tokens in flight
	}
	ctrl, err := admission.New(*su.Admission, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", su.Name, err)
	}
	st.ctrl = ctrl
	st.wg.Go(func() { ctrl.Run(ctx, admissionTick) })
	return nil
}

// quietServer starts a loopback HTTP server whose error log is discarded (the cut-off
// cancels streams mid-write on purpose).
func quietServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	return srv
}

// Close stops the stack: its servers, engine loop, scraper and admission controller.
func (st *stack) Close() {
	if st.prxSrv != nil {
		st.prxSrv.CloseClientConnections()
		st.prxSrv.Close()
	}
	st.simSrv.CloseClientConnections()
	st.simSrv.Close()
	st.stop()
	st.wg.Wait()
	st.client.CloseIdleConnections()
}
