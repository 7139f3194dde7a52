package proxy

import (
	"context"
	"sync"
)

// liveRequest is one inference request between its inspection and its report, as far
// as Shutdown needs to know it: how to cut it short.
type liveRequest struct {
	cut context.CancelCauseFunc // cancels the request's upstream context
}

// liveSet is the set of inference requests inside the proxy — waiting for admission,
// at the engine or streaming — walked only to cut every one short. What they hold in the
// engine is admission's ledger (admission.Controller.InFlight), not the proxy's.
type liveSet struct {
	mu   sync.Mutex
	reqs map[*liveRequest]struct{}
}

func (s *liveSet) init() { s.reqs = make(map[*liveRequest]struct{}) }

// enter adds a request; cut cancels its upstream context.
func (s *liveSet) enter(cut context.CancelCauseFunc) *liveRequest {
	l := &liveRequest{cut: cut}
	s.mu.Lock()
	s.reqs[l] = struct{}{}
	s.mu.Unlock()
	return l
}

// leave removes a request.
func (s *liveSet) leave(l *liveRequest) {
	s.mu.Lock()
	delete(s.reqs, l)
	s.mu.Unlock()
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
