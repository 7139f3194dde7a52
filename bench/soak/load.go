package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Config configures a load. Zero fields take the defaults named.
type Config struct {
	URL      string        // slogate's data listener, e.g. http://127.0.0.1:8080; required
	Model    string        // the engine's served model; required
	Clients  int           // concurrent clients; default 1,000
	Duration time.Duration // how long clients start new requests; default 10m
	// Grace is how long the requests in flight when Duration ends may take to finish;
	// those still going then are cut and count as failures (NoAnswer, or Broken for a
	// stream), for they hung. Default 30s: longer than slogate's stream idle and upstream
	// timeouts must be.
	Grace time.Duration
	// Think is the longest pause of a client between two requests (a uniform random
	// time up to it), as a person reads an answer. Default 2s.
	Think time.Duration
	// MaxTokens is the longest stream's output; streams ask for 16 to MaxTokens tokens.
	// Default 128.
	MaxTokens int
	// WholeTokens is the longest non-streaming answer: its client waits for all of it
	// before slogate's upstream timeout starts to matter. Default 32.
	WholeTokens int
	// MaxBodyBytes is slogate's --max-body-bytes: Oversized requests send 4 KiB more.
	// Default 64 KiB.
	MaxBodyBytes int64
	// FaultCycle splits the load into cycles whose third quarter is a fault phase (so a
	// ten-minute load at the default 60s has ten). 0: no faults.
	FaultCycle time.Duration
	// FaultShare of the streams and whole requests sent in a fault phase ask the engine
	// for a fault. Default 0.25.
	FaultShare float64
	// SlowHeaders is the delay of the SlowHeaders fault; it must exceed slogate's
	// --upstream-timeout, so that slogate answers 504. 0: no SlowHeaders faults.
	SlowHeaders time.Duration
	// MaxRetryAfter caps the wait of a rejected client, which otherwise honours
	// Retry-After-Ms (with ±50% jitter). Default 2s.
	MaxRetryAfter time.Duration
	Seed          uint64 // seeds the clients' choices; 0: a fixed seed
}

func (c *Config) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Clients <= 0 {
		c.Clients = 1000
	}
	def(&c.Duration, 10*time.Minute)
	def(&c.Grace, 30*time.Second)
	def(&c.Think, 2*time.Second)
	def(&c.MaxRetryAfter, 2*time.Second)
	if c.MaxTokens < 17 {
		c.MaxTokens = 128
	}
	if c.WholeTokens < 5 {
		c.WholeTokens = 32
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 10
	}
	if c.FaultShare <= 0 {
		c.FaultShare = 0.25
	}
}

// FaultPhase reports whether elapsed, the time since the load began, falls in a fault
// phase of cycle: its third quarter.
func FaultPhase(cycle, elapsed time.Duration) bool {
	if cycle <= 0 {
		return false
	}
	at := elapsed % cycle
	return at >= cycle/2 && at < cycle*3/4
}

// mix is a running load: its configuration and the clients' shared transport.
type mix struct {
	cfg       Config
	client    *http.Client
	oversized []byte
	start     time.Time
	stop      <-chan struct{} // closed when clients must start no new request
}

// Run drives cfg's load at slogate and records every request in tally, which the caller
// may read while it runs. It returns once every client has stopped (Duration, then up to
// Grace for the requests in flight) or ctx is done, after closing the clients' idle
// connections, so that nothing of the load is left in slogate but what slogate keeps.
func Run(ctx context.Context, cfg Config, tally *Tally) error {
	if cfg.URL == "" || cfg.Model == "" {
		return errors.New("soak: Config.URL and Config.Model are required")
	}
	if _, err := http.NewRequest(http.MethodGet, cfg.URL, nil); err != nil {
		return fmt.Errorf("soak: Config.URL: %w", err)
	}
	cfg.defaults()
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:          2 * cfg.Clients,
		MaxIdleConnsPerHost:   2 * cfg.Clients,
		IdleConnTimeout:       time.Minute,
		ExpectContinueTimeout: 5 * time.Second,
		DisableCompression:    true,
	}
	defer tr.CloseIdleConnections()
	stop := make(chan struct{})
	m := &mix{
		cfg: cfg, client: &http.Client{Transport: tr},
		oversized: oversizedBody(cfg.MaxBodyBytes), start: time.Now(), stop: stop,
	}
	// Requests run under hard: cancelled Grace after the last one may start.
	hard, cancel := context.WithTimeout(ctx, cfg.Duration+cfg.Grace)
	defer cancel()
	timer := time.AfterFunc(cfg.Duration, func() { close(stop) })
	defer timer.Stop()
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		wg.Go(func() { m.runClient(hard, rng, tally) })
	}
	wg.Wait()
	return ctx.Err()
}

// runClient is one client: request, think, again, until the load stops.
func (m *mix) runClient(ctx context.Context, rng *rand.Rand, tally *Tally) {
	// Clients start spread over the first Think, not all in one instant.
	if !m.pause(ctx, time.Duration(rng.Int64N(int64(m.cfg.Think)+1))) {
		return
	}
	for {
		k := pick(rng)
		f := m.fault(rng, k)
		r := m.build(rng, k, f)
		e := m.do(ctx, r)
		tally.add(k, f, e)
		wait := time.Duration(rng.Int64N(int64(m.cfg.Think) + 1))
		if e.status == http.StatusTooManyRequests {
			wait = time.Duration(float64(min(e.retryAfter, m.cfg.MaxRetryAfter)) * (0.5 + rng.Float64()))
		}
		if !m.pause(ctx, wait) {
			return
		}
	}
}

// pause waits d and reports whether the client may send another request.
func (m *mix) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.stop:
		return false
	case <-ctx.Done():
		return false
	}
	select {
	case <-m.stop:
		return false
	default:
		return true
	}
}

// fault chooses the engine fault of a request of kind k: none outside fault phases,
// and only faults that kind can show.
func (m *mix) fault(rng *rand.Rand, k Kind) Fault {
	if !FaultPhase(m.cfg.FaultCycle, time.Since(m.start)) || rng.Float64() >= m.cfg.FaultShare {
		return NoFault
	}
	switch k {
	case StreamCompletion, StreamChat:
		fs := []Fault{Status500, Status503, DropStream, StallStream, SlowHeaders}
		if m.cfg.SlowHeaders <= 0 {
			fs = fs[:4]
		}
		return fs[rng.IntN(len(fs))]
	case Whole:
		fs := []Fault{Status500, Status503, SlowHeaders}
		if m.cfg.SlowHeaders <= 0 {
			fs = fs[:2]
		}
		return fs[rng.IntN(len(fs))]
	}
	return NoFault
}
