// Command simload drives a fixed number of concurrent streaming completions at an
// OpenAI-compatible endpoint for a fixed time and reports the streamed tokens per second.
// bench/sim.sh uses it to measure the engine simulator from a separate process.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18000/v1/completions", "completions endpoint")
	streams := flag.Int("streams", 2000, "concurrent streams")
	tokens := flag.Int("tokens", 256, "output tokens per request")
	duration := flag.Duration("duration", 20*time.Second, "how long to drive load")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *streams}}
	body := fmt.Sprintf(`{"prompt":"measure the simulator","max_tokens":%d,"ignore_eos":true,"stream":true}`, *tokens)
	var total, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *streams {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := stream(ctx, client, *url, body)
				total.Add(n)
				if err != nil && ctx.Err() == nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("streams=%d tokens=%d elapsed=%.1fs tokens/s=%.0f failed=%d\n",
		*streams, total.Load(), elapsed.Seconds(), float64(total.Load())/elapsed.Seconds(), failed.Load())
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

// stream runs one request and counts its output chunks ("data: {" events with text).
func stream(ctx context.Context, client *http.Client, url, body string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	var n int64
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte(`data: {`)) && !bytes.Contains(line, []byte(`"choices":[]`)) {
			n++
		}
	}
	return n, sc.Err()
}
