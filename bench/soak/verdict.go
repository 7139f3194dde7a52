package soak

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Sample is one reading of a process during a soak. A negative field was not measured.
type Sample struct {
	At         time.Duration // since the load began
	Goroutines float64
	FDs        float64 // open file descriptors
	Heap       float64 // bytes of heap in use
	RSS        float64 // resident bytes
	Requests   float64 // requests finished so far (slogate_requests_total); shown, not judged
}

// series are the sampled quantities a verdict judges, and the growth each may show.
var series = []struct {
	name   string
	count  bool // judged by CountGrowth and CountSlack; bytes otherwise
	value  func(Sample) float64
	growth func(Rule) float64
}{
	{"goroutines", true, func(s Sample) float64 { return s.Goroutines }, func(r Rule) float64 { return r.CountGrowth }},
	{"open fds", true, func(s Sample) float64 { return s.FDs }, func(r Rule) float64 { return r.CountGrowth }},
	{"heap in use", false, func(s Sample) float64 { return s.Heap }, func(r Rule) float64 { return r.HeapGrowth }},
	{"RSS", false, func(s Sample) float64 { return s.RSS }, func(r Rule) float64 { return r.RSSGrowth }},
}

// Rule says when a soak's samples are flat. The samples of the warm-up (while pools and
// caches fill) are left out; the rest split into thirds, and the median of the last
// third is compared with the median of the first. Medians, because one sample may fall on
// a burst of connections or just before a garbage collection.
type Rule struct {
	WarmUp float64 // share of the run, from its start, left out; in [0, 1)
	// A count (goroutines, open fds) is flat when its last third's median exceeds the
	// first third's by at most CountGrowth of it, or by at most CountSlack.
	CountGrowth float64
	CountSlack  float64
	// The heap in use is flat when the last third's median exceeds the first third's by
	// at most HeapGrowth of it, the resident memory by at most RSSGrowth.
	HeapGrowth float64
	RSSGrowth  float64
}

// DefaultRule leaves out the first 20% of the run and allows, from the first third to
// the last, counts 10% (or 20) of growth, the heap in use 10% and RSS 5%.
//
// A steady load's counts move by a few percent with the requests in flight at the
// instant of a sample, while a leak of one goroutine in a thousand requests adds
// thousands within minutes. The heap in use, read between collections, swings by up to
// half with the collector's cycle, so that even medians of a dozen samples differ by a
// few percent; 10% of slogate's ~45 MiB under a thousand clients still catches a leak
// of a MiB a minute within ten. RSS moves little once the heap has grown to its size.
var DefaultRule = Rule{WarmUp: 0.2, CountGrowth: 0.10, CountSlack: 20, HeapGrowth: 0.10, RSSGrowth: 0.05}

// minSamples is the fewest samples after the warm-up a verdict is drawn from: two a third.
const minSamples = 6

// Trend is one series' verdict.
type Trend struct {
	Name        string
	Bytes       bool    // the values are bytes
	First, Last float64 // the medians of the first and last thirds after the warm-up
	SlopePerMin float64 // the least-squares slope after the warm-up, per minute
	Limit       float64 // the largest Last that is flat
	Flat        bool
}

// Change returns Last relative to First: 0.03 for 3% of growth.
func (t Trend) Change() float64 {
	if t.First == 0 {
		return 0
	}
	return t.Last/t.First - 1
}

// Verdict is a soak's verdict on its samples.
type Verdict struct {
	Flat     bool
	Trends   []Trend // the measured series
	Analysed int     // the samples after the warm-up
	From, To time.Duration
	WarmUp   float64 // the rule's warm-up
	Problem  string  // why there is no verdict (too few samples); "" otherwise
}

