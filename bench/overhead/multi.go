package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// multiRun is the multi-target mode (-targets): every repetition drives each target for
// one round, in the order ABC in even repetitions and CBA in odd ones. The first target
// is the baseline (a direct connection); for the others the TTFT added over it in the
// same repetition is reported, and the CPU time and memory of their processes.
type multiRun struct {
	load    load
	targets []target
	reps    int
	warmup  time.Duration
	send    sender
	out     io.Writer
}

// rep is one repetition: a round and its cost per target, in the order of -targets.
type rep struct {
	rounds []round
	costs  []cost
}

// run measures idle memory first (the script starts the processes fresh for each
// concurrency, so this is before they carried any stream), warms every target up,
// runs the repetitions and prints a line per round and a summary per target. It
// returns the number of failed requests.
func (m multiRun) run(ctx context.Context) (int, error) {
	idle := make([]int64, len(m.targets))
	for i, t := range m.targets {
		idle[i] = -1
		if len(t.pids) > 0 {
			r, err := rssSum(t.pids)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", t.name, err)
			}
			idle[i] = r
		}
	}
	if m.warmup > 0 {
		w := m.load
		w.duration = m.warmup
		for _, t := range m.targets {
			w.measured(ctx, t, m.send)
		}
	}
	reps := make([]rep, 0, m.reps)
	for i := range m.reps {
		r := rep{rounds: make([]round, len(m.targets)), costs: make([]cost, len(m.targets))}
		for _, t := range order(m.targets, i) {
			k := m.index(t.name)
			r.rounds[k], r.costs[k] = m.load.measured(ctx, t, m.send)
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			m.printRound(i+1, r.rounds[k], r.costs[k], idle[k])
		}
		reps = append(reps, r)
	}
	failed := 0
	for k := range m.targets {
		failed += m.summarize(k, reps, idle[k])
	}
	return failed, nil
}

func (m multiRun) index(name string) int {
	for i, t := range m.targets {
		if t.name == name {
			return i
		}
	}
	panic("overhead: unknown target " + name)
}

func (m multiRun) printRound(rep int, rd round, c cost, idle int64) {
	fmt.Fprintf(m.out, "rep=%d c=%d target=%-8s requests=%d tokens=%d tokens_per_s=%.0f ttft_p50_ms=%.3f ttft_p99_ms=%.3f ttft_max_ms=%.3f",
		rep, m.load.c, rd.Target, rd.Requests, rd.Tokens, float64(rd.Tokens)/rd.Elapsed.Seconds(),
		ms(percentile(rd.TTFTs, 0.50)), ms(percentile(rd.TTFTs, 0.99)), ms(percentile(rd.TTFTs, 1)))
	if c.cpu >= 0 {
		fmt.Fprintf(m.out, " cpu_ms=%.0f", ms(c.cpu))
	}
	if c.rssPeak >= 0 {
		fmt.Fprintf(m.out, " rss_idle_mb=%.1f rss_pre_mb=%.1f rss_peak_mb=%.1f", mb(idle), mb(c.rssPre), mb(c.rssPeak))
	}
	fmt.Fprintf(m.out, " failed=%d", rd.Failed)
	if rd.FirstErr != nil {
		fmt.Fprintf(m.out, " first_error=%q", rd.FirstErr.Error())
	}
	fmt.Fprintln(m.out)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// summarize prints the medians over the repetitions for target k and returns its
// failed requests. Added TTFT is the median of each repetition's difference from the
// baseline (target 0); memory per stream is the round's peak resident memory minus the
// idle one, over the streams; CPU per 1,000 tokens is the round's CPU time over the
// tokens the client received through the target.
func (m multiRun) summarize(k int, reps []rep, idle int64) int {
	var p50, p99, a50, a99, cpu, mem, peak, tps []float64
	failed := 0
	for _, r := range reps {
		rd, base := r.rounds[k], r.rounds[0]
		x50, x99 := ms(percentile(rd.TTFTs, 0.5)), ms(percentile(rd.TTFTs, 0.99))
		b50, b99 := ms(percentile(base.TTFTs, 0.5)), ms(percentile(base.TTFTs, 0.99))
		p50, p99 = append(p50, x50), append(p99, x99)
		a50, a99 = append(a50, x50-b50), append(a99, x99-b99)
		tps = append(tps, float64(rd.Tokens)/rd.Elapsed.Seconds())
		if c := r.costs[k]; c.cpu >= 0 && rd.Tokens > 0 {
			cpu = append(cpu, ms(c.cpu)/float64(rd.Tokens)*1000)
		}
		if c := r.costs[k]; c.rssPeak >= 0 && idle >= 0 {
			mem = append(mem, float64(c.rssPeak-idle)/1024/float64(m.load.c))
			peak = append(peak, mb(c.rssPeak))
		}
		failed += rd.Failed
	}
	none := func(xs []float64) float64 {
		if len(xs) == 0 {
			return -1
		}
		return median(xs)
	}
	fmt.Fprintf(m.out, "multi c=%d target=%s reps=%d ttft_p50_ms=%.3f ttft_p99_ms=%.3f added_p50_ms=%.3f added_p99_ms=%.3f cpu_ms_per_1k_tokens=%.2f rss_idle_mb=%.1f rss_peak_mb=%.1f mem_kb_per_stream=%.1f tokens_per_s=%.0f failed=%d\n",
		m.load.c, m.targets[k].name, len(reps), median(p50), median(p99), median(a50), median(a99),
		none(cpu), mb(idle), none(peak), none(mem), median(tps), failed)
	return failed
}
