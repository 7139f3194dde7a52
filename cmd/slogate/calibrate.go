package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/settings"
	"github.com/slogate/slogate/sidecar"
	"github.com/slogate/slogate/synth"
)

func init() {
	commands["calibrate"] = command{summary: "measure each tier's knee and write a tiers file from it", run: runCalibrate,
		settings: func() any { return new(calibrateSettings) }}
}

// calibrateSettings is the settings of slogate calibrate. The engine, the SLOs and how a
// calibration measures are the groups slogate serve has too, so that calibrating from
// outside and from inside the sidecar measure alike by default.
type calibrateSettings struct {
	sidecar.Endpoint           // --upstream, --upstream-api-key
	Out                 string `flag:"out" env:"SLOGATE_OUT" envDefault:"tiers.yaml" help:"the tiers file to write"`
	TiersFile           string `flag:"tiers-file" env:"SLOGATE_TIERS_FILE" envDefault:"" help:"tiers to calibrate (their names, input bounds and SLOs); empty: the built-in tiers"`
	Quick               bool   `flag:"quick" env:"SLOGATE_QUICK" envDefault:"false" help:"calibrate in about a minute on a fast engine (the tiny simulator), for trying it out: 4 s rounds instead of --calibrate-round, at most 6 rates per tier, the knee bracketed to 20% instead of 5% (λ* up to 20% under the knee), p95s of 50 requests instead of 100, and a rate some 10% past the knee may pass in a 4 s round"`
	sidecar.SLO                // --slo-ttft, --slo-tpot
	sidecar.Calibration        // --calibrate-round, --calibrate-output
	Report              string `flag:"report" env:"SLOGATE_REPORT" envDefault:"" help:"directory for an HTML and Markdown report of each tier's curve; empty: calibration/ next to --out"`
	Only                string `flag:"only" env:"SLOGATE_ONLY" envDefault:"" help:"calibrate only these tiers (comma-separated names); the others keep their limits"`
}

func (calibrateSettings) DeprecatedFlags() []settings.Alias {
	return append([]settings.Alias{{Old: "output", New: "calibrate-output"}, {Old: "round", New: "calibrate-round"}}, endpointAliases...)
}

const calibrateAbout = `slogate calibrate measures, for each admission tier, the highest arrival rate the
engine sustains inside the tier's SLO (the knee, where throughput stops growing while
TTFT explodes), derives the tier's limits from it, and writes a tiers file that
slogate serve --tiers-file accepts as it is, with every measured point as provenance.
It takes minutes: each tier is a closed-loop reference run and several open-loop rounds;
--quick takes about a minute on a fast engine, and gives up precision for it.

Usage: slogate calibrate --upstream URL [--quick] --out FILE
`

func runCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg calibrateSettings
	if err := loadSettings("calibrate", calibrateAbout, &cfg, args, stderr); err != nil {
		return err
	}
	tiers, err := baseTiers(cfg.TiersFile)
	if err != nil {
		return err
	}
	t := cfg.Target()
	plan, engineName, err := calibrationPlan(ctx, t, tiers, cfg.Objective(), cfg.CalibrateOutput, cfg.CalibrateRound)
	if err != nil {
		return err
	}
	if cfg.Quick {
		plan = plan.Quick()
	}
	if plan, err = plan.Only(cfg.Only); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(stderr, "calibrating %d tiers against %s (%s): up to about %s, longer for tiers that sustain few requests a second\nmeasuring with %s\n",
		len(plan.Tiers), t.Redacted(), engineName, plan.Estimate().Round(time.Second), plan.Precision())
	res, err := calibrate.Run(ctx, t, plan, engineName, func(tier string, p calibrate.Point, done, total int) {
		fmt.Fprintf(stderr, "[%d/~%d %s] %-8s %6.3f req/s offered: %6.3f completed/s, p95 TTFT %s, p95 TPOT %s\n",
			done, total, time.Since(start).Round(time.Second), tier, p.Offered, p.Throughput, p.TTFTp95.Round(time.Millisecond), p.TPOTp95.Round(time.Millisecond))
	})
	if err != nil {
		return err
	}
	if err := writeCalibration(cfg.Out, cfg.Report, tiers, res); err != nil {
		return err
	}
	printCalibration(stdout, res, cfg.Out)
	return nil
}