// Judge applies rule to samples, taken in order. Series with a negative value in any
// sample were not measured and are left out. Judge is a pure function.
func Judge(samples []Sample, rule Rule) Verdict {
	if len(samples) == 0 {
		return Verdict{Problem: "no samples"}
	}
	from := time.Duration(rule.WarmUp * float64(samples[len(samples)-1].At))
	i, _ := slices.BinarySearchFunc(samples, from, func(s Sample, d time.Duration) int { return cmpDuration(s.At, d) })
	kept := samples[i:]
	v := Verdict{Analysed: len(kept), Flat: true, WarmUp: rule.WarmUp}
	if len(kept) < minSamples {
		v.Flat, v.Problem = false, fmt.Sprintf("%d samples after the warm-up; at least %d are needed", len(kept), minSamples)
		return v
	}
	v.From, v.To = kept[0].At, kept[len(kept)-1].At
	third := len(kept) / 3
	for _, s := range series {
		xs, ys := make([]float64, len(kept)), make([]float64, len(kept))
		measured := true
		for j, k := range kept {
			xs[j], ys[j] = k.At.Minutes(), s.value(k)
			measured = measured && ys[j] >= 0
		}
		if !measured {
			continue
		}
		t := Trend{Name: s.name, Bytes: !s.count, First: median(ys[:third]), Last: median(ys[len(ys)-third:]), SlopePerMin: slope(xs, ys)}
		if s.count {
			t.Limit = t.First + max(s.growth(rule)*t.First, rule.CountSlack)
		} else {
			t.Limit = t.First * (1 + s.growth(rule))
		}
		t.Flat = t.Last <= t.Limit
		v.Flat = v.Flat && t.Flat
		v.Trends = append(v.Trends, t)
	}
	return v
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// median returns the median of xs, which it does not change.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// slope returns the least-squares slope of ys over xs (0 when the xs do not vary).
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
		sxx, sxy = sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// WriteMarkdown writes the verdict as a Markdown table and a closing line.
func (v Verdict) WriteMarkdown(w io.Writer) {
	if v.Problem != "" {
		fmt.Fprintf(w, "No verdict: %s.\n", v.Problem)
		return
	}
	fmt.Fprintf(w, "Judged on %d samples from %s to %s (the first %.0f%% of the run left out as warm-up); medians of the first and last thirds:\n\n",
		v.Analysed, v.From.Round(time.Second), v.To.Round(time.Second), 100*v.WarmUp)
	fmt.Fprintln(w, "| series | first third | last third | change | slope / min | flat if last ≤ | flat |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	for _, t := range v.Trends {
		flat := "yes"
		if !t.Flat {
			flat = "**no**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %+.1f%% | %s | %s | %s |\n", t.Name, t.format(t.First), t.format(t.Last),
			100*t.Change(), t.formatSigned(t.SlopePerMin), t.format(t.Limit), flat)
	}
	fmt.Fprintln(w)
	if v.Flat {
		fmt.Fprintln(w, "Verdict: **flat**.")
	} else {
		fmt.Fprintln(w, "Verdict: **not flat**.")
	}
}

func (t Trend) format(x float64) string {
	if t.Bytes {
		return fmt.Sprintf("%.1f MiB", x/(1<<20))
	}
	return fmt.Sprintf("%.0f", x)
}

func (t Trend) formatSigned(x float64) string {
	if t.Bytes {
		return fmt.Sprintf("%+.2f MiB", x/(1<<20))
	}
	return fmt.Sprintf("%+.1f", x)
}

// WriteSamples writes samples as a Markdown table, every nth of them (and the last).
func WriteSamples(w io.Writer, samples []Sample, nth int) {
	nth = max(nth, 1)
	fmt.Fprintln(w, "| t | goroutines | open fds | heap in use | RSS | requests |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	for i, s := range samples {
		if i%nth != 0 && i != len(samples)-1 {
			continue
		}
		cells := []string{s.At.Round(time.Second).String(), count(s.Goroutines), count(s.FDs), mib(s.Heap), mib(s.RSS), count(s.Requests)}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

func count(x float64) string {
	if x < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", math.Round(x))
}

func mib(x float64) string {
	if x < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f MiB", x/(1<<20))
}
