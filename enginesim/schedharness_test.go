package enginesim

import (
	"slices"
	"testing"
	"time"
)

// The scheduler tests drive a Scheduler by hand in virtual time with small profiles whose
// numbers can be followed on paper: 4-token blocks, an 8-token step budget and steps of
// exactly 10 ms, so every expected value below is derived in the comments beside it.

// schedStep is the duration of every step of schedProfile.
const schedStep = 10 * time.Millisecond

// schedProfile returns a small valid profile: 4-token blocks, 16 of them (64 tokens),
// an 8-token step budget, up to 4 running sequences and steps of exactly 10 ms.
func schedProfile() Profile {
	return Profile{
		Name: "sched-test", Model: "sched-test-model",
		MaxModelLen: 64, MaxNumSeqs: 4, MaxBatchedTokens: 8, BlockSize: 4, NumBlocks: 16, Vocab: 100,
		Timing: Timing{StepBase: schedStep.Seconds()},
	}
}

// schedReq returns a request arriving at epoch. MaxTokens carries the ID so that the
// Finished records, which have no ID, can be told apart.
func schedReq(id uint64, prompt, output int) Request {
	return Request{ID: id, PromptTokens: prompt, OutputTokens: output, FinishReason: "length", MaxTokens: int(id), Arrival: epoch}
}

// tokenCall is one call of Hooks.Tokens.
type tokenCall struct {
	Gap time.Duration
	N   int
}

// schedHarness drives a Scheduler step by step and records everything it reports. After
// every completed step it checks the emissions against the requests and the KV cache
// against its invariants.
type schedHarness struct {
	t   *testing.T
	p   Profile
	s   *Scheduler
	now time.Time // current time; a planned step ends at end
	end time.Time

	reqs     map[uint64]Request
	aborted  map[uint64]bool // Abort returned true
	emitted  map[uint64]int  // output tokens delivered
	emits    [][]Emission    // per completed step
	steps    []int           // Hooks.Step
	tokens   []tokenCall     // Hooks.Tokens
	finished map[uint64]Finished
	finishes map[uint64]int // Hooks.Finished calls per ID
}

func newSchedHarness(t *testing.T, p Profile) *schedHarness {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &schedHarness{
		t: t, p: p, now: epoch,
		reqs: map[uint64]Request{}, aborted: map[uint64]bool{}, emitted: map[uint64]int{},
		finished: map[uint64]Finished{}, finishes: map[uint64]int{},
	}
	h.s = NewScheduler(p, Hooks{
		Tokens: func(gap time.Duration, n int) { h.tokens = append(h.tokens, tokenCall{gap, n}) },
		Finished: func(f Finished) {
			id := uint64(f.MaxTokens)
			h.finished[id] = f
			h.finishes[id]++
		},
		Step: func(n int) { h.steps = append(h.steps, n) },
	})
	return h
}

// submit queues requests at the current time.
func (h *schedHarness) submit(rs ...Request) {
	for _, r := range rs {
		h.reqs[r.ID] = r
		delete(h.aborted, r.ID)
		h.emitted[r.ID] = 0
		h.s.Submit(h.now, r)
	}
	h.checkCounts()
}

// abort aborts id at time at and returns what Abort reported.
func (h *schedHarness) abort(at time.Time, id uint64) bool {
	ok := h.s.Abort(at, id)
	if ok {
		h.aborted[id] = true
	}
	h.checkCounts()
	return ok
}

// checkCounts holds the counts the engines' admission caps read (caps.go) to the
// requests as the harness knows them: in flight, every live request that has not all its
// tokens; in the prefill backlog, the whole prompt of every live one with none yet, also
// after a preemption or while an abort waits for the end of its step.
func (h *schedHarness) checkCounts() {
	h.t.Helper()
	live, backlog := 0, 0
	for id, r := range h.reqs {
		if h.aborted[id] || h.emitted[id] >= r.OutputTokens {
			continue
		}
		live++
		if h.emitted[id] == 0 {
			backlog += r.PromptTokens
		}
	}
	if got, st := h.s.inFlight(), h.s.Stats(); got != live || st.PrefillBacklog != backlog {
		h.t.Fatalf("in flight %d, prefill backlog %d; the requests say %d and %d", got, st.PrefillBacklog, live, backlog)
	}
}

// plan calls Step at the current time and remembers when the step ends.
func (h *schedHarness) plan() bool {
	h.t.Helper()
	d, ok := h.s.Step(h.now)
	if ok {
		h.end = h.now.Add(d)
	}
	return ok
}

// complete applies the planned step at its end, checks what it produced and returns a
// copy of its emissions.
func (h *schedHarness) complete() []Emission {
	h.t.Helper()
	h.now = h.end
	es := slices.Clone(h.s.Complete(h.now))
	for _, e := range es {
		r, ok := h.reqs[e.ID]
		switch {
		case !ok:
			h.t.Fatalf("emission for unknown request %d", e.ID)
		case h.aborted[e.ID]:
			h.t.Fatalf("emission %+v for request %d after it was aborted", e, e.ID)
		case e.Tokens <= 0:
			h.t.Fatalf("emission %+v carries no tokens", e)
		}
		h.emitted[e.ID] += e.Tokens
		got := h.emitted[e.ID]
		if got > r.OutputTokens {
			h.t.Fatalf("request %d got %d tokens, wants %d", e.ID, got, r.OutputTokens)
		}
		if e.Done != (got == r.OutputTokens) || e.Done && e.Reason != r.FinishReason {
			h.t.Fatalf("emission %+v of request %d at %d/%d tokens: wrong Done or Reason", e, e.ID, got, r.OutputTokens)
		}
	}
	if n := h.steps[len(h.steps)-1]; n > h.p.MaxBatchedTokens {
		h.t.Fatalf("step %d computed %d tokens, budget %d", len(h.steps), n, h.p.MaxBatchedTokens)
	}
	h.emits = append(h.emits, es)
	checkSchedKV(h.t, h.s)
	h.checkCounts()
	return es
}

// step runs one whole step; there must be something to run.
func (h *schedHarness) step() []Emission {
	h.t.Helper()
	if !h.plan() {
		h.t.Fatalf("step %d: Step found nothing to run; stats %+v", len(h.steps)+1, h.s.Stats())
	}
	return h.complete()
}

// run steps until the scheduler is idle. Step must find work whenever the scheduler is
// not idle, and none once it is.
func (h *schedHarness) run() {
	h.t.Helper()
	for i := 0; !h.s.Idle(); i++ {
		if i == 10_000 {
			h.t.Fatalf("not idle after %d steps: %+v", i, h.s.Stats())
		}
		h.step()
	}
	if _, ok := h.s.Step(h.now); ok {
		h.t.Fatal("idle scheduler planned a step")
	}
}

// emittedPerStep returns the tokens id received in each completed step.
func (h *schedHarness) emittedPerStep(id uint64) []int {
	out := make([]int, len(h.emits))
	for i, es := range h.emits {
		for _, e := range es {
			if e.ID == id {
				out[i] += e.Tokens
			}
		}
	}
	return out
}

// firstStep returns the 1-based step in which id received its first token, or 0.
func (h *schedHarness) firstStep(id uint64) int {
	for i, n := range h.emittedPerStep(id) {
		if n > 0 {
			return i + 1
		}
	}
	return 0
}

// at returns the time the k-th step (1-based) ends when steps run back to back from
// epoch with the fixed duration of schedProfile.
func at(k int) time.Time { return epoch.Add(time.Duration(k) * schedStep) }
