package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// rss returns process pid's resident set size (VmRSS of /proc/<pid>/status) in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		// "VmRSS:	   12345 kB"
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			break
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// rssSum is the resident memory of the processes together. Pages the processes share
// (nginx's master and worker share code) count once per process, which cancels out in
// the growth over a round.
func rssSum(pids []int) (int64, error) {
	var sum int64
	for _, p := range pids {
		r, err := rss(p)
		if err != nil {
			return 0, err
		}
		sum += r
	}
	return sum, nil
}
