package main

import (
	"os"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{name: "empty", sorted: nil, q: 0.5, want: 0},
		{name: "one", sorted: ms(7), q: 0.99, want: 7 * time.Millisecond},
		{name: "median of four is the second", sorted: ms(1, 2, 3, 4), q: 0.5, want: 2 * time.Millisecond},
		{name: "p99 of nine is the max", sorted: ms(1, 2, 3, 4, 5, 6, 7, 8, 9), q: 0.99, want: 9 * time.Millisecond},
		{name: "p99 of 200 is the 198th", sorted: ms(seq(200)...), q: 0.99, want: 198 * time.Millisecond},
		{name: "max", sorted: ms(1, 5, 9), q: 1, want: 9 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{name: "empty", want: 0},
		{name: "odd", xs: []float64{3, 1, 2}, want: 2},
		{name: "even", xs: []float64{4, 1, 3, 2}, want: 2.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.xs); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
		})
	}
}

// TestCPUTime reads this process's own /proc/<pid>/stat.
func TestCPUTime(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if d, err := cpuTime(0); d != 0 || err != nil {
		t.Errorf("cpuTime(0) = %v, %v; want 0, nil", d, err)
	}
}
