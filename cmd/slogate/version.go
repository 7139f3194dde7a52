package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/slogate/slogate/settings"
	"github.com/slogate/slogate/sidecar"
)

func init() {
	commands["version"] = command{summary: "print the version and build information", run: runVersion}
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := settings.Parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "slogate %s (%s, %s/%s)\n", sidecar.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
