// Command driver runs bench/soak.sh's load (package soak) at a running `slogate serve`,
// samples the sidecar's admin /metrics while it runs, and prints one line per sample,
// then the samples as a table, the verdict on their flatness, the outcomes of every
// request, and slogate's own count of them. It exits 1 when the samples are not flat,
// slogate answered a 5xx the engine did not cause (or broke an answer, or gave none),
// its request counter disagrees with the clients, a watched process died, or the
// sidecar's goroutines and open files did not return to their level before the load.
//
//	driver -url http://127.0.0.1:18920 -admin http://127.0.0.1:18921 -model sim-tiny \
//	       -clients 1000 -duration 10m -pids slogate=1234,sim=1233
//	driver -tiers -clients 1000   # print the tiers file for 1,000 clients
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/slogate/slogate/bench/soak"
)

func main() {
	var cfg soak.Config
	admin := flag.String("admin", "http://127.0.0.1:18921", "slogate's admin listener (its /metrics)")
	every := flag.Duration("every", 10*time.Second, "time between samples")
	settle := flag.Duration("settle", 2*time.Minute, "after the load, how long the sidecar's goroutines and open fds may take to return to their level before it (its idle upstream connections close after 90s)")
	pids := flag.String("pids", "", "processes that must stay alive, as name=pid,name=pid")
	tiers := flag.Bool("tiers", false, "print the tiers file for -clients and exit")
	flag.StringVar(&cfg.URL, "url", "http://127.0.0.1:18920", "slogate's data listener")
	flag.StringVar(&cfg.Model, "model", "sim-tiny", "the engine's served model")
	flag.IntVar(&cfg.Clients, "clients", 1000, "concurrent clients")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long clients send requests")
	flag.DurationVar(&cfg.Grace, "grace", 30*time.Second, "how long requests in flight at the end may take")
	flag.DurationVar(&cfg.Think, "think", 2*time.Second, "longest pause of a client between requests")
	flag.IntVar(&cfg.MaxTokens, "max-tokens", 128, "longest stream, in output tokens")
	flag.IntVar(&cfg.WholeTokens, "whole-tokens", 32, "longest non-streaming answer, in output tokens")
	flag.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", 64<<10, "slogate's --max-body-bytes (oversized requests send 4 KiB more)")
	flag.DurationVar(&cfg.FaultCycle, "fault-cycle", time.Minute, "faults are on in the third quarter of every cycle (0: never)")
	flag.Float64Var(&cfg.FaultShare, "fault-share", 0.25, "share of the requests of a fault phase that ask the engine for a fault")
	flag.DurationVar(&cfg.SlowHeaders, "slow-headers", 0, "delay of the slow-headers fault, more than slogate's --upstream-timeout (0: none)")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the clients' choices")
	flag.Parse()
	if *tiers {
		fmt.Print(soak.Tiers(cfg.Clients))
		return
	}
	watched, err := parsePIDs(*pids)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &run{cfg: cfg, metrics: *admin + "/metrics", watched: watched, every: *every, settle: *settle}
	if !r.execute(ctx) {
		os.Exit(1)
	}
}

// parsePIDs parses name=pid,name=pid.
func parsePIDs(s string) (map[string]int, error) {
	out := make(map[string]int)
	for kv := range strings.SplitSeq(s, ",") {
		if kv == "" {
			continue
		}
		name, v, ok := strings.Cut(kv, "=")
		var pid int
		if _, err := fmt.Sscan(v, &pid); !ok || err != nil || pid <= 0 {
			return nil, fmt.Errorf("-pids: %q is not name=pid", kv)
		}
		out[name] = pid
	}
	return out, nil
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
