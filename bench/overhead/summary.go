package main

import (
	"fmt"
	"io"
	"time"
)

// pair is one repetition: a direct and a proxied round at the same concurrency.
type pair struct{ direct, proxied round }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// print writes one line per round of the pair.
func (p pair) print(w io.Writer, rep, c int) {
	for _, rd := range []round{p.direct, p.proxied} {
		fmt.Fprintf(w, "rep=%d c=%d target=%-7s requests=%d tokens=%d tokens_per_s=%.0f ttft_p50_ms=%.3f ttft_p99_ms=%.3f ttft_max_ms=%.3f",
			rep, c, rd.Target, rd.Requests, rd.Tokens, float64(rd.Tokens)/rd.Elapsed.Seconds(),
			ms(percentile(rd.TTFTs, 0.50)), ms(percentile(rd.TTFTs, 0.99)), ms(percentile(rd.TTFTs, 1)))
		if rd.CPU >= 0 {
			fmt.Fprintf(w, " proxy_cpu_ms=%.0f", ms(rd.CPU))
		}
		fmt.Fprintf(w, " failed=%d", rd.Failed)
		if rd.FirstErr != nil {
			fmt.Fprintf(w, " first_error=%q", rd.FirstErr.Error())
		}
		fmt.Fprintln(w)
	}
}

// summary is the medians over the repetitions of a run. The added TTFT is the median of
// each repetition's difference (proxied - direct), not the difference of the medians.
type summary struct {
	direct50, direct99, proxied50, proxied99, added50, added99 float64 // ms
	cpuPer1k                                                   float64 // proxy CPU ms per 1,000 tokens streamed through it
	tokensPerSec                                               float64 // through the proxy
	idleCPU                                                    float64 // proxy CPU ms per second during direct rounds
	failed                                                     int
}

func summarize(pairs []pair) summary {
	var d50, d99, p50, p99, a50, a99, cpu, tps, idle []float64
	s := summary{cpuPer1k: -1, idleCPU: -1}
	for _, p := range pairs {
		dm50, dm99 := ms(percentile(p.direct.TTFTs, 0.5)), ms(percentile(p.direct.TTFTs, 0.99))
		pm50, pm99 := ms(percentile(p.proxied.TTFTs, 0.5)), ms(percentile(p.proxied.TTFTs, 0.99))
		d50, d99, p50, p99 = append(d50, dm50), append(d99, dm99), append(p50, pm50), append(p99, pm99)
		a50, a99 = append(a50, pm50-dm50), append(a99, pm99-dm99)
		tps = append(tps, float64(p.proxied.Tokens)/p.proxied.Elapsed.Seconds())
		if p.proxied.CPU >= 0 && p.proxied.Tokens > 0 {
			cpu = append(cpu, ms(p.proxied.CPU)/float64(p.proxied.Tokens)*1000)
		}
		if p.direct.CPU >= 0 {
			idle = append(idle, ms(p.direct.CPU)/p.direct.Elapsed.Seconds())
		}
		s.failed += p.direct.Failed + p.proxied.Failed
	}
	s.direct50, s.direct99, s.proxied50, s.proxied99 = median(d50), median(d99), median(p50), median(p99)
	s.added50, s.added99, s.tokensPerSec = median(a50), median(a99), median(tps)
	if len(cpu) > 0 {
		s.cpuPer1k = median(cpu)
	}
	if len(idle) > 0 {
		s.idleCPU = median(idle)
	}
	return s
}

func (s summary) print(w io.Writer, c, reps int) {
	fmt.Fprintf(w, "summary c=%d reps=%d direct_p50_ms=%.3f direct_p99_ms=%.3f proxied_p50_ms=%.3f proxied_p99_ms=%.3f added_p50_ms=%.3f added_p99_ms=%.3f cpu_ms_per_1k_tokens=%.1f proxied_tokens_per_s=%.0f idle_cpu_ms_per_s=%.1f failed=%d\n",
		c, reps, s.direct50, s.direct99, s.proxied50, s.proxied99, s.added50, s.added99, s.cpuPer1k, s.tokensPerSec, s.idleCPU, s.failed)
}
