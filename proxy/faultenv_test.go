package proxy_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/wire"
)

// The setup of the fault suite (fault*_test.go): slogate with its real exporter, so that
// a test checks what the metrics count and not only what the proxy reports, and engines
// that a test can stop and start again at the same address.

// metered is a front whose requests are also recorded by slogate's exporter.
type metered struct {
	*front
	reg *prometheus.Registry
}

// startMetered is startProxy with the exporter, as `slogate serve` wires it, observing.
func startMetered(t testing.TB, upstream string, cfg proxy.Config) *metered {
	t.Helper()
	return startMeteredKeeping(t, upstream, cfg, 0)
}

// startMeteredKeeping is startMetered with an observer that keeps only the last keep
// results (all when keep is 0).
func startMeteredKeeping(t testing.TB, upstream string, cfg proxy.Config, keep int) *metered {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := exporter.New(reg, exporter.Options{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond,
		ServedModels: func() []string { return []string{simModel} }})
	cfg.Observers = append(cfg.Observers, m)
	return &metered{front: startProxyKeeping(t, upstream, cfg, keep), reg: reg}
}

// requests returns the non-zero series of slogate_requests_total summed by outcome and
// code, keyed "outcome code" (e.g. "ok 200").
func (m *metered) requests(t testing.TB) map[string]int {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int)
	for _, f := range families {
		if f.GetName() != "slogate_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			var outcome, code string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "outcome":
					outcome = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			if v := int(s.GetCounter().GetValue()); v > 0 {
				out[outcome+" "+code] += v
			}
		}
	}
	return out
}

// engineSite is a simulated engine at a fixed address that a test stops and starts
// again, as a crashing or restarting engine container would be. It is stopped when the
// test ends; create it before the proxy in front of it.
type engineSite struct {
	t    *testing.T
	addr string
	cfg  enginesim.Config
	cur  *sim
	halt func() // stops cur
}

// newEngineSite reserves a local address for an engine of cfg, without starting it.
func newEngineSite(t *testing.T, cfg enginesim.Config) *engineSite {
	t.Helper()
	if cfg.Profile.Name == "" {
		cfg.Profile = tinyProfile(t, nil)
	}
	e := &engineSite{t: t, addr: strings.TrimPrefix(closedURL(t), "http://"), cfg: cfg}
	t.Cleanup(e.stop)
	return e
}

func (e *engineSite) url() string { return "http://" + e.addr }

// start starts a fresh engine at the site's address.
func (e *engineSite) start() *sim {
	e.t.Helper()
	l, err := net.Listen("tcp", e.addr)
	if err != nil {
		e.t.Fatalf("listening on the engine's address again: %v", err)
	}
	srv, err := enginesim.NewServer(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener.Close()
	hs.Listener = l
	hs.Start()
	e.cur = &sim{srv: srv, hs: hs}
	e.halt = func() {
		hs.CloseClientConnections() // a crash: streams in flight break off
		hs.Close()
		cancel()
		<-ran
	}
	return e.cur
}

// stop stops the engine as a crash would, breaking the connections in flight.
func (e *engineSite) stop() {
	if e.halt != nil {
		e.halt()
		e.cur, e.halt = nil, nil
	}
}

// errorEvent returns the error event a stream carried, or nil.
func (s sseRead) errorEvent() *wire.APIError {
	for i := range s.chunks {
		if s.chunks[i].Error != nil {
			return s.chunks[i].Error
		}
	}
	return nil
}

// silentUpstream answers every request with the headers of an event stream and first,
// and then nothing until the proxy goes away; cancelled receives once per request that
// ended because the proxy cancelled it.
func silentUpstream(t testing.TB, first []byte) (*upstream, <-chan struct{}) {
	t.Helper()
	cancelled := make(chan struct{}, 16)
	u := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(first)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		cancelled <- struct{}{}
	})
	return u, cancelled
}
