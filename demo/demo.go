package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/gpu"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/proxy"
	"github.com/slogate/slogate/schedule"
	"github.com/slogate/slogate/sidecar"
	"github.com/slogate/slogate/synth"
	"github.com/slogate/slogate/tenant"
)

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
	Concurrency: []int{1, 4}, Duration: measure.Duration(2 * time.Second), Rounds: 1,
}

// Config is the demo's settings. Each field carries its flag name, environment variable,
// default and meaning, as sidecar.Config's do; package settings reads them through the
// tags. The simulator's profile and flavour are the group slogate sim has too.
type Config struct {
	Listen           string        `flag:"listen" env:"SLOGATE_LISTEN" envDefault:"127.0.0.1:8080" help:"address clients connect to"`
	AdminListen      string        `flag:"admin-listen" env:"SLOGATE_ADMIN_LISTEN" envDefault:"127.0.0.1:9090" help:"address of /metrics, /healthz, /readyz and the status page"`
	enginesim.Choice               // --profile, --flavor
	Load             bool          `flag:"load" env:"SLOGATE_DEMO_LOAD" envDefault:"false" help:"send light synthetic traffic through slogate"`
	Streams          int           `flag:"streams" env:"SLOGATE_DEMO_STREAMS" envDefault:"4" help:"concurrent synthetic clients with --load"`
	Probe            bool          `flag:"probe" env:"SLOGATE_DEMO_PROBE" envDefault:"true" help:"run a short synthetic probe soon after start and every 5m"`
	ProbeHistoryDir  string        `flag:"probe-history-dir" env:"SLOGATE_PROBE_HISTORY_DIR" envDefault:"" help:"keep the probe runs in this directory (the status page's trends, slogate_probe_regression); empty: a temporary directory, removed when the demo ends"`
	Calibrate        bool          `flag:"calibrate" env:"SLOGATE_DEMO_CALIBRATE" envDefault:"true" help:"calibrate the admission tiers soon after start and every 15m, publishing the limits without applying them"`
	Duration         time.Duration `flag:"duration" env:"SLOGATE_DEMO_DURATION" envDefault:"0s" help:"stop after this long (0: run until interrupted)"`
	LogLevel         string        `flag:"log-level" env:"SLOGATE_LOG_LEVEL" envDefault:"warn" help:"sidecar log level: debug, info (logs every request), warn or error"`
}

// Run runs the demo of cfg until ctx is done or cfg.Duration has passed: a simulated
// engine with the sidecar in front, built by sidecar.New, writing its banner and (with
// Load) a summary every 5 s to stdout and the sidecar's log to stderr.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if cfg.Streams < 1 {
		return fmt.Errorf("--streams %d: want at least 1", cfg.Streams)
	}
	simCfg, err := cfg.Choice.Config()
	if err != nil {
		return err
	}
	demoEngine(&simCfg.Profile)
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	d := &demo{out: stdout, tally: &tally{}}
	return d.run(ctx, simCfg, cfg, stderr)
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

func (d *demo) run(ctx context.Context, simCfg enginesim.Config, o Config, stderr io.Writer) error {
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
	simSrv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: enginesim.KeepAliveTimeout}
	wg.Go(func() { _ = sim.Run(bg) })
	wg.Go(func() { _ = simSrv.Serve(simLn) })
	defer simSrv.Close()

	if o.Probe && o.ProbeHistoryDir == "" {
		if o.ProbeHistoryDir, err = os.MkdirTemp("", "slogate-demo-history-"); err != nil {
			return err
		}
		defer os.RemoveAll(o.ProbeHistoryDir)
	}
	sc, err := d.sidecar(sim, simCfg, simLn.Addr().String(), o, stderr)
	if err != nil {
		return err
	}
	d.banner(simCfg, sc.Addr().String(), sc.AdminAddr().String(), simLn.Addr().String(), o)
	if o.Load {
		sc.Engine().Scrape(ctx) // learn the served models before the traffic starts
		base := "http://" + sc.Addr().String()
		for i := range o.Streams {
			wg.Go(func() { syntheticClient(bg, base, demoTenants[i%len(demoTenants)], uint64(i)) })
		}
		wg.Go(func() { d.report(bg, 5*time.Second) })
	}
	wg.Go(func() { exercise(bg, sc) })
	err = sc.Run(ctx)
	stop()
	fmt.Fprintf(d.out, "\n%s\n", d.tally.summary("total"))
	return err
}

