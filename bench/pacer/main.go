// Command pacer is a tiny OpenAI-compatible upstream for slogate's proxy-overhead
// benchmark (bench/proxy.sh). Its POST /v1/completions streams vLLM-shaped SSE chunks at
// a fixed pace, on a timer of its own for every request: the first token -first after the
// request arrived, then one token every -every until max_tokens (default -tokens), then
// the usage chunk when stream_options.include_usage asks for it, and [DONE]. Nothing is
// batched, so a request's TTFT is the same however many others run: any TTFT beyond
// -first that a client sees was added on the way.
//
// It also serves what slogate's engine scraper reads: GET /metrics (a minimal vLLM
// exposition: requests running and waiting, KV-cache usage, cache config) and
// GET /v1/models, and GET /health for scripts.
//
//	pacer -listen 127.0.0.1:18801 -first 50ms -every 20ms
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18801", "address to serve on")
	first := flag.Duration("first", 50*time.Millisecond, "delay from a request's arrival to its first token")
	every := flag.Duration("every", 20*time.Millisecond, "interval between later tokens")
	tokens := flag.Int("tokens", 64, "output tokens of a request without max_tokens")
	model := flag.String("model", "pacer", "the served model name")
	flag.Parse()
	if *first < 0 || *every <= 0 || *tokens <= 0 {
		fmt.Fprintln(os.Stderr, "pacer: -first must be >= 0, -every and -tokens > 0")
		os.Exit(2)
	}
	p := newPacer(*model, *first, *every, *tokens)
	srv := &http.Server{Addr: *listen, Handler: p.handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
