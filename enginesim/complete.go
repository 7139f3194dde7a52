package enginesim

import (
	"slices"
	"time"
)

// Complete applies the step planned by the last Step, which ended at time end, and
// returns what it produced for each live request. The returned slice is valid until the
// next call.
func (s *Scheduler) Complete(end time.Time) []Emission {
	if !s.inStep {
		panic("enginesim: Complete called without Step")
	}
	s.inStep = false
	s.emissions = s.emissions[:0]
	var prefill, computed int
	for _, it := range s.plan {
		q := it.s
		computed += it.n
		if !it.decode {
			prefill += it.n
		}
		if q.aborted {
			continue
		}
		if it.decode {
			s.emit(q, s.verify(q, it.n), end)
			continue
		}
		q.computed += it.n
		s.stats.PromptTokens += int64(it.n)
		s.publish(q)
		if q.computed == q.ctx {
			s.emit(q, 1, end)
		}
	}
	s.stats.Steps++
	s.stats.IterationTokens = computed
	s.stats.PrefillTokensStep = prefill
	s.stats.LastStepDuration = end.Sub(s.stepStart)
	s.stats.BusyTime += s.stats.LastStepDuration
	if s.hooks.Step != nil {
		s.hooks.Step(computed)
	}
	s.running = slices.DeleteFunc(s.running, func(q *seq) bool {
		switch {
		case q.aborted:
			s.finish(q, end, "abort")
		case q.generated >= q.req.OutputTokens:
			s.live--
			s.finish(q, end, q.req.FinishReason)
		default:
			return false
		}
		return true
	})
	clear(s.plan)
	s.plan = s.plan[:0]
	return s.emissions
}

// verify applies a decode step of q that computed n tokens (its last output and n-1
// drafts) and returns how many new tokens it yields: one plus the accepted drafts.
func (s *Scheduler) verify(q *seq, n int) int {
	accepted := 0
	if drafts := n - 1; drafts > 0 {
		for accepted < drafts && s.rng.Float64() < s.p.Speculation.AcceptRate {
			accepted++
		}
		s.stats.SpecDrafts++
		s.stats.SpecDraftTokens += int64(drafts)
		s.stats.SpecAccepted += int64(accepted)
	}
	q.computed += 1 + accepted
	return 1 + accepted
}

// emit records k new output tokens of q at time t (fewer if q reaches its length).
func (s *Scheduler) emit(q *seq, k int, t time.Time) {
	k = min(k, q.req.OutputTokens-q.generated)
	if k <= 0 {
		return
	}
	first := q.first.IsZero()
	if first {
		q.first = t
		s.leaveBacklog(q)
	} else if s.hooks.Tokens != nil {
		s.hooks.Tokens(t.Sub(q.last), k)
	}
	q.last = t
	q.generated += k
	q.ctx += k
	s.stats.GenerationTokens += int64(k)
	e := Emission{ID: q.req.ID, Tokens: k, First: first}
	if q.generated >= q.req.OutputTokens {
		e.Done, e.Reason = true, q.req.FinishReason
	}
	s.emissions = append(s.emissions, e)
}

// publish shares q's newly completed full prompt blocks through the prefix cache.
func (s *Scheduler) publish(q *seq) {
	if q.req.BlockHashes == nil {
		return
	}
	full := min(q.computed, q.req.PromptTokens) / s.p.BlockSize
	for q.hashed < full && q.hashed < len(q.req.BlockHashes) && q.plain > 0 {
		if !s.kv.publish(q.req.BlockHashes[q.hashed]) {
			return
		}
		q.hashed++
		q.plain--
	}
}

// finish releases q and reports its life to the hooks.
func (s *Scheduler) finish(q *seq, now time.Time, reason string) {
	s.releaseKV(q)
	q.running = false
	if s.byID[q.req.ID] == q { // the ID may already name a new request
		delete(s.byID, q.req.ID)
	}
	s.stats.FinishedByReason[reason]++
	if s.hooks.Finished == nil {
		return
	}
	f := Finished{
		ID:           q.req.ID,
		Reason:       reason,
		PromptTokens: q.req.PromptTokens,
		OutputTokens: q.generated,
		MaxTokens:    q.req.MaxTokens,
		CachedTokens: q.cached,
		Preemptions:  q.preempts,
		E2E:          now.Sub(q.req.Arrival),
	}
	if !q.scheduled.IsZero() {
		f.Queue = q.scheduled.Sub(q.enqueued)
	}
	if !q.first.IsZero() {
		f.Prefill = q.first.Sub(q.scheduled)
		f.Decode = q.last.Sub(q.first)
		f.TTFT = q.first.Sub(q.req.Arrival)
	}
	s.hooks.Finished(f)
}
