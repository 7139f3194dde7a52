package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// target is one URL that the multi-target mode (-targets) drives, with the processes that
// serve it (none for the baseline): their CPU time and resident memory are its cost.
type target struct {
	name string
	url  string
	pids []int
}

// parseTargets reads -targets ("name=url,name=url,...", the first is the baseline that
// the others are compared with) and -pids ("name=pid+pid,name=pid"): the processes whose
// CPU time and memory are charged to a target (for nginx its master and its worker).
func parseTargets(targets, pids string) ([]target, error) {
	var ts []target
	for item := range strings.SplitSeq(targets, ",") {
		name, url, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" || url == "" || slices.ContainsFunc(ts, func(t target) bool { return t.name == name }) {
			return nil, fmt.Errorf("-targets: %q: want distinct name=url items", item)
		}
		ts = append(ts, target{name: name, url: url})
	}
	if len(ts) < 2 {
		return nil, fmt.Errorf("-targets: want a baseline and at least one other target")
	}
	if pids == "" {
		return ts, nil
	}
	for item := range strings.SplitSeq(pids, ",") {
		name, list, _ := strings.Cut(strings.TrimSpace(item), "=")
		i := slices.IndexFunc(ts, func(t target) bool { return t.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-pids: %q names no target", item)
		}
		for p := range strings.SplitSeq(list, "+") {
			pid, err := strconv.Atoi(p)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("-pids: %q: want name=pid+pid", item)
			}
			ts[i].pids = append(ts[i].pids, pid)
		}
	}
	return ts, nil
}

// order returns the order in which repetition i visits the targets: as given in even
// repetitions, reversed in odd ones (ABC CBA, the three-target form of ABBA), so that a
// drift of the machine falls on every target alike over two repetitions.
func order(ts []target, i int) []target {
	o := slices.Clone(ts)
	if i%2 == 1 {
		slices.Reverse(o)
	}
	return o
}

// cost is what a target's processes spent over a round.
type cost struct {
	cpu     time.Duration // user + system over the round, summed over the processes; -1 unknown
	rssPeak int64         // largest sum of VmRSS seen during the round (bytes); -1 unknown
	rssPre  int64         // sum of VmRSS just before the round (bytes); -1 unknown
}

// rssSampleEvery is how often resident memory is read during a round.
const rssSampleEvery = 50 * time.Millisecond

// measured runs one round against t and reads its processes' CPU time around it and
// their resident memory every rssSampleEvery during it.
func (l load) measured(ctx context.Context, t target, send sender) (round, cost) {
	c := cost{cpu: -1, rssPeak: -1, rssPre: -1}
	if len(t.pids) == 0 {
		ld := l
		ld.pid = 0
		return ld.run(ctx, t.name, t.url, send), c
	}
	c.rssPre, _ = rssSum(t.pids)
	cpu0, err0 := cpuSum(t.pids)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	peak := c.rssPre
	wg.Go(func() {
		tick := time.NewTicker(rssSampleEvery)
		defer tick.Stop()
		for {
			if r, err := rssSum(t.pids); err == nil {
				peak = max(peak, r)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	ld := l
	ld.pid = 0
	rd := ld.run(ctx, t.name, t.url, send)
	close(stop)
	wg.Wait()
	if cpu1, err1 := cpuSum(t.pids); err0 == nil && err1 == nil {
		c.cpu = cpu1 - cpu0
	}
	c.rssPeak = peak
	rd.CPU = c.cpu
	return rd, c
}

// cpuSum is the CPU time of the processes so far.
func cpuSum(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, p := range pids {
		d, err := cpuTime(p)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}
