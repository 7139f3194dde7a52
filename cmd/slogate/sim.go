package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/sidecar"
)

func init() {
	commands["sim"] = command{summary: "run a simulated inference engine (a model of vLLM/SGLang; no GPU, no real model)", run: runSim,
		settings: func() any { return new(simSettings) }}
}

// simSettings is the settings of slogate sim. The profile and flavour are the group
// slogate demo has too, the log's the group slogate serve has.
type simSettings struct {
	enginesim.Choice               // --profile, --flavor
	Listen           string        `flag:"listen" env:"SLOGATE_LISTEN" envDefault:"127.0.0.1:8000" help:"address to serve the engine API on"`
	Model            string        `flag:"model" env:"SLOGATE_MODEL" envDefault:"" help:"served model name (default: the profile's)"`
	NotReadyFor      time.Duration `flag:"not-ready-for" env:"SLOGATE_SIM_NOT_READY_FOR" envDefault:"0s" help:"answer 503 on /health and inference for this long after start"`
	Speed            float64       `flag:"speed" env:"SLOGATE_SIM_SPEED" envDefault:"1" help:"run the model this many times faster than the engine it models (all latencies shrink by it)"`
	Faults           string        `flag:"faults" env:"SLOGATE_SIM_FAULTS" envDefault:"" help:"faults for every request, in X-Enginesim header syntax: status=CODE, rate=FRACTION, stall_after=N, drop_after=N, delay=DURATION, loop, reasoning=N"`
	PrefixCaching    string        `flag:"prefix-caching" env:"SLOGATE_SIM_PREFIX_CACHING" envDefault:"" help:"true or false: override the profile's prefix caching; empty: the profile's"`
	LongPrefill      int           `flag:"long-prefill-token-threshold" env:"SLOGATE_SIM_LONG_PREFILL_TOKEN_THRESHOLD" envDefault:"0" help:"a request's prefill takes at most this many tokens of a step, as vLLM's --long-prefill-token-threshold, leaving the rest to the requests behind a long prompt; 0: off"`
	// The engines' own admission caps, as their flags name them (docs/simulator.md).
	MaxNumQueuedReqs   int    `flag:"max-num-queued-reqs" env:"SLOGATE_SIM_MAX_NUM_QUEUED_REQS" envDefault:"0" help:"vLLM flavour: refuse a request with 503 when this many are waiting or running, as vLLM's --max-num-queued-reqs; 0: off"`
	MaxNumQueuedTokens int    `flag:"max-num-queued-tokens" env:"SLOGATE_SIM_MAX_NUM_QUEUED_TOKENS" envDefault:"0" help:"vLLM flavour: refuse a request with 503 when the prompts not yet past prefill add up to this many tokens, as vLLM's --max-num-queued-tokens; 0: off"`
	MaxQueuedRequests  int    `flag:"max-queued-requests" env:"SLOGATE_SIM_MAX_QUEUED_REQUESTS" envDefault:"0" help:"SGLang flavour: refuse a request (503, or an error event when streamed) when this many wait in the queue, as SGLang's --max-queued-requests; 0: off"`
	OTLPTracesEndpoint string `flag:"otlp-traces-endpoint" env:"SLOGATE_SIM_OTLP_TRACES_ENDPOINT" envDefault:"" help:"export a span per request to this OTLP endpoint URL, as vLLM's --otlp-traces-endpoint (docs/simulator.md, Traces): gRPC, or OTLP/HTTP with OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (then the URL includes /v1/traces); empty: no traces"`
	sidecar.Log               // --log-level, --log-format
}

const simAbout = `slogate sim runs a MODEL of an LLM inference engine, not an engine: it loads no
weights, needs no GPU and generates filler text. It speaks the engines' HTTP API
(/v1/completions, /v1/chat/completions, /v1/models, /tokenize, /health, /metrics;
/version for vLLM, /server_info and /get_server_info for SGLang), exposes their Prometheus metrics, and schedules requests
through a simulated continuous-batching engine whose timing is calibrated to published
benchmarks. Use it to test, demo and benchmark slogate where no engine is at hand.
docs/simulator.md describes the model, the profiles and the figures they are fitted to.

Usage: slogate sim [flags]

Profiles:
`

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var set simSettings
	if err := loadSettings("sim", simAbout+profileList(), &set, args, stderr); err != nil {
		return err
	}
	log, err := sidecar.NewLogger(stderr, set.LogLevel, set.LogFormat)
	if err != nil {
		return err
	}
	cfg, err := simConfig(set)
	if err != nil {
		return err
	}
	cfg.Logger = log
	if set.OTLPTracesEndpoint != "" {
		tp, err := enginesim.TracerProvider(ctx, set.OTLPTracesEndpoint, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
		if err != nil {
			return err
		}
		defer func() {
			// Flush what is batched, as vLLM's atexit shutdown of its provider does.
			flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tp.Shutdown(flushCtx); err != nil {
				log.Warn("flushing traces", "err", err)
			}
		}()
		cfg.Tracer = tp.Tracer("github.com/slogate/slogate/enginesim")
	}
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		return err
	}
	return serveSim(ctx, srv, set.Listen, cfg.Logger)
}

// profileList lists the built-in profiles for the usage text.
func profileList() string {
	var b strings.Builder
	for _, n := range enginesim.ProfileNames() {
		p, _ := enginesim.LookupProfile(n)
		fmt.Fprintf(&b, "  %-12s %s\n", n, p.Description)
	}
	return b.String()
}

// simConfig assembles a simulator configuration from the settings.
func simConfig(set simSettings) (enginesim.Config, error) {
	cfg, err := set.Choice.Config()
	if err != nil {
		return enginesim.Config{}, err
	}
	if set.Model != "" {
		cfg.Profile.Model = set.Model
	}
	if set.PrefixCaching != "" {
		b, err := strconv.ParseBool(set.PrefixCaching)
		if err != nil {
			return enginesim.Config{}, fmt.Errorf("--prefix-caching %q: want true, false or empty", set.PrefixCaching)
		}
		cfg.Profile.PrefixCaching = b
	}
	if set.LongPrefill < 0 {
		return enginesim.Config{}, fmt.Errorf("--long-prefill-token-threshold %d: want 0 (off) or more", set.LongPrefill)
	}
	cfg.Profile.LongPrefillTokenThreshold = set.LongPrefill
	if cfg.Faults, err = enginesim.ParseFaults(set.Faults); err != nil {
		return enginesim.Config{}, err
	}
	cfg.NotReadyFor, cfg.Speed = set.NotReadyFor, set.Speed
	cfg.MaxNumQueuedReqs, cfg.MaxNumQueuedTokens, cfg.MaxQueuedRequests = set.MaxNumQueuedReqs, set.MaxNumQueuedTokens, set.MaxQueuedRequests
	return cfg, nil
}

// serveSim serves the simulator on addr until ctx is done, then shuts down gracefully.
func serveSim(ctx context.Context, srv *enginesim.Server, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: enginesim.KeepAliveTimeout}
	engineCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	go func() { _ = srv.Run(engineCtx) }()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("simulated engine listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
