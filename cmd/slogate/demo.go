package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

func init() {
	commands["demo"] = command{summary: "run the sidecar in front of the built-in engine simulator", run: runDemo}
}

const demoAbout = `slogate demo runs slogate's main job on one machine: a simulated inference engine
(slogate sim; no GPU, no model) with the sidecar in front of it, in one process. Send
OpenAI-compatible requests to the printed URL and watch /metrics; --load adds light
synthetic traffic, --duration stops it by itself.

Usage: slogate demo [flags]

Flags:
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address clients connect to")
	adminListen := fs.String("admin-listen", "127.0.0.1:9090", "address of /metrics, /healthz and /readyz")
	profile := fs.String("profile", "tiny", "simulator profile (see slogate sim -h)")
	flavor := fs.String("flavor", "vllm", "engine the simulator impersonates: vllm or sglang")
	load := fs.Bool("load", false, "send light synthetic traffic through slogate")
	streams := fs.Int("streams", 4, "concurrent synthetic clients with --load")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	logLevel := fs.String("log-level", "warn", "sidecar log level (info logs every request)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), demoAbout); fs.PrintDefaults() }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *streams < 1 {
		return fmt.Errorf("--streams %d: want at least 1", *streams)
	}
	simCfg, err := simConfig(*profile, *flavor, "", "", 0, nil)
	if err != nil {
		return err
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	d := &demo{out: stdout, tally: &tally{}}
	return d.run(ctx, simCfg, *listen, *adminListen, *logLevel, *load, *streams, stderr)
}

// demo is one run of slogate demo.
type demo struct {
	out   io.Writer
	tally *tally
}

func (d *demo) run(ctx context.Context, simCfg enginesim.Config, listen, adminListen, logLevel string, load bool, streams int, stderr io.Writer) error {
	sim, err := enginesim.NewServer(simCfg)
	if err != nil {
		return err
	}
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	simSrv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() { _ = sim.Run(bg) })
	wg.Go(func() { _ = simSrv.Serve(simLn) })
	defer simSrv.Close()

	cfg, err := demoSidecarSettings(simLn.Addr().String(), logLevel)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.LogLevel, "text")
	if err != nil {
		return err
	}
	sc, err := newSidecar(cfg, log, d.tally)
	if err != nil {
		return err
	}
	data, admin, err := listenPair(listen, adminListen)
	if err != nil {
		return err
	}
	d.banner(simCfg, data.Addr().String(), admin.Addr().String(), simLn.Addr().String())
	if load {
		sc.scraper.Scrape(ctx) // learn the served models before the traffic starts
		base := "http://" + data.Addr().String()
		for i := range streams {
			wg.Go(func() { syntheticClient(bg, base, uint64(i)) })
		}
		wg.Go(func() { d.report(bg, 5*time.Second) })
	}
	err = sc.run(ctx, data, admin)
	stop()
	fmt.Fprintf(d.out, "\n%s\n", d.tally.summary("total"))
	return err
}

// demoSidecarSettings are serve's defaults with the simulator as upstream.
func demoSidecarSettings(upstream, logLevel string) (serveSettings, error) {
	var cfg serveSettings
	fs := flag.NewFlagSet("demo-sidecar", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	err := loadSettings(fs, &cfg, nil, []string{"--upstream", "http://" + upstream, "--log-level", logLevel, "--drain-timeout", "5s"})
	return cfg, err
}

func listenPair(a, b string) (net.Listener, net.Listener, error) {
	la, err := net.Listen("tcp", a)
	if err != nil {
		return nil, nil, err
	}
	lb, err := net.Listen("tcp", b)
	if err != nil {
		la.Close()
		return nil, nil, err
	}
	return la, lb, nil
}

func (d *demo) banner(sim enginesim.Config, data, admin, engine string) {
	fmt.Fprintf(d.out, `slogate demo: a simulated engine (profile %s, %s metrics) with slogate in front.
  OpenAI API through slogate   http://%s/v1
  slogate metrics              http://%s/metrics
  slogate readiness            http://%s/readyz
  the engine, directly         http://%s
Try:
  curl -sN http://%s/v1/completions -d '{"prompt":"hello","max_tokens":16,"stream":true}'
  curl -s http://%s/metrics | grep slogate_time_to_first_token
`, sim.Profile.Name, sim.Flavor, data, admin, admin, engine, data, admin)
}

// report prints what slogate measured every interval until ctx is done.
func (d *demo) report(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintln(d.out, d.tally.summary("last "+every.String()))
			d.tally.reset()
		}
	}
}

// syntheticClient streams completions of varied sizes through slogate until ctx ends.
func syntheticClient(ctx context.Context, base string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5106a7e))
	words := strings.Fields("the engine serves tokens while the proxy measures each one and exports the result")
	for ctx.Err() == nil {
		var prompt strings.Builder
		for range 20 + rng.IntN(400) {
			prompt.WriteString(words[rng.IntN(len(words))] + " ")
		}
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true}`, prompt.String(), 16+rng.IntN(240))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
		if err != nil {
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(rng.IntN(500)) * time.Millisecond):
		}
	}
}

// tally keeps what slogate measured, for the demo's summaries. Safe for concurrent use.
type tally struct {
	mu         sync.Mutex
	ok, failed int
	tokens     int
	ttft, tpot []time.Duration
	allOK      int
}

// Observe implements proxy.Observer.
func (t *tally) Observe(_ wire.Request, res measure.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if res.Outcome != measure.OK {
		t.failed++
		return
	}
	t.ok++
	t.allOK++
	t.tokens += res.OutputTokens
	if res.Stream {
		t.ttft = append(t.ttft, res.TTFT)
		if res.TPOT > 0 {
			t.tpot = append(t.tpot, res.TPOT)
		}
	}
}

func (t *tally) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ok, t.failed, t.tokens, t.ttft, t.tpot = 0, 0, 0, nil, nil
}

func (t *tally) summary(span string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if span == "total" {
		return fmt.Sprintf("slogate measured %d successful requests", t.allOK)
	}
	return fmt.Sprintf("%-9s %4d ok %3d failed  %6d tokens  TTFT p50 %s p95 %s  TPOT p50 %s",
		span, t.ok, t.failed, t.tokens, ms(pct(t.ttft, 50)), ms(pct(t.ttft, 95)), ms(pct(t.tpot, 50)))
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
