package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/slogate/slogate/enginesim"
)

func init() {
	commands["sim"] = command{summary: "run a simulated inference engine (a model of vLLM/SGLang; no GPU, no real model)", run: runSim}
}

const simAbout = `slogate sim runs a MODEL of an LLM inference engine, not an engine: it loads no
weights, needs no GPU and generates filler text. It speaks the engines' HTTP API
(/v1/completions, /v1/chat/completions, /v1/models, /tokenize, /health, /metrics, and
/get_server_info for SGLang), exposes their Prometheus metrics, and schedules requests
through a simulated continuous-batching engine whose timing is calibrated to published
benchmarks. Use it to test, demo and benchmark slogate where no engine is at hand.
docs/simulator.md describes the model, the profiles and the figures they are fitted to.

Usage: slogate sim [flags]

Profiles:
`

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", "tiny", "engine profile (see above)")
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve the engine API on")
	flavor := fs.String("flavor", "vllm", "engine to impersonate: vllm or sglang (metric names and endpoints)")
	model := fs.String("model", "", "served model name (default: the profile's)")
	notReady := fs.Duration("not-ready-for", 0, "answer 503 on /health and inference for this long after start")
	speed := fs.Float64("speed", 1, "run the model this many times faster than the engine it models (all latencies shrink by it)")
	faults := fs.String("faults", "", "faults for every request, in "+enginesim.FaultHeader+" header syntax:\n"+
		"status=CODE, rate=FRACTION, stall_after=N, drop_after=N, delay=DURATION, loop, reasoning=N")
	var prefixCaching *bool
	fs.Func("prefix-caching", "true or false: override the profile's prefix caching", func(v string) error {
		b, err := strconv.ParseBool(v)
		prefixCaching = &b
		return err
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), simAbout)
		for _, n := range enginesim.ProfileNames() {
			p, _ := enginesim.LookupProfile(n)
			fmt.Fprintf(fs.Output(), "  %-12s %s\n", n, p.Description)
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := simConfig(*profile, *flavor, *model, *faults, *notReady, prefixCaching)
	if err != nil {
		return err
	}
	cfg.Speed = *speed
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, nil))
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		return err
	}
	return serveSim(ctx, srv, *listen, cfg.Logger)
}

// simConfig assembles a simulator configuration from command-line values.
func simConfig(profile, flavor, model, faults string, notReady time.Duration, prefixCaching *bool) (enginesim.Config, error) {
	p, err := enginesim.LookupProfile(profile)
	if err != nil {
		return enginesim.Config{}, err
	}
	if model != "" {
		p.Model = model
	}
	if prefixCaching != nil {
		p.PrefixCaching = *prefixCaching
	}
	f, err := enginesim.ParseFaults(faults)
	if err != nil {
		return enginesim.Config{}, err
	}
	return enginesim.Config{Profile: p, Flavor: enginesim.Flavor(flavor), Faults: f, NotReadyFor: notReady}, nil
}

// serveSim serves the simulator on addr until ctx is done, then shuts down gracefully.
func serveSim(ctx context.Context, srv *enginesim.Server, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
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
