package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/settings"
)

func init() {
	commands["compare"] = command{summary: "compare probe reports of one workload, cell by cell", run: runCompare,
		settings: func() any { return new(compareSettings) }}
}

// compareSettings is the settings of slogate compare; its operands are the reports.
type compareSettings struct {
	Baseline string `flag:"baseline" env:"SLOGATE_BASELINE" envDefault:"1" help:"the run the changes are against: its label (or name), or its position among the reports, from 1"`
	Out      string `flag:"out" env:"SLOGATE_OUT" envDefault:"comparison" help:"directory for comparison.json, comparison.md and comparison.html"`
}

const compareAbout = `slogate compare sets probe reports of one workload side by side, cell by cell: per
headline figure every run's value, the best marked, and each run's change from the
baseline, judged against the noise of the rounds. It writes DIR/comparison.{json,md,html}.

Usage: slogate compare [--baseline RUN] [--out DIR] REPORT REPORT... (a report.json or its directory)
`

func runCompare(_ context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg compareSettings
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), compareAbout) }
	paths, err := settings.LoadOperands(fs, &cfg, os.Environ(), args)
	if err != nil {
		return err
	}
	if len(paths) < 2 {
		fmt.Fprintf(stderr, "slogate compare: want at least two reports, got %d\n", len(paths))
		return errUsage
	}
	c, err := report.ReadComparison(paths...)
	if err != nil {
		return err
	}
	if c.Baseline, err = c.FindRun(cfg.Baseline); err != nil {
		return err
	}
	if err := report.WriteComparisonFiles(cfg.Out, c); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(cfg.Out, "comparison.{json,md,html}"))
	for _, s := range c.Summary() {
		fmt.Fprintln(stdout, s)
	}
	return nil
}
