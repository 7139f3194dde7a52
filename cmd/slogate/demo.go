package main

import (
	"context"
	"io"

	"github.com/slogate/slogate/demo"
)

func init() {
	commands["demo"] = command{summary: "run the sidecar in front of the built-in engine simulator", run: runDemo,
		settings: func() any { return new(demo.Config) }}
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
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg demo.Config
	if err := loadSettings("demo", demoAbout, &cfg, args, stderr); err != nil {
		return err
	}
	return demo.Run(ctx, cfg, stdout, stderr)
}
