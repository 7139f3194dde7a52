package proxy_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkStreamMemory measures what an open stream holds: C clients each open a
// completion stream through the proxy (or directly), read its first token and wait, the
// upstream holding every stream mid-answer; then, with all C open, the benchmark
// collects garbage and reads the runtime's figures. Reported per stream: goroutines,
// stack bytes and live heap bytes (HeapInuse after a collection). The proxy's own cost
// is the proxied figure minus the direct one of the same run, since the upstream and
// the clients run in the same process.
//
//	go test -run '^$' -bench BenchmarkStreamMemory -count 5 ./proxy
//
// With HEAPPROF=file it writes a heap profile while the streams are open (add
// -memprofilerate 1 to see every allocation).
//
// The prompt is short but for the case "prompt=16KiB", whose prompt is about 4,000
// tokens: what a stream holds of its request once the engine answered.
func BenchmarkStreamMemory(b *testing.B) {
	cases := []struct {
		name   string
		c      int
		prompt string
	}{
		{"streams=64", 64, "benchmark the proxy"},
		{"streams=512", 512, "benchmark the proxy"},
		{"streams=512/prompt=16KiB", 512, strings.Repeat("benchmark the proxy ", 16<<10/20)},
	}
	for _, tc := range cases {
		for _, via := range []string{"direct", "proxied"} {
			b.Run(tc.name+"/"+via, func(b *testing.B) {
				c := tc.c
				env := newBenchEnv(b, via == "proxied", nil)
				defer env.close()
				body := fmt.Sprintf(`{"model":"bench","prompt":%q,"max_tokens":%d,"stream":true}`, tc.prompt, benchTokens)
				var goroutines, stack, heap float64
				for b.Loop() {
					goroutines, stack, heap = env.openStreams(b, c, body)
				}
				b.ReportMetric(goroutines, "goroutines/stream")
				b.ReportMetric(stack, "stack-B/stream")
				b.ReportMetric(heap, "heap-B/stream")
			})
		}
	}
}

// openStreams opens c streams, each to its first token, reads the runtime's figures
// with all of them open, then lets every stream run to its end. It returns the
// goroutines, stack bytes and live heap bytes per stream above what was there before.
func (e *benchEnv) openStreams(b *testing.B, c int, body string) (goroutines, stack, heap float64) {
	var before, open runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	var started, release, done sync.WaitGroup
	started.Add(c)
	release.Add(1)
	for i := range c {
		id := "m" + strconv.Itoa(i)
		done.Go(func() {
			req, err := http.NewRequest(http.MethodPost, e.target+"/v1/completions", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				started.Done()
				return
			}
			req.Header.Set("X-Bench-Stream", id)
			resp, err := e.client.Do(req)
			if err != nil {
				b.Error(err)
				started.Done()
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if _, err := br.ReadSlice('\n'); err != nil { // the first token's event
				b.Error(err)
			}
			started.Done()
			release.Wait()
			turn := e.up.turn(id)
			for n := 1; n < benchTokens; n++ {
				turn <- struct{}{}
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Error(err)
						return
					}
					if strings.HasPrefix(string(line), "data: {") {
						break
					}
				}
			}
			for { // the usage chunk, [DONE], the end
				if _, err := br.ReadSlice('\n'); err != nil {
					return
				}
			}
		})
	}
	started.Wait()
	time.Sleep(10 * time.Millisecond) // let the connections' own goroutines settle
	runtime.GC()
	runtime.ReadMemStats(&open)
	if f := os.Getenv("HEAPPROF"); f != "" {
		w, _ := os.Create(f)
		pprof.WriteHeapProfile(w)
		w.Close()
	}
	g := runtime.NumGoroutine() - g0
	release.Done()
	done.Wait()
	n := float64(c)
	return float64(g) / n, float64(open.StackInuse-before.StackInuse) / n, float64(int64(open.HeapInuse)-int64(before.HeapInuse)) / n
}
