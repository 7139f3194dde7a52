package synth

import (
	"net/http"
	"sync"
	"time"
)

// wireClock wraps an engine's handler and records, for each completions request, how
// long after the handler received it the handler wrote its first bytes of body: the TTFT
// the engine's HTTP server puts on the wire, between the engine's own TTFT (which ends
// when its scheduler emits the token) and the prober's (which also holds the loopback
// transit both ways and the client's parsing). A real handler around the real one.
type wireClock struct {
	h     http.Handler
	mu    sync.Mutex
	ttfb  []time.Duration
	paths map[string]int // requests by path
}

// served returns how many requests were sent to path.
func (c *wireClock) served(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}

// firstWrite is a ResponseWriter that notes the time of its first body write.
type firstWrite struct {
	http.ResponseWriter
	start time.Time
	first time.Duration
}

func (f *firstWrite) Write(b []byte) (int, error) {
	if f.first == 0 && len(b) > 0 {
		f.first = time.Since(f.start)
	}
	return f.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer's Flush.
func (f *firstWrite) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (c *wireClock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.paths == nil {
		c.paths = map[string]int{}
	}
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	if r.URL.Path != "/v1/completions" {
		c.h.ServeHTTP(w, r)
		return
	}
	fw := &firstWrite{ResponseWriter: w, start: time.Now()}
	c.h.ServeHTTP(fw, r)
	c.mu.Lock()
	c.ttfb = append(c.ttfb, fw.first)
	c.mu.Unlock()
}

// take returns the times recorded since the last call and forgets them.
func (c *wireClock) take() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.ttfb
	c.ttfb = nil
	return out
}
