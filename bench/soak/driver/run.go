package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/slogate/slogate/bench/soak"
)

// run is one soak: the load, the samples taken while it ran, and the checks.
type run struct {
	cfg     soak.Config
	metrics string         // slogate's /metrics URL
	watched map[string]int // processes that must stay alive, by name
	every   time.Duration
	settle  time.Duration

	tally   soak.Tally
	samples []soak.Sample
	failed  []string // the checks that failed
}

// Slack of the return to the level before the load: a scrape of the engine in flight
// at the instant of a sample holds a goroutine and (on a fresh connection) a file.
const (
	settleGoroutines = 3
	settleFDs        = 2
)

// execute runs the soak and reports whether every check passed.
func (r *run) execute(ctx context.Context) bool {
	before, err := scrape(ctx, r.metrics)
	if err != nil {
		fmt.Fprintln(os.Stderr, "before the load:", err)
		return false
	}
	fmt.Printf("before the load: goroutines=%.0f fds=%.0f heap_inuse=%s rss=%s\n", before.goroutines, before.fds, mib(before.heapInuse), mib(before.rss))
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- soak.Run(ctx, r.cfg, &r.tally) }()
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for loading := true; loading; {
		select {
		case err := <-done:
			loading = false
			if err != nil {
				r.fail("the load was interrupted: %v", err)
			}
		case <-tick.C:
			r.sample(ctx, time.Since(start))
		}
	}
	fmt.Printf("load ended after %s\n", time.Since(start).Round(time.Second))
	r.settleDown(ctx, before)
	after, err := scrape(ctx, r.metrics)
	if err != nil {
		r.fail("the last scrape failed: %v", err)
	}
	r.report(after)
	return len(r.failed) == 0
}

// sample scrapes slogate once, records the sample and prints it on one line.
func (r *run) sample(ctx context.Context, at time.Duration) {
	r.checkAlive()
	m, err := scrape(ctx, r.metrics)
	if err != nil {
		fmt.Printf("t=%s scrape failed: %v\n", at.Round(time.Second), err)
		return
	}
	// Samples of the drain after the load (requests in flight finishing) are printed,
	// not judged: the verdict is on the load's steady state.
	phase := "draining"
	if at < r.cfg.Duration+time.Second { // the load began just after start
		r.samples = append(r.samples, soak.Sample{At: at, Goroutines: m.goroutines, FDs: m.fds, Heap: m.heapInuse, RSS: m.rss, Requests: m.requests})
		phase = "off"
		if soak.FaultPhase(r.cfg.FaultCycle, at) {
			phase = "on"
		}
	}
	t := &r.tally
	counted, _ := t.Counted()
	fmt.Printf("t=%-6s goroutines=%.0f fds=%.0f heap_inuse=%s heap_goal=%s rss=%s slogate_requests=%.0f | clients: counted=%d ok=%d cancelled=%d 429=%d failures=%d faults=%s\n",
		at.Round(time.Second), m.goroutines, m.fds, mib(m.heapInuse), mib(m.heapGoal), mib(m.rss), m.requests,
		counted, t.Outcomes(soak.OK), t.Outcomes(soak.Cancelled), t.Outcomes(soak.Rejected), t.Failures(), phase)
}

// checkAlive fails the run for every watched process that is gone.
func (r *run) checkAlive() {
	for name, pid := range r.watched {
		if !alive(pid) {
			r.fail("%s (pid %d) died", name, pid)
			delete(r.watched, name)
		}
	}
}

// settleDown waits up to r.settle for slogate's goroutines and open fds to return to
// their level before the load.
func (r *run) settleDown(ctx context.Context, before reading) {
	start := time.Now()
	var last reading
	for time.Since(start) < r.settle {
		m, err := scrape(ctx, r.metrics)
		if err == nil {
			last = m
			if m.goroutines <= before.goroutines+settleGoroutines && m.fds <= before.fds+settleFDs {
				fmt.Printf("after the load: goroutines=%.0f fds=%.0f heap_inuse=%s rss=%s, back to their level before it (%.0f, %.0f) in %s\n",
					m.goroutines, m.fds, mib(m.heapInuse), mib(m.rss), before.goroutines, before.fds, time.Since(start).Round(time.Second))
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	r.fail("%s after the load, slogate still has %.0f goroutines and %.0f open fds (before it: %.0f and %.0f)",
		r.settle, last.goroutines, last.fds, before.goroutines, before.fds)
}

func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Println("FAIL:", msg)
	r.failed = append(r.failed, msg)
}

// report prints the tables and the checks on slogate's counts.
func (r *run) report(after reading) {
	r.checkAlive()
	fmt.Printf("\n### Samples of slogate (every %s)\n\n", r.every)
	soak.WriteSamples(os.Stdout, r.samples, 1)
	fmt.Printf("\n### Verdict\n\n")
	v := soak.Judge(r.samples, soak.DefaultRule)
	v.WriteMarkdown(os.Stdout)
	if !v.Flat {
		r.fail("the samples are not flat")
	}
	t := &r.tally
	fmt.Printf("\n### Outcomes, as the clients saw them\n\n")
	t.WriteMarkdown(os.Stdout)
	fmt.Printf("\n%d requests asked the engine for a fault.\n", t.Faults())
	fmt.Printf("\n### slogate_requests_total\n\n")
	writeCounts(after.byOutcome, "outcome")
	fmt.Println()
	writeCounts(after.byCode, "code")
	fmt.Printf("\n### Checks\n\n")
	counted, unread := t.Counted()
	fmt.Printf("- slogate counted %.0f inference requests; its handler certainly read %d (%d of them cancelled before their status came), %d more failed before any sign of it.\n",
		after.requests, counted, unread, t.Uncertain())
	byCode := make(map[int]float64)
	for c, n := range after.byCode {
		var code int
		if _, err := fmt.Sscan(c, &code); err != nil {
			r.fail("slogate_requests_total has code %q", c)
		}
		byCode[code] += n
	}
	for _, p := range t.Check(byCode) {
		r.fail("%s", p)
	}
	if n := t.Outcomes(soak.Unexplained5xx); n > 0 {
		r.fail("%d requests that asked for no fault got a 5xx", n)
	}
	if n := t.Outcomes(soak.Broken); n > 0 {
		r.fail("%d answers were cut short or malformed without a fault", n)
	}
	if n := t.Outcomes(soak.NoAnswer); n > 0 {
		r.fail("%d requests got no answer (or no end within the grace period)", n)
	}
	if len(r.failed) == 0 {
		fmt.Println("- every check passed: the samples are flat, no 5xx but the engine's, no broken answer, the counts add up, the processes lived, and the sidecar returned to its level before the load.")
		return
	}
	fmt.Println("- failed:")
	for _, f := range r.failed {
		fmt.Printf("  - %s\n", f)
	}
}

// writeCounts prints counts by label value as a one-row Markdown table.
func writeCounts(m map[string]float64, name string) {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var head, sep, row strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&head, " %s |", k)
		sep.WriteString("---:|")
		fmt.Fprintf(&row, " %.0f |", m[k])
	}
	fmt.Printf("| %s |%s\n|---|%s\n| requests |%s\n", name, head.String(), sep.String(), row.String())
}

func mib(x float64) string {
	if x < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1fMiB", x/(1<<20))
}
