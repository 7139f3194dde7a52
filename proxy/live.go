package proxy

import (
	"sync"
	"sync/atomic"
)

// liveRequest is one inference request in flight: its estimated prompt and the output
// chunks seen so far, which its own goroutine updates.
type liveRequest struct {
	prompt int64
	probe  bool // a synthetic probe's request, not live traffic
	out    atomic.Int64
}

// output records that n output chunks have arrived.
func (l *liveRequest) output(n int) { l.out.Store(int64(n)) }

// liveSet is the set of requests in flight; it is summed at scrape time, so the per-chunk
// path touches only its own request.
type liveSet struct {
	mu   sync.Mutex
	reqs map[*liveRequest]struct{}
}

func (s *liveSet) init() { s.reqs = make(map[*liveRequest]struct{}) }

func (s *liveSet) add(prompt int64, probe bool) *liveRequest {
	l := &liveRequest{prompt: prompt, probe: probe}
	s.mu.Lock()
	s.reqs[l] = struct{}{}
	s.mu.Unlock()
	return l
}

func (s *liveSet) remove(l *liveRequest) {
	s.mu.Lock()
	delete(s.reqs, l)
	s.mu.Unlock()
}

// totals returns the number of live requests and their KV tokens (prompt + output),
// leaving out probe requests when withProbes is false.
func (s *liveSet) totals(withProbes bool) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int
	var kv int64
	for l := range s.reqs {
		if l.probe && !withProbes {
			continue
		}
		n++
		kv += l.prompt + l.out.Load()
	}
	return n, kv
}
