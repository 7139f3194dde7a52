package proxy_test

import (
	"net/url"
	"testing"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/memnet"
	"github.com/slogate/slogate/internal/simnet"
	"github.com/slogate/slogate/proxy"
)

// virtualEnv is a simulator and slogate in front of it on an in-memory network
// (internal/memnet). Inside a testing/synctest bubble both run on the bubble's clock, so
// what slogate measures is what the simulator's model did, with nothing of the machine's
// time added.
type virtualEnv struct {
	engine  *memnet.Server // the simulator; its Client reaches it directly
	slogate *memnet.Server // the proxy in front of it
	obs     *observer
}

// startVirtualEnv starts a simulator for simCfg (the tiny profile when it has none) and
// a proxy configured by cfg in front of it, with an observer added, until the test ends.
// Call it inside the synctest bubble the test runs in.
func startVirtualEnv(t *testing.T, simCfg enginesim.Config, cfg proxy.Config) *virtualEnv {
	t.Helper()
	_, engine := simnet.Start(t, simCfg, nil)
	u, err := url.Parse(engine.URL)
	if err != nil {
		t.Fatal(err)
	}
	obs := &observer{}
	cfg.Upstream, cfg.Transport = u, engine.Client.Transport
	cfg.Observers = append(cfg.Observers, obs)
	front := memnet.NewServer(proxy.New(cfg))
	t.Cleanup(front.Close)
	return &virtualEnv{engine: engine, slogate: front, obs: obs}
}
