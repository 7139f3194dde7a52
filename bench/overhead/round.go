package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// round is one target driven at one concurrency for one duration.
type round struct {
	Target   string // "direct" or "proxied"
	Requests int
	Failed   int
	Tokens   int
	Elapsed  time.Duration
	TTFTs    []time.Duration // sorted
	CPU      time.Duration   // the watched process's CPU time over the round; -1 if not watched
	FirstErr error
}

// load is what every round of a run shares.
type load struct {
	c        int           // concurrent streams
	duration time.Duration // new requests start until this long after the round began
	stagger  time.Duration // stream i starts i/c of this after the round began
	pid      int           // process whose CPU time is read around each round; 0 for none
}

// run keeps l.c streams open against url: each stream sends its next request as soon as
// the previous one ended, until the round's duration is over; then the round waits for
// the requests in flight. Streams start spread over l.stagger so that their token
// timers are out of phase, as independent requests are.
func (l load) run(ctx context.Context, target, url string, send sender) round {
	rd := round{Target: target, CPU: -1}
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0, cpuErr := cpuTime(l.pid)
	start := time.Now()
	end := start.Add(l.duration)
	for i := range l.c {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * l.stagger / time.Duration(l.c))
			for ctx.Err() == nil && time.Now().Before(end) {
				ttft, n, err := send(ctx, url)
				mu.Lock()
				rd.Requests++
				rd.Tokens += n
				if err != nil {
					rd.Failed++
					if rd.FirstErr == nil {
						rd.FirstErr = err
					}
				} else {
					rd.TTFTs = append(rd.TTFTs, ttft)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // do not spin on a refused connection
				}
			}
		})
	}
	wg.Wait()
	rd.Elapsed = time.Since(start)
	if cpu1, err := cpuTime(l.pid); l.pid > 0 && err == nil && cpuErr == nil {
		rd.CPU = cpu1 - cpu0
	}
	slices.Sort(rd.TTFTs)
	return rd
}

// pair runs repetition i: a direct and a proxied round, at the same time (mode "both")
// or one after the other, direct first in even repetitions (mode "alternate"). The
// proxy's CPU time is read around both rounds when they alternate: in the direct round
// it is what the proxy spends idle.
func (l load) pair(ctx context.Context, mode string, i int, direct, proxied string, send sender) pair {
	var p pair
	ld := l
	if mode == "both" {
		ld.pid = 0
	}
	d := func() { p.direct = ld.run(ctx, "direct", direct, send) }
	x := func() { p.proxied = l.run(ctx, "proxied", proxied, send) }
	switch {
	case mode == "both":
		var wg sync.WaitGroup
		wg.Go(d)
		wg.Go(x)
		wg.Wait()
	case i%2 == 0:
		d()
		x()
	default:
		x()
		d()
	}
	return p
}

// sender sends one request to url and returns its TTFT and output tokens.
type sender func(ctx context.Context, url string) (time.Duration, int, error)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// cpuTime returns the user plus system CPU time of process pid so far, from
// /proc/<pid>/stat; it includes threads that have exited.
func cpuTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses: state is field 3,
	// utime 14 and stime 15.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// percentile returns the q-quantile (0..1) of sorted by the nearest-rank method; 0 when
// sorted is empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
