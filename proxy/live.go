package proxy

import (
	"context"
	"sync"
	"sync/atomic"
)

// liveRequest is one inference request between its inspection and its report: how to
// cut it short, and, once admitted, its estimated prompt and the output chunks seen so
// far, which its own goroutine updates.
type liveRequest struct {
	set      *liveSet
	cut      context.CancelCauseFunc // cancels the request's upstream context
	probe    bool                    // a synthetic probe's request, not live traffic
	admitted bool                    // counted in the totals
	prompt   int64
	out      int64 // output chunks counted so far
}

// admit counts the request in the totals: from now on it holds KV in the engine.
func (l *liveRequest) admit(prompt int64) {
	l.admitted, l.prompt = true, prompt
	c := l.set.counts(l.probe)
	c.requests.Add(1)
	c.kv.Add(prompt)
}

// output records that n output chunks have arrived in all.
func (l *liveRequest) output(n int) {
	if d := int64(n) - l.out; d != 0 && l.admitted {
		l.out = int64(n)
		l.set.counts(l.probe).kv.Add(d)
	}
}

// liveCounts are running totals over the admitted requests of one class.
type liveCounts struct {
	requests atomic.Int64
	kv       atomic.Int64 // prompt + output so far
}

// liveSet is the set of requests in flight. Its totals are kept as running sums, so
// reading them (admission does, for every request) costs the same however many streams
// are open, and the per-chunk path adds to one counter. The set itself is walked only to
// cut every request short.
type liveSet struct {
	traffic, probes liveCounts

	mu   sync.Mutex
	reqs map[*liveRequest]struct{}
}

func (s *liveSet) init() { s.reqs = make(map[*liveRequest]struct{}) }

func (s *liveSet) counts(probe bool) *liveCounts {
	if probe {
		return &s.probes
	}
	return &s.traffic
}

// enter adds a request, not yet counted in the totals; cut cancels its upstream context.
func (s *liveSet) enter(cut context.CancelCauseFunc, probe bool) *liveRequest {
	l := &liveRequest{set: s, cut: cut, probe: probe}
	s.mu.Lock()
	s.reqs[l] = struct{}{}
	s.mu.Unlock()
	return l
}

// leave removes a request and takes it out of the totals.
func (s *liveSet) leave(l *liveRequest) {
	s.mu.Lock()
	delete(s.reqs, l)
	s.mu.Unlock()
	if l.admitted {
		c := s.counts(l.probe)
		c.requests.Add(-1)
		c.kv.Add(-l.prompt - l.out)
	}
}

// totals returns the number of admitted requests and their KV tokens (prompt + output),
// leaving out probe requests when withProbes is false. The two figures are read one
// after the other, not as one snapshot.
func (s *liveSet) totals(withProbes bool) (int, int64) {
	n, kv := s.traffic.requests.Load(), s.traffic.kv.Load()
	if withProbes {
		n, kv = n+s.probes.requests.Load(), kv+s.probes.kv.Load()
	}
	return int(n), kv
}

// cutAll cancels the upstream context of every request in the set with cause.
func (s *liveSet) cutAll(cause error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.reqs {
		l.cut(cause)
	}
	return len(s.reqs)
}
