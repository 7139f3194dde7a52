package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/gpu"
	"github.com/slogate/slogate/schedule"
	"github.com/slogate/slogate/synth"
)

func init() {
	commands["demo"] = command{summary: "run the sidecar in front of the built-in engine simulator", run: runDemo}
}

const demoAbout = `slogate demo runs slogate's main job on one machine: a simulated inference engine
(slogate sim; no GPU, no model) with the sidecar in front of it, in one process. Send
OpenAI-compatible requests to the printed URL and watch /metrics; --load adds light
synthetic traffic, --duration stops it by itself.

So that every dashboard has data, the demo also runs a short synthetic probe soon after
start and every 5 minutes (--probe), calibrates the admission tiers soon after start and
every 15 minutes without applying the limits (--calibrate), and exports SIMULATED GPU
metrics modelled from the simulator. Its engine batches at most 8 sequences, caches
prefixes and decodes speculatively; its medium tier has a rate limit the synthetic
traffic exceeds (in shadow mode, admission records rejections and rejects nothing).

Usage: slogate demo [flags]

Flags:
`

// The demo's schedules and settings: short enough to fill the dashboards within a
// minute of starting on the tiny profile, and to stay light on a laptop afterwards.
const (
	demoProbeInterval     = 5 * time.Minute
	demoCalibrateInterval = 15 * time.Minute
	demoCalibrateRound    = time.Second
	demoCalibrateOutput   = 64
	demoBatch             = 8 // sequences: the tiny profile's knee is then about 100 requests/s
	demoGPUs              = 1 // the simulator models one device
)

// demoProbe is the demo's probe workload: two request shapes the tiny profile serves in
// milliseconds, at one and four streams, two seconds a cell: about ten seconds in all.
var demoProbe = synth.Workload{
	Name: "demo", Kind: synth.Shapes,
	Shapes:      []synth.Shape{{Name: "chat", Input: 256, Output: 64}, {Name: "document", Input: 2048, Output: 128}},
	Concurrency: []int{1, 4}, Duration: synth.Duration(2 * time.Second), Rounds: 1,
}

// demoOptions are the demo's command-line settings.
type demoOptions struct {
	listen, adminListen, logLevel string
	load                          bool
	streams                       int
	probe, calibrate              bool
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o demoOptions
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address clients connect to")
	fs.StringVar(&o.adminListen, "admin-listen", "127.0.0.1:9090", "address of /metrics, /healthz and /readyz")
	profile := fs.String("profile", "tiny", "simulator profile (see slogate sim -h)")
	flavor := fs.String("flavor", "vllm", "engine the simulator impersonates: vllm or sglang")
	fs.BoolVar(&o.load, "load", false, "send light synthetic traffic through slogate")
	fs.IntVar(&o.streams, "streams", 4, "concurrent synthetic clients with --load")
	fs.BoolVar(&o.probe, "probe", true, "run a short synthetic probe soon after start and every "+demoProbeInterval.String())
	fs.BoolVar(&o.calibrate, "calibrate", true, "calibrate the admission tiers soon after start and every "+demoCalibrateInterval.String()+", publishing the limits without applying them")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "sidecar log level (info logs every request)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), demoAbout); fs.PrintDefaults() }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.streams < 1 {
		return fmt.Errorf("--streams %d: want at least 1", o.streams)
	}
	simCfg, err := simConfig(*profile, *flavor, "", "", 0, nil)
	if err != nil {
		return err
	}
	demoEngine(&simCfg.Profile)
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	d := &demo{out: stdout, tally: &tally{}}
	return d.run(ctx, simCfg, o, stderr)
}

// demoEngine turns on what production engines usually run with and the capacity
// dashboard shows: prefix caching, and speculative decoding (two draft tokens, 70%
// accepted) unless the profile models its own. Its batch holds at most demoBatch
// sequences, so that its knee, past which a calibration drives it, lies within what one
// machine's clients can offer without starving the demo itself.
func demoEngine(p *enginesim.Profile) {
	p.PrefixCaching = true
	p.MaxNumSeqs = min(p.MaxNumSeqs, demoBatch)
	if p.Speculation.DraftTokens == 0 {
		p.Speculation = enginesim.Speculation{DraftTokens: 2, AcceptRate: 0.7}
	}
}

// demo is one run of slogate demo.
type demo struct {
	out   io.Writer
	tally *tally
}

func (d *demo) run(ctx context.Context, simCfg enginesim.Config, o demoOptions, stderr io.Writer) error {
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

	sc, err := d.sidecar(sim, simCfg, simLn.Addr().String(), o, stderr)
	if err != nil {
		return err
	}
	data, admin, err := listenPair(o.listen, o.adminListen)
	if err != nil {
		return err
	}
	d.banner(simCfg, data.Addr().String(), admin.Addr().String(), simLn.Addr().String(), o)
	if o.load {
		sc.scraper.Scrape(ctx) // learn the served models before the traffic starts
		base := "http://" + data.Addr().String()
		for i := range o.streams {
			wg.Go(func() { syntheticClient(bg, base, uint64(i)) })
		}
		wg.Go(func() { d.report(bg, 5*time.Second) })
	}
	wg.Go(func() { exercise(bg, sc) })
	err = sc.run(ctx, data, admin)
	stop()
	fmt.Fprintf(d.out, "\n%s\n", d.tally.summary("total"))
	return err
}

