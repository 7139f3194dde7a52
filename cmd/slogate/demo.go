package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/wire"
)

func init() {
	commands["demo"] = command{summary: "run slogate against the built-in engine simulator and show what it sees", run: runDemo}
}

// runDemo starts the simulated engine on a loopback port and drives waves of concurrent
// streaming requests at it, printing what a client sees (TTFT, TPOT, E2E) beside what
// the engine reports. The measuring proxy joins this path when it lands (issue 3).
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", "tiny", "simulator profile")
	waves := fs.String("concurrency", "1,8,32,128", "concurrent streams per wave, comma-separated")
	tokens := fs.Int("max-tokens", 64, "output tokens per request")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	levels, err := parseInts(*waves)
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	cfg, err := simConfig(*profile, "vllm", "", "", 0, nil)
	if err != nil {
		return err
	}
	srv, err := enginesim.NewServer(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = srv.Run(ctx) }()
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	url := "http://" + ln.Addr().String() + "/v1/completions"
	fmt.Fprintf(stdout, "simulated engine (profile %s) on %s\n\n", cfg.Profile.Name, ln.Addr())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tok\tTTFT p50\tTTFT p95\tTPOT p50\tE2E p95\ttokens/s\t")
	for _, c := range levels {
		w := demoWave(ctx, url, c, *tokens)
		fmt.Fprintf(tw, "%d\t%d/%d\t%s\t%s\t%s\t%s\t%.0f\t\n", c, w.ok, c,
			ms(pct(w.ttft, 50)), ms(pct(w.ttft, 95)), ms(pct(w.tpot, 50)), ms(pct(w.e2e, 95)), w.tokensPerSec)
		if ctx.Err() != nil {
			break
		}
	}
	tw.Flush()
	st := srv.Stats()
	fmt.Fprintf(stdout, "\nengine: %d prompt and %d generated tokens in %d steps, %d preemptions\n",
		st.PromptTokens, st.GenerationTokens, st.Steps, st.Preemptions)
	return ctx.Err()
}

// wave is what the client side saw of one burst of concurrent requests.
type wave struct {
	ok           int
	ttft, tpot   []time.Duration
	e2e          []time.Duration
	tokensPerSec float64
}

func demoWave(ctx context.Context, url string, conc, tokens int) wave {
	body := fmt.Sprintf(`{"prompt":"Explain continuous batching in one paragraph.","max_tokens":%d,"ignore_eos":true,"stream":true}`, tokens)
	var (
		mu sync.Mutex
		w  wave
		wg sync.WaitGroup
	)
	start := time.Now()
	total := 0
	for range conc {
		wg.Go(func() {
			ttft, e2e, n, err := timeStream(ctx, url, body)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil || n != tokens {
				return
			}
			w.ok++
			w.ttft, w.e2e = append(w.ttft, ttft), append(w.e2e, e2e)
			if n > 1 {
				w.tpot = append(w.tpot, (e2e-ttft)/time.Duration(n-1))
			}
		})
	}
	wg.Wait()
	w.tokensPerSec = float64(total) / time.Since(start).Seconds()
	return w
}

// timeStream sends one streaming request and returns its time to first output, its
// end-to-end time and the number of chunks with output.
func timeStream(ctx context.Context, url, body string) (ttft, e2e time.Duration, n int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	r := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
	for {
		ev, err := r.Next()
		if err != nil {
			return ttft, time.Since(start), n, ignoreEOF(err)
		}
		if ev.Comment || ev.IsDone() {
			continue
		}
		c, err := wire.DecodeChunk(ev.Data)
		if err != nil {
			return ttft, time.Since(start), n, err
		}
		if c.OutputBytes() > 0 {
			if n == 0 {
				ttft = time.Since(start)
			}
			n++
		}
	}
}

func ignoreEOF(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
