package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/exporter"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/settings"
	"github.com/slogate/slogate/sidecar"
	"github.com/slogate/slogate/synth"
)

func init() {
	commands["probe"] = command{summary: "run a benchmark workload against an engine and write reports", run: runProbe,
		settings: func() any { return new(probeSettings) }}
}

// probeSettings is the settings of slogate probe. The engine and where to push are the
// groups slogate serve has too.
type probeSettings struct {
	sidecar.Endpoint        // --upstream, --upstream-api-key
	Workload         string `flag:"workload" env:"SLOGATE_WORKLOAD" envDefault:"context-matrix" help:"preset name (context-matrix, shapes, rate-scan) or a YAML file"`
	Quick            bool   `flag:"quick" env:"SLOGATE_QUICK" envDefault:"false" help:"shorten every round so a whole preset runs in about a minute"`
	Out              string `flag:"out" env:"SLOGATE_OUT" envDefault:"probe-report" help:"directory for report.json, report.md and report.html"`
	Model            string `flag:"model" env:"SLOGATE_MODEL" envDefault:"" help:"served model name (default: the first one /v1/models lists)"`
	Gate             bool   `flag:"gate" env:"SLOGATE_GATE" envDefault:"true" help:"run the functional gate first, and stop if it fails"`
	Label            string `flag:"label" env:"SLOGATE_LABEL" envDefault:"" help:"names the run in slogate compare (the recipe it tries: \"vllm tp2 fp8\"); empty: its engine, version, model and start"`
	sidecar.Push            // --push-url, --push-labels: pushed once, after the run
}

// endpointAliases are the names probe and calibrate had for the engine's settings.
var endpointAliases = []settings.Alias{{Old: "target", New: "upstream"}, {Old: "api-key", New: "upstream-api-key"}}

func (probeSettings) DeprecatedFlags() []settings.Alias { return endpointAliases }

const probeAbout = `slogate probe runs a benchmark workload against an engine (or a slogate sidecar). A
functional gate comes first (model id, a sum, a two-turn memory check, streaming, a tool
call); then each cell is measured in rounds, after a warm-up where it is a closed loop. A
request succeeds only with HTTP 200, no error in the stream, non-empty output, the end
marker, valid usage and the exact output length; a cell's figures are medians over the
rounds without a failure, and its state says what became of it (valid, looped,
over_capacity, rej, n/c, failed, skipped). It writes DIR/report.json, DIR/report.md and
DIR/report.html.

Workloads: context-matrix, shapes, rate-scan (the published benchmarks they follow are in
docs/simulator.md, "Published figures"), or a YAML file.

Usage: slogate probe --upstream URL --workload NAME [--quick] --out DIR [--push-url URL]
`

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg probeSettings
	if err := loadSettings("probe", probeAbout, &cfg, args, stderr); err != nil {
		return err
	}
	w, err := synth.FindWorkload(cfg.Workload)
	if err != nil {
		return err
	}
	if cfg.Quick {
		w = w.Quick()
	}
	t := cfg.Target()
	t.Model = cfg.Model
	progress, start := newProgress(stderr, w), time.Now()
	rep, runErr := synth.Run(ctx, t, w, synth.Options{Gate: cfg.Gate, Progress: progress.cell})
	progress.end()
	rep.Label = cfg.Label
	if err := report.WriteFiles(cfg.Out, rep); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(cfg.Out, "report.{json,md,html}"))
	if cfg.PushURL != "" {
		if err := pushProbe(ctx, cfg.PushURL, cfg.PushLabels, w.Name, start, rep, runErr); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintln(stdout, "pushed the slogate_probe_* metrics")
	}
	return runErr
}

// pushProbe pushes the slogate_probe_* metrics of one run once: its cells and gate
// checks, when it started and ended, and whether it succeeded.
func pushProbe(ctx context.Context, url, labels, workload string, start time.Time, rep synth.Report, runErr error) error {
	snap := exporter.ProbeSnapshot{Workload: workload, Runs: 1, LastStart: start, LastEnd: time.Now(), LastOK: runErr == nil}
	sidecar.AddReport(&snap, rep)
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.NewProbeCollector(probeSnapshot(snap)))
	return exporter.PushOnce(ctx, url, reg, labels, nil)
}

// probeSnapshot is an exporter.ProbeSource that always returns the same snapshot.
type probeSnapshot exporter.ProbeSnapshot

func (s probeSnapshot) Probe() exporter.ProbeSnapshot { return exporter.ProbeSnapshot(s) }

// progress shows cells done and an estimate of the time left: a line rewritten in place
// on a terminal, plain lines otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
}

func newProgress(w io.Writer, wl synth.Workload) *progress {
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	fmt.Fprintf(w, "probe %s (%s)\n", wl.Name, wl.Kind)
	return p
}

func (p *progress) cell(done, total int, c synth.Cell) {
	elapsed := time.Since(p.start)
	eta := time.Duration(float64(elapsed) / float64(done) * float64(total-done)).Round(time.Second)
	what := fmt.Sprintf("%s c=%d", c.Row, c.Concurrency)
	if c.Rate > 0 {
		what = fmt.Sprintf("%s %.2fx (%.2f req/s)", c.Row, c.Multiple, c.Rate)
	}
	line := fmt.Sprintf("[%d/%d] %-24s %-13s %8.0f tok/s   ETA %s", done, total, what, c.State, c.Throughput, eta)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) end() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