// sidecar wires the demo's sidecar in front of sim: serve's defaults with the simulator
// as upstream, the demo's tiers, probe workload and calibration settings, and the
// simulated GPUs in place of DCGM.
func (d *demo) sidecar(sim *enginesim.Server, simCfg enginesim.Config, upstream string, o demoOptions, stderr io.Writer) (*sidecar, error) {
	extra := []string{"--dcgm", gpu.DCGMOff}
	if o.probe {
		// Any preset wires the prober; the demo's own workload replaces it below.
		extra = append(extra, "--probe-workload", "shapes", "--probe-interval", demoProbeInterval.String())
	}
	if o.calibrate {
		extra = append(extra, "--calibrate", "--calibrate-interval", demoCalibrateInterval.String(),
			"--calibrate-round", demoCalibrateRound.String(), "--calibrate-output", fmt.Sprint(demoCalibrateOutput))
	}
	cfg, err := demoSidecarSettings(upstream, o.logLevel, extra...)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(stderr, cfg.LogLevel, "text")
	if err != nil {
		return nil, err
	}
	sc, err := newSidecar(cfg, log, d.tally)
	if err != nil {
		return nil, err
	}
	if err := sc.admission.Reload(demoTiers()); err != nil {
		return nil, err
	}
	if sc.probeWorkload != nil {
		w := demoProbe
		sc.probeWorkload = &w
	}
	sc.reg.MustRegister(gpu.NewCollector(newSimGPUs(sim, simCfg, demoGPUs), log))
	return sc, nil
}

// demoSidecarSettings are serve's defaults with the simulator as upstream, and extra
// serve flags.
func demoSidecarSettings(upstream, logLevel string, extra ...string) (serveSettings, error) {
	var cfg serveSettings
	fs := flag.NewFlagSet("demo-sidecar", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	args := append([]string{"--upstream", "http://" + upstream, "--log-level", logLevel, "--drain-timeout", "5s", "--enable-admin-api"}, extra...)
	err := loadSettings(fs, &cfg, nil, args)
	return cfg, err
}

// demoTiers are the built-in tiers with a rate limit on medium that the synthetic
// traffic's long prompts exceed, so that admission has rejections to record (in shadow
// mode, serve's default, it records them and rejects nothing).
func demoTiers() admission.Config {
	cfg := admission.DefaultConfig()
	for i := range cfg.Tiers {
		if cfg.Tiers[i].Name == "medium" {
			cfg.Tiers[i].Rate, cfg.Tiers[i].Burst = 0.5, 2
		}
	}
	return cfg
}

// exercise runs the demo's probe once the sidecar is ready, then its calibration: each
// holds back while the other runs. Later runs follow their schedules.
func exercise(ctx context.Context, sc *sidecar) {
	if !waitUntil(ctx, func() bool { return sc.ready() == nil && (sc.probeWorkload == nil || sc.prober.Load() != nil) }) {
		return
	}
	if p := sc.prober.Load(); p != nil && !runNow(ctx, p) {
		return
	}
	if sc.calibration != nil {
		runNow(ctx, sc.calibration)
	}
}

// scheduled is a schedule the demo runs soon after start: the prober's or the
// calibration's.
type scheduled interface {
	Trigger() bool
	Status() schedule.Status
}

// demoRetry is the wait before the demo asks again for a run live traffic held back (a
// schedule's own retry waits a minute).
const demoRetry = 5 * time.Second

// runNow runs s once and waits for it to end, asking again while live traffic holds it
// back; false when ctx ends first.
func runNow(ctx context.Context, s scheduled) bool {
	for {
		asked, held := time.Now(), s.Status().Held
		s.Trigger()
		if !waitUntil(ctx, func() bool { st := s.Status(); return !st.Running && st.LastEnd.After(asked) }) {
			return false
		}
		if s.Status().Held == held {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(demoRetry):
		}
	}
}

// waitUntil polls cond until it holds (true) or ctx ends (false).
func waitUntil(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
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

func (d *demo) banner(sim enginesim.Config, data, admin, engine string, o demoOptions) {
	fmt.Fprintf(d.out, `slogate demo: a simulated engine (profile %s, %s metrics) with slogate in front.
  OpenAI API through slogate   http://%s/v1
  slogate metrics              http://%s/metrics
  slogate readiness            http://%s/readyz
  the engine, directly         http://%s
`, sim.Profile.Name, sim.Flavor, data, admin, admin, engine)
	fmt.Fprintf(d.out, "  slogate status page          http://%s/\n", admin)
	if o.probe {
		fmt.Fprintf(d.out, "  synthetic probe              soon after start, then every %s: http://%s/probe/report.html\n", demoProbeInterval, admin)
	}
	if o.calibrate {
		fmt.Fprintf(d.out, "  calibration, report only     soon after start, then every %s: http://%s/calibration/tiers.yaml\n", demoCalibrateInterval, admin)
	}
	fmt.Fprintf(d.out, `  GPU metrics                  SIMULATED from the engine simulator (%d GPU, no DCGM)
Try:
  curl -sN http://%s/v1/completions -d '{"prompt":"hello","max_tokens":16,"stream":true}'
  curl -s http://%s/metrics | grep slogate_time_to_first_token
`, demoGPUs, data, admin)
}