// sidecar builds the demo's sidecar in front of sim at upstream: serve's defaults, on the
// demo's addresses, with the demo's tiers, probe workload and calibration schedule, and
// the simulated GPUs in place of DCGM.
func (d *demo) sidecar(sim *enginesim.Server, simCfg enginesim.Config, upstream string, o Config, stderr io.Writer) (*sidecar.Sidecar, error) {
	cfg := demoSidecarConfig(upstream)
	cfg.Listen, cfg.AdminListen, cfg.LogLevel = o.Listen, o.AdminListen, o.LogLevel
	if o.Calibrate {
		cfg.Calibrate, cfg.CalibrateInterval = true, demoCalibrateInterval
		cfg.CalibrateRound, cfg.CalibrateOutput = demoCalibrateRound, demoCalibrateOutput
	}
	log, err := sidecar.NewLogger(stderr, cfg.LogLevel, "text")
	if err != nil {
		return nil, err
	}
	opts := sidecar.Options{
		Logger: log, Observers: []proxy.Observer{d.tally}, Tiers: new(demoTiers()),
		GPUs: gpu.NewCollector(newSimGPUs(sim, simCfg, demoGPUs), log),
	}
	if o.Probe {
		w := demoProbe
		cfg.ProbeInterval, opts.ProbeWorkload, cfg.ProbeHistoryDir = demoProbeInterval, &w, o.ProbeHistoryDir
	}
	return sidecar.New(cfg, opts)
}

// demoSidecarConfig is serve's defaults with the engine at upstream (host:port) and the
// admin API on, so that the demo's probe and calibration can be triggered.
func demoSidecarConfig(upstream string) sidecar.Config {
	cfg := sidecar.DefaultConfig()
	cfg.Upstream, cfg.DrainTimeout, cfg.EnableAdminAPI = "http://"+upstream, 5*time.Second, true
	return cfg
}

// demoTiers are the built-in tiers with a rate limit on medium that the synthetic
// traffic's long prompts exceed, so that admission has rejections to record (in shadow
// mode, serve's default, it records them and rejects nothing), and a tenants section:
// the synthetic clients name their tenant in X-Tenant (demoTenants), chat has twice the
// others' share, and etl is served as batch with an output budget its clients exceed.
func demoTiers() admission.Config {
	cfg := admission.DefaultConfig()
	for i := range cfg.Tiers {
		if cfg.Tiers[i].Name == "medium" {
			cfg.Tiers[i].Rate, cfg.Tiers[i].Burst = 0.5, 2
		}
	}
	cfg.Tenants = &admission.Tenants{
		Identify: tenant.Rule{Header: "X-Tenant"},
		Named: []admission.TenantConfig{
			{Name: "chat", Weight: 2},
			{Name: "search"},
			{Name: "etl", MaxClass: "batch", Budget: admission.Budget{OutputTokensPerMinute: 3000}},
		},
	}
	return cfg
}

// demoTenants are the tenants the synthetic clients take in turn.
var demoTenants = []string{"chat", "search", "etl"}

// exercise runs the demo's probe once the sidecar is ready, then its calibration (the
// sidecar's arbiter would hold either back while the other runs). Later runs follow
// their schedules.
func exercise(ctx context.Context, sc *sidecar.Sidecar) {
	if !waitUntil(ctx, func() bool { return sc.Ready() == nil }) {
		return
	}
	if p := sc.Prober(); p != nil && !runNow(ctx, p) {
		return
	}
	if c := sc.Calibrator(); c != nil {
		runNow(ctx, c)
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

func (d *demo) banner(sim enginesim.Config, data, admin, engine string, o Config) {
	fmt.Fprintf(d.out, `slogate demo: a simulated engine (profile %s, %s metrics) with slogate in front.
  OpenAI API through slogate   http://%s/v1
  slogate metrics              http://%s/metrics
  slogate readiness            http://%s/readyz
  the engine, directly         http://%s
`, sim.Profile.Name, sim.Flavor, data, admin, admin, engine)
	fmt.Fprintf(d.out, "  slogate status page          http://%s/\n", admin)
	if o.Probe {
		fmt.Fprintf(d.out, "  synthetic probe              soon after start, then every %s: http://%s/probe/report.html\n", demoProbeInterval, admin)
		fmt.Fprintf(d.out, "  probe history                in %s: http://%s/probe/history\n", o.ProbeHistoryDir, admin)
	}
	if o.Calibrate {
		fmt.Fprintf(d.out, "  calibration, report only     soon after start, then every %s: http://%s/calibration/tiers.yaml\n", demoCalibrateInterval, admin)
	}
	fmt.Fprintf(d.out, `  GPU metrics                  SIMULATED from the engine simulator (%d GPU, no DCGM)
Try:
  curl -sN http://%s/v1/completions -d '{"prompt":"hello","max_tokens":16,"stream":true}'
  curl -s http://%s/metrics | grep slogate_time_to_first_token
`, demoGPUs, data, admin)
}
