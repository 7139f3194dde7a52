package main

import (
	"context"
	"io"

	"github.com/slogate/slogate/sidecar"
)

func init() {
	commands["serve"] = command{summary: "run the sidecar in front of an inference engine", run: runServe,
		settings: func() any { return new(sidecar.Config) }}
}

const serveAbout = `slogate serve runs the sidecar: clients talk to --listen, slogate forwards to
--upstream and measures every inference request; metrics, health, the status page and
the admin API are on --admin-listen.

Usage: slogate serve [flags]
`

func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	var cfg sidecar.Config
	if err := loadSettings("serve", serveAbout, &cfg, args, stderr); err != nil {
		return err
	}
	log, err := sidecar.NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	setMemoryLimit(log)
	sc, err := sidecar.New(cfg, sidecar.Options{Logger: log})
	if err != nil {
		return err
	}
	return sc.Run(ctx)
}
