package enginesim

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Request is one generation request as the scheduler sees it: sizes only, no text.
type Request struct {
	ID           uint64
	PromptTokens int    // > 0
	OutputTokens int    // > 0; exactly this many tokens are generated
	FinishReason string // reported with the last token: "length" or "stop"
	MaxTokens    int    // the client's max_tokens, for the request-parameter histogram
	// BlockHashes are chained hashes of the prompt's full KV blocks, used for prefix
	// caching; nil disables caching for this request.
	BlockHashes []uint64
	// Arrival is when the API server received the request; TTFT and E2E count from it.
	Arrival time.Time
}

// Emission reports what one step produced for one request.
type Emission struct {
	ID     uint64
	Tokens int    // new output tokens (several with speculative decoding)
	First  bool   // they are the request's first: its prefill has finished
	Done   bool   // the request finished with this step
	Reason string // finish reason when Done
}

// Finished is the life of one request that left the scheduler, for the engine's metrics.
type Finished struct {
	ID           uint64 // the Request's
	Reason       string // "length", "stop" or "abort"
	PromptTokens int
	OutputTokens int // tokens generated before it finished
	MaxTokens    int
	CachedTokens int // prompt tokens served from the prefix cache at first scheduling
	Preemptions  int
	Queue        time.Duration // entering the scheduler to first scheduled (0 if never)
	Prefill      time.Duration // first scheduled to first token
	Decode       time.Duration // first token to last token
	TTFT         time.Duration // arrival to first token (0 if none)
	E2E          time.Duration // arrival to finish
}

// Hooks receive scheduler events as they happen. Nil fields are skipped. Hooks run on
// the goroutine that calls Complete or Abort and must not call back into the scheduler.
type Hooks struct {
	Tokens   func(gap time.Duration, n int) // n tokens arrived gap after the previous ones
	Finished func(Finished)
	Step     func(tokens int) // a step completed, computing this many tokens
}

// Stats is a snapshot of the scheduler's gauges and cumulative counters.
type Stats struct {
	Running, Waiting  int
	Preempted         int // waiting requests that were preempted and must recompute
	UsedBlocks        int
	UsedTokens        int // KV tokens held by sequences
	PromptTokens      int64
	GenerationTokens  int64
	Preemptions       int64
	PrefixQueries     int64 // prompt tokens looked up in the prefix cache
	PrefixHits        int64 // of which found
	SpecDrafts        int64
	SpecDraftTokens   int64
	SpecAccepted      int64
	Steps             int64
	FinishedByReason  map[string]int64
	IterationTokens   int // tokens computed in the last completed step
	LastStepDuration  time.Duration
	BusyTime          time.Duration // total duration of all steps
	PrefillTokensStep int           // prefill tokens in the last completed step
	// PrefillBacklog is the prompt tokens of the live requests that have produced no
	// token yet, each counted whole however much of it is computed or cached: what
	// vLLM's --max-num-queued-tokens holds against its cap (caps.go).
	PrefillBacklog int
}

type seq struct {
	req       Request
	ctx       int // tokens known: prompt + generated
	computed  int // tokens whose KV is computed
	generated int
	plain     int // private KV blocks
	hashed    int // leading BlockHashes whose shared blocks it holds
	running   bool
	aborted   bool
	preempts  int
	cached    int
	backlog   bool // its prompt counts in the prefill backlog: live, no token yet
	enqueued  time.Time
	scheduled time.Time
	first     time.Time
	last      time.Time
}

type planItem struct {
	s      *seq
	n      int // tokens computed in the step
	decode bool
}

// Scheduler is the engine core: continuous batching with a FCFS waiting queue, chunked
// prefill under a per-step token budget, a block KV cache, and preemption by recompute
// when the cache runs out, modelled on vLLM's v1 scheduler. It never reads a clock: every
// method takes the current time, so it behaves identically in real and virtual time.
//
// A step is planned with Step and applied with Complete at the time it ends; requests may
// be submitted or aborted in between. Not safe for concurrent use.
type Scheduler struct {
	p     Profile
	kv    *kvCache
	hooks Hooks
	rng   *rand.Rand

	byID        map[uint64]*seq
	waiting     []*seq // FCFS; preempted requests return to the front
	waitingLive int    // waiting requests that are not aborted
	running     []*seq // admission order; preemption takes the last
	live        int    // requests waiting or running, not aborted
	backlog     int    // Stats.PrefillBacklog
	plan        []planItem
	inStep      bool
	stepStart   time.Time
	emissions   []Emission
	stats       Stats
}