// baseTiers reads the tiers to calibrate, or returns the built-in ones.
func baseTiers(path string) (admission.Config, error) {
	if path == "" {
		return admission.DefaultConfig(), nil
	}
	return admission.LoadConfig(path)
}

// calibrationPlan plans the tiers of cfg that fit the engine's context, and reads the
// engine's kind for the provenance.
func calibrationPlan(ctx context.Context, t *synth.Target, cfg admission.Config, slo measure.SLO, output int, round time.Duration) (calibrate.Plan, string, error) {
	plan, err := calibrate.PlanFor(ctx, t, cfg, slo, output)
	if err != nil {
		return calibrate.Plan{}, "", err
	}
	plan.Round = round
	snap := engine.NewScraper(engine.ScraperConfig{BaseURL: t.BaseURL, APIKey: t.APIKey}).Scrape(ctx)
	return plan, snap.Kind.String(), nil
}

// writeCalibration writes the tiers file and, per tier, a report of its curve.
func writeCalibration(out, reportDir string, base admission.Config, res calibrate.Result) error {
	cfg, err := res.Config(base)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := calibrate.WriteConfig(f, cfg, res); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if reportDir == "" {
		reportDir = filepath.Join(filepath.Dir(out), "calibration")
	}
	for _, rep := range res.Reports() {
		if err := report.WriteFiles(filepath.Join(reportDir, rep.Workload.Name), rep); err != nil {
			return err
		}
	}
	return nil
}

// printCalibration prints a summary: each tier's knee and limits.
func printCalibration(w io.Writer, res calibrate.Result, out string) {
	fmt.Fprintf(w, "\n%-8s %10s %10s %8s %9s %6s %10s %10s  %s\n", "tier", "shape", "knee", "rate", "in flight", "queue", "wait", "prefill", "rule")
	for _, t := range res.Tiers {
		shape := fmt.Sprintf("%d/%d", t.Shape.Input, t.Shape.Output)
		if t.Limits == nil {
			fmt.Fprintf(w, "%-8s %10s %10s  not calibrated: %s\n", t.Tier, shape, "-", t.Err)
			continue
		}
		l := t.Limits
		prefill := "-" // the prompt tokens the tier may have in prefill
		if l.MaxPrefillTokens > 0 {
			prefill = fmt.Sprint(l.MaxPrefillTokens)
		}
		fmt.Fprintf(w, "%-8s %10s %7.3f/s %6.3f/s %9d %6d %10s %10s  %s\n", t.Tier, shape, t.KneeRate, l.Rate, l.MaxInFlight, l.MaxQueue, time.Duration(l.MaxQueueWait), prefill, t.Rule)
	}
	for _, t := range res.Tiers {
		if t.Limits != nil && t.Limits.MaxPrefillTokens > 0 {
			fmt.Fprintf(w, "  %s: the engine prefills its prompts at %.0f tokens/s; max_prefill_tokens %d is 0.9 × its TTFT SLO %s of them\n", t.Tier, t.Prefill, t.Limits.MaxPrefillTokens, t.SLO.TTFT)
		}
	}
	if f := res.EngineCaps(); f.VLLM() != nil {
		fmt.Fprintf(w, "\nengine flags, a second line of defence behind slogate (sized from the same knees):\n")
		fmt.Fprintf(w, "  vllm serve ... %s\n  python -m sglang.launch_server ... %s\n", strings.Join(f.VLLM(), " "), strings.Join(f.SGLang(), " "))
		for i, flag := range []string{"--max-num-queued-reqs", "--max-num-queued-tokens", "--max-queued-requests"} {
			fmt.Fprintf(w, "  %s: %s\n", flag, f.Basis[i])
		}
	}
	if n, why := res.LongPrefillThreshold(); n > 0 {
		fmt.Fprintf(w, "\nvLLM scheduling, so that short prompts do not wait behind long prefills:\n  vllm serve ... --long-prefill-token-threshold %d\n  %s\n", n, why)
	}
	fmt.Fprintf(w, "\nwrote %s; start slogate serve --tiers-file %s\n", out, out)
}
