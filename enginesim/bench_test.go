package enginesim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/wire"
)

// BenchmarkSimStreams measures how many concurrent streams and streamed tokens per second
// the simulator sustains. Each op is one round: `streams` clients each stream a 64-token
// completion at once. The clients run in the same process, so with -cpu 1 the figure is
// simulator and clients together on one core: a lower bound for the simulator alone.
//
//	go test -run '^$' -bench BenchmarkSimStreams -cpu 1 -benchtime 5x ./enginesim
func BenchmarkSimStreams(b *testing.B) {
	for _, streams := range []int{500, 2000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			benchStreams(b, streams, 64)
		})
	}
}

func benchStreams(b *testing.B, streams, tokens int) {
	p := tiny
	p.MaxNumSeqs = max(p.MaxNumSeqs, streams)
	srv, err := NewServer(Config{Profile: p})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()
	body := fmt.Sprintf(`{"prompt":"benchmark the simulated engine","max_tokens":%d,"ignore_eos":true,"stream":true}`, tokens)

	var total atomic.Int64
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for range streams {
			wg.Go(func() {
				n, err := streamOnce(client, ts.URL+"/v1/completions", body)
				total.Add(int64(n))
				if err == nil && n != tokens {
					err = fmt.Errorf("got %d tokens, want %d", n, tokens)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(total.Load())/elapsed.Seconds(), "tokens/s")
	b.ReportMetric(float64(streams), "streams")
}

// streamOnce sends one streaming request and returns the number of output tokens seen.
func streamOnce(client *http.Client, url, body string) (int, error) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	r := wire.NewSSEReader(resp.Body, wire.DefaultMaxEvent)
	n := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if ev.Comment || ev.IsDone() {
			continue
		}
		c, err := wire.DecodeChunk(ev.Data)
		if err != nil {
			return n, err
		}
		if c.OutputBytes() > 0 {
			n++
		}
	}
}