// NewScheduler returns an idle scheduler for profile p, which must be valid.
func NewScheduler(p Profile, hooks Hooks) *Scheduler {
	return &Scheduler{
		p:     p,
		kv:    newKVCache(p.BlockSize, p.NumBlocks, p.PrefixCaching),
		hooks: hooks,
		rng:   rand.New(rand.NewPCG(0x5106a7e, 0x51)),
		byID:  make(map[uint64]*seq),
		stats: Stats{FinishedByReason: map[string]int64{}},
	}
}

// Submit queues a request at time now. IDs must be unique among live requests.
func (s *Scheduler) Submit(now time.Time, r Request) {
	q := &seq{req: r, ctx: r.PromptTokens, enqueued: now, backlog: true}
	s.byID[r.ID] = q
	s.waiting = append(s.waiting, q)
	s.waitingLive++
	s.live++
	s.backlog += r.PromptTokens
}

// leaveBacklog takes q's prompt out of the prefill backlog, once: when its first token
// comes or it is aborted before.
func (s *Scheduler) leaveBacklog(q *seq) {
	if q.backlog {
		q.backlog = false
		s.backlog -= q.req.PromptTokens
	}
}

// inFlight returns the requests waiting or running that are not aborted: a request
// aborted mid-step leaves the count at once, though its KV is freed when the step ends.
func (s *Scheduler) inFlight() int { return s.live }

// Abort removes a request at time now, freeing its KV blocks at once, or at the end of
// the step in progress if that step computes it. It reports whether the request was live.
func (s *Scheduler) Abort(now time.Time, id uint64) bool {
	q, ok := s.byID[id]
	if !ok || q.aborted {
		return false
	}
	q.aborted = true
	s.live--
	s.leaveBacklog(q)
	if !q.running {
		s.waitingLive--
		s.finish(q, now, "abort")
		return true
	}
	if !s.inStep || !s.planned(q) {
		s.running = slices.DeleteFunc(s.running, func(x *seq) bool { return x == q })
		s.finish(q, now, "abort")
	}
	return true
}

// planned reports whether the step in progress computes q.
func (s *Scheduler) planned(q *seq) bool {
	return slices.ContainsFunc(s.plan, func(it planItem) bool { return it.s == q })
}

// Idle reports whether there is nothing to schedule.
func (s *Scheduler) Idle() bool { return len(s.running) == 0 && s.waitingLive == 0 }

// Stats returns a snapshot of the gauges and counters.
func (s *Scheduler) Stats() Stats {
	st := s.stats
	st.Running, st.Waiting = len(s.running), s.waitingLive
	st.PrefillBacklog = s.backlog
	st.UsedBlocks = s.kv.used
	for _, q := range s.running {
		st.UsedTokens += q.computed
	}
	for _, q := range s.waiting {
		if q.preempts > 0 && !q.aborted {
			st.Preempted++
		}
	}
	st.FinishedByReason = make(map[string]int64, len(s.stats.FinishedByReason))
	for k, v := range s.stats.FinishedByReason {
		st.FinishedByReason[k] = v
	}
	return st
}

// finishedTotal returns the number of requests that left the scheduler for any reason.
func (st Stats) finishedTotal() int64 {
	var n int64
	for _, v := range st.FinishedByReason {
		n += v
	}
	return n
}

// Step plans the next step at time now and returns its duration. It reports false when
// there is nothing to run. Step must be followed by Complete before the next Step.
func (s *Scheduler) Step(now time.Time) (time.Duration, bool) {
	if s.inStep {
		panic("enginesim: Step called twice without Complete")
	}
	s.plan = s.plan[:0]
	budget := s.p.MaxBatchedTokens
	var shape StepShape
	preempted := false
	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		n, decode := s.want(q, budget)
		for !s.reserve(q, q.computed+n) {
			victim := s.running[len(s.running)-1]
			s.preempt(victim)
			preempted = true
			if victim == q {
				break
			}
		}
		if !q.running {
			break
		}
		budget -= n
		s.add(&shape, planItem{s: q, n: n, decode: decode})
	}
	for !preempted && budget > 0 && len(s.running) < s.p.MaxNumSeqs && s.waitingLive > 0 {
		q := s.headOfLine()
		if !s.admit(q, now, budget) {
			break
		}
		n, decode := s.want(q, budget)
		budget -= n
		s.add(&shape, planItem{s: q, n: n, decode: decode})
	}
	if len(s.plan) == 0 {
		return 0, false
	}
	shape.Waiting = s.waitingLive
	s.inStep, s.stepStart = true, now
	return s.p.Timing.StepTime(shape), true
}

