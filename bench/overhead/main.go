// Command overhead measures what a proxy adds to streamed completions, side by side with
// a direct connection. For a concurrency C it keeps C streams open against one URL for a
// round (each stream sends its next request as soon as the last one ended) and measures
// every request's TTFT client-side, from just before sending to the first chunk that
// carries output. Each repetition is one round against -direct and one against -proxied,
// C streams each. By default (-mode alternate) the two rounds run one after the other,
// in the order ABBA (direct, proxied, proxied, direct, ...), so that drift falls on both
// alike; -mode both runs them at the same time, so that a stall of the shared machine
// falls on both alike, but doubles the load on the client and the upstream.
//
// With -pid, the CPU time (user + system, /proc/<pid>/stat) of that process (the proxy)
// is read before and after every round, and divided by the tokens streamed through it.
//
// It prints one line per round and a summary line of medians over the repetitions:
//
//	summary c=64 reps=3 direct_p50_ms=... direct_p99_ms=... proxied_p50_ms=...
//	  proxied_p99_ms=... added_p50_ms=... added_p99_ms=... cpu_ms_per_1k_tokens=...
//	  proxied_tokens_per_s=... idle_cpu_ms_per_s=... failed=0
//
// bench/proxy.sh runs it for C = 1, 64 and 512.
//
// With -targets (name=url,...) it compares more than one proxy with a direct connection
// instead: each repetition drives every target for one round, in the given order in even
// repetitions and reversed in odd ones (ABC CBA). The first target is the baseline; -pids
// names the processes serving each other target (name=pid+pid,...), whose CPU time is
// read around every round and whose resident memory (VmRSS, summed) is read at start-up
// and every 50 ms during the rounds. It prints a line per round and one per target:
//
//	multi c=512 target=nginx reps=5 ttft_p50_ms=... ttft_p99_ms=... added_p50_ms=...
//	  added_p99_ms=... cpu_ms_per_1k_tokens=... rss_idle_mb=... rss_peak_mb=...
//	  mem_kb_per_stream=... tokens_per_s=... failed=0
//
// bench/nginx.sh runs it with direct, slogate and nginx.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"
)

func main() {
	direct := flag.String("direct", "http://127.0.0.1:18801/v1/completions", "the engine's completions URL")
	proxied := flag.String("proxied", "http://127.0.0.1:18802/v1/completions", "the same endpoint through the proxy")
	c := flag.Int("c", 64, "concurrent streams")
	duration := flag.Duration("duration", 8*time.Second, "length of a round (requests start until then, then drain)")
	reps := flag.Int("reps", 3, "repetitions (one direct and one proxied round each)")
	warmup := flag.Duration("warmup", 2*time.Second, "an unreported round on each target first, to open connections")
	tokens := flag.Int("tokens", 32, "max_tokens of every request")
	stagger := flag.Duration("stagger", 0, "spread the streams' starts over this long (default: one request's length at the pacer's default pace, 50ms + (tokens-1) x 20ms)")
	pid := flag.Int("pid", 0, "the proxy's process id, to measure its CPU time (0: none)")
	targets := flag.String("targets", "", "multi-target mode: name=url,name=url,... (the first is the baseline); -direct, -proxied, -pid and -mode are then unused")
	pids := flag.String("pids", "", "with -targets: the processes serving each target, name=pid+pid,...")
	mode := flag.String("mode", "alternate", "alternate: the direct and the proxied round of a repetition run one after the other, in the order ABBA; both: at the same time, C streams each")
	flag.Parse()
	if *c <= 0 || *reps <= 0 || *tokens <= 0 || *duration <= 0 || *mode != "both" && *mode != "alternate" {
		fmt.Fprintln(os.Stderr, "overhead: -c, -reps, -tokens and -duration must be positive; -mode both or alternate")
		os.Exit(2)
	}
	if *stagger == 0 {
		*stagger = 50*time.Millisecond + time.Duration(*tokens-1)*20*time.Millisecond
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 4 * *c, MaxIdleConnsPerHost: *c, DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
	body := fmt.Sprintf(`{"model":"pacer","prompt":"measure the proxy's overhead","max_tokens":%d,"ignore_eos":true,"stream":true}`, *tokens)
	send := func(ctx context.Context, url string) (time.Duration, int, error) {
		return stream(ctx, client, url, body, *tokens)
	}
	l := load{c: *c, duration: *duration, stagger: *stagger, pid: *pid}
	if *targets != "" {
		os.Exit(runTargets(ctx, l, *targets, *pids, *reps, *warmup, send))
	}

	if *warmup > 0 {
		w := l
		w.duration = *warmup
		w.pair(ctx, *mode, 0, *direct, *proxied, send)
	}
	var pairs []pair
	for i := range *reps {
		p := l.pair(ctx, *mode, i, *direct, *proxied, send)
		if ctx.Err() != nil {
			os.Exit(1)
		}
		p.print(os.Stdout, i+1, *c)
		pairs = append(pairs, p)
	}
	s := summarize(pairs)
	s.print(os.Stdout, *c, *reps)
	if s.failed > 0 {
		os.Exit(1)
	}
}

// runTargets is the multi-target mode; it returns the exit code.
func runTargets(ctx context.Context, l load, targets, pids string, reps int, warmup time.Duration, send sender) int {
	ts, err := parseTargets(targets, pids)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		return 2
	}
	m := multiRun{load: l, targets: ts, reps: reps, warmup: warmup, send: send, out: os.Stdout}
	failed, err := m.run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		return 1
	}
	if failed > 0 {
		return 1
	}
	return 0
}
