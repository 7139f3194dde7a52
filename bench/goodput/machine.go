package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The simulator runs in real time: when the machine is busy with other work, its steps
// (and the clients and proxies) run late, and every latency grows. Comparisons within one
// run stay fair, but absolute figures do not, so the program waits for a quiet machine
// before each phase and reports how busy the machine was, and how late timers fired,
// while it ran.

// cpuTicks returns the machine's busy and total CPU ticks (/proc/stat) and this
// process's own (utime + stime from /proc/self/stat).
func cpuTicks() (busy, total, self int64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	v := make([]int64, len(f))
	for i := 1; i < len(f); i++ {
		v[i], _ = strconv.ParseInt(f[i], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	busy = v[1] + v[2] + v[3] + v[6] + v[7]
	if len(f) > 8 {
		busy += v[8]
	}
	total = busy + v[4] + v[5]
	data, err = os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(data)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(rest) < 13 {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/self/stat")
	}
	ut, _ := strconv.ParseInt(rest[11], 10, 64)
	st, _ := strconv.ParseInt(rest[12], 10, 64)
	return busy, total, ut + st, nil
}

// cpuMeter measures the machine's CPU use between start and stop.
type cpuMeter struct{ busy, total, self int64 }

func startCPU() cpuMeter {
	b, t, s, _ := cpuTicks()
	return cpuMeter{b, t, s}
}

// others returns the fraction of the machine's CPU used by other processes, and this
// process's share, since m was started.
func (m cpuMeter) others() (others, self float64) {
	b, t, s, err := cpuTicks()
	if err != nil || t <= m.total {
		return 0, 0
	}
	dt := float64(t - m.total)
	return max(float64(b-m.busy-(s-m.self)), 0) / dt, float64(s-m.self) / dt
}

// waitQuiet waits until the machine was less than threshold busy over one second, for
// at most maxWait, and says how busy it was.
func waitQuiet(ctx context.Context, threshold float64, maxWait time.Duration, log io.Writer) {
	deadline := time.Now().Add(maxWait)
	for {
		m := startCPU()
		if !sleepUntil(ctx, time.Now().Add(time.Second)) {
			return
		}
		others, _ := m.others()
		if others < threshold {
			fmt.Fprintf(log, "machine %.0f%% busy: starting\n", 100*others)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(log, "machine still %.0f%% busy after waiting %s: starting anyway\n", 100*others, maxWait)
			return
		}
	}
}

// lateness measures how late a 10 ms timer fires, as a gauge of how far the machine
// lets a real-time simulation fall behind.
type lateness struct {
	mu   sync.Mutex
	lags []time.Duration
}

func (l *lateness) run(ctx context.Context) {
	const tick = 10 * time.Millisecond
	for {
		want := time.Now().Add(tick)
		if !sleepUntil(ctx, want) {
			return
		}
		lag := time.Since(want)
		l.mu.Lock()
		l.lags = append(l.lags, lag)
		l.mu.Unlock()
	}
}

// String summarises the lateness: p50, p99 and the worst.
func (l *lateness) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("10 ms timers fired late by p50 %s, p99 %s, max %s", fmtDurFine(percentile(l.lags, 0.5)),
		fmtDurFine(percentile(l.lags, 0.99)), fmtDurFine(percentile(l.lags, 1)))
}

func fmtDurFine(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmtDur(d)
}

// phaseNoise runs f while measuring the machine: other processes' CPU share, this
// process's, and timer lateness. It returns a one-line account.
func phaseNoise(ctx context.Context, f func()) string {
	m := startCPU()
	var l lateness
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { l.run(lctx) })
	f()
	stop()
	wg.Wait()
	others, self := m.others()
	return fmt.Sprintf("during this phase other processes used %.0f%% of the machine's CPU and this one %.0f%%; %s",
		100*others, 100*self, l.String())
}