// want returns the tokens q computes in a step with the given budget left, and whether
// that is a decode (rather than a prefill chunk).
func (s *Scheduler) want(q *seq, budget int) (int, bool) {
	n := q.ctx - q.computed
	decode := q.generated > 0 && n == 1
	if decode {
		// Draft no further than the context window, as vLLM does, so that a request never
		// needs more KV than MaxModelLen-1 tokens and always fits in the cache alone.
		n += max(0, min(s.p.Speculation.DraftTokens, s.p.MaxModelLen-1-q.ctx))
	} else if t := s.p.LongPrefillTokenThreshold; t > 0 {
		n = min(n, t)
	}
	return min(n, budget), decode
}

func (s *Scheduler) add(shape *StepShape, it planItem) {
	s.plan = append(s.plan, it)
	if it.decode {
		shape.DecodeSeqs++
		shape.DecodeKV += it.s.computed
		return
	}
	shape.PrefillTokens += it.n
	shape.PrefillAttn += float64(it.n) * (float64(it.s.computed) + float64(it.n)/2)
}

// headOfLine returns the first live waiting request, dropping aborted ones on the way.
func (s *Scheduler) headOfLine() *seq {
	for s.waiting[0].aborted {
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
	}
	return s.waiting[0]
}

// admit moves the head of the waiting queue into the running batch if the KV cache can
// hold its first chunk, taking over cached prefix blocks first.
func (s *Scheduler) admit(q *seq, now time.Time, budget int) bool {
	var hit int
	if q.req.BlockHashes != nil {
		// Leave at least one prompt token to compute: its step yields the first token.
		hit = s.kv.match(q.req.BlockHashes, (q.req.PromptTokens-1)/s.p.BlockSize)
	}
	hits := q.req.BlockHashes[:hit]
	q.computed = hit * s.p.BlockSize
	n, _ := s.want(q, budget)
	// Check that the cached blocks and the first chunk fit before taking anything, so that
	// a request that cannot start leaves the cache and its eviction order untouched.
	if s.kv.blocksFor(q.computed+n)-hit+s.kv.freeCached(hits) > s.kv.free() {
		q.computed = 0
		return false
	}
	s.kv.acquire(hits)
	q.hashed = hit
	s.reserve(q, q.computed+n) // cannot fail: checked above
	if s.p.PrefixCaching && q.req.BlockHashes != nil && q.generated == 0 {
		s.stats.PrefixQueries += int64(q.req.PromptTokens)
		s.stats.PrefixHits += int64(q.computed)
		if q.scheduled.IsZero() {
			q.cached = q.computed
		}
	}
	s.waiting[0] = nil
	s.waiting = s.waiting[1:]
	s.waitingLive--
	q.running = true
	if q.scheduled.IsZero() {
		q.scheduled = now
	}
	s.running = append(s.running, q)
	return true
}

// reserve makes q hold enough KV blocks for tokens tokens, reporting false (and taking
// nothing) when the cache cannot provide them.
func (s *Scheduler) reserve(q *seq, tokens int) bool {
	need := s.kv.blocksFor(tokens) - q.plain - q.hashed
	if need <= 0 {
		return true
	}
	if !s.kv.allocate(need) {
		return false
	}
	q.plain += need
	return true
}

// preempt evicts a running request by recompute: its KV is freed and it returns to the
// front of the waiting queue, to prefill its prompt and output again.
func (s *Scheduler) preempt(q *seq) {
	s.running = slices.DeleteFunc(s.running, func(x *seq) bool { return x == q })
	s.releaseKV(q)
	q.running = false
	q.computed = 0
	q.preempts++
	s.stats.Preemptions++
	s.waiting = slices.Insert(s.waiting, 0, q)
	s.waitingLive++
}

func (s *Scheduler) releaseKV(q *seq) {
	s.kv.release(q.plain)
	if q.hashed > 0 {
		s.kv.releaseShared(q.req.BlockHashes[:q.hashed])
	}
	q.plain, q.hashed = 0, 0
}
