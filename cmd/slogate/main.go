// Command slogate is a sidecar for LLM inference engines: it measures every request,
// exports the measurements to Prometheus, controls admission by SLO, and runs synthetic
// probes. This file only dispatches subcommands; each subcommand lives in its own file
// and wires the packages together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/slogate/slogate/settings"
)

// command is one subcommand of slogate.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// settings returns a new value of the command's settings schema, whose table its
	// help and docs/operations.md show; nil for a command without settings.
	settings func() any
}

// commands is filled by the files that implement each subcommand.
var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one subcommand and returns the process exit code: 0 on success, 2 on a
// usage error, 1 on any other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return exitCode(c.run(ctx, []string{"-h"}, stdout, stderr), stderr)
			}
		}
		usage(stdout)
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "slogate: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	return exitCode(c.run(ctx, args[1:], stdout, stderr), stderr)
}

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "slogate: %v\n", err)
		return 1
	}
}

// errUsage marks an error already reported by a flag set; the exit code is 2.
var errUsage = settings.ErrUsage

// loadSettings reads the settings of the command name into cfg, a pointer to its schema,
// from the environment and args; its usage text is about followed by the settings table.
func loadSettings(name, about string, cfg any, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), about) }
	return settings.Load(fs, cfg, os.Environ(), args)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "slogate: an SLO gate and meter for LLM inference engines (vLLM, SGLang).")
	fmt.Fprintln(w, "\nUsage: slogate <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n", "help", "show help for a command: slogate help <command>")
}
