package enginesim

import (
	"slices"
	"testing"
	"time"
)

func TestStepTimeTerms(t *testing.T) {
	all := Timing{StepBase: 1e-3, PerPrefillToken: 1e-6, PerPrefillAttn: 1e-9, PerDecodeSeq: 1e-4, PerKVToken: 1e-7, PerWaitingSeq: 1e-5}
	cases := []struct {
		name   string
		timing Timing
		shape  StepShape
		want   time.Duration
	}{
		{"zero timing costs nothing", Timing{}, StepShape{PrefillTokens: 100, DecodeSeqs: 3, Waiting: 9}, 0},
		{"base alone", Timing{StepBase: 0.002}, StepShape{}, 2 * time.Millisecond},
		{"base is paid by every shape", Timing{StepBase: 0.002}, StepShape{PrefillTokens: 7, DecodeSeqs: 2}, 2 * time.Millisecond},
		{"per prefill token", Timing{PerPrefillToken: 1e-6}, StepShape{PrefillTokens: 250}, 250 * time.Microsecond},
		{"per prefill attention position", Timing{PerPrefillAttn: 1e-9}, StepShape{PrefillAttn: 32000}, 32 * time.Microsecond},
		{"per decoding sequence", Timing{PerDecodeSeq: 1e-4}, StepShape{DecodeSeqs: 3}, 300 * time.Microsecond},
		{"per resident KV token", Timing{PerKVToken: 1e-7}, StepShape{DecodeKV: 500}, 50 * time.Microsecond},
		{"per waiting request", Timing{PerWaitingSeq: 1e-5}, StepShape{Waiting: 7}, 70 * time.Microsecond},
		{"terms add up", all, StepShape{PrefillTokens: 8, PrefillAttn: 32, DecodeSeqs: 2, DecodeKV: 10, Waiting: 3},
			time.Millisecond + 8*time.Microsecond + 32*time.Nanosecond + 200*time.Microsecond + time.Microsecond + 30*time.Microsecond},
		{"rounded to the nearest nanosecond", Timing{StepBase: 1.4e-9}, StepShape{}, time.Nanosecond},
		{"half a nanosecond rounds up", Timing{StepBase: 2.5e-9}, StepShape{}, 3 * time.Nanosecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.timing.StepTime(tc.shape); got != tc.want {
				t.Errorf("StepTime(%+v) = %v, want %v", tc.shape, got, tc.want)
			}
		})
	}
}

// TestStepShapeFromScheduler checks the shape the scheduler hands to Timing: each term
// has a distinct magnitude, so a wrong count in any field changes the duration.
func TestStepShapeFromScheduler(t *testing.T) {
	tim := Timing{StepBase: 1e-3, PerPrefillToken: 1e-6, PerPrefillAttn: 1e-9, PerDecodeSeq: 1e-4, PerKVToken: 1e-7, PerWaitingSeq: 1e-5}
	cases := []struct {
		name    string
		maxSeqs int
		reqs    []Request
		want    []StepShape
	}{
		{"prefill then decode reads the resident KV", 4, []Request{schedReq(1, 8, 3)}, []StepShape{
			{PrefillTokens: 8, PrefillAttn: 8 * (0 + 4)},
			{DecodeSeqs: 1, DecodeKV: 8},
			{DecodeSeqs: 1, DecodeKV: 9},
		}},
		{"second chunk attends to the first", 4, []Request{schedReq(1, 12, 1)}, []StepShape{
			{PrefillTokens: 8, PrefillAttn: 8 * (0 + 4)},
			{PrefillTokens: 4, PrefillAttn: 4 * (8 + 2)},
		}},
		{"requests left waiting after admission", 1, []Request{schedReq(1, 4, 1), schedReq(2, 4, 1), schedReq(3, 4, 1)}, []StepShape{
			{PrefillTokens: 4, PrefillAttn: 8, Waiting: 2},
			{PrefillTokens: 4, PrefillAttn: 8, Waiting: 1},
			{PrefillTokens: 4, PrefillAttn: 8},
		}},
		{"decode and prefill chunk in one step", 4, []Request{schedReq(1, 4, 2), schedReq(2, 6, 1)}, []StepShape{
			{PrefillTokens: 8, PrefillAttn: 4*2 + 4*2},                               // 1: 4 tokens, 2: first 4 tokens
			{PrefillTokens: 2, PrefillAttn: 2 * (4 + 1), DecodeSeqs: 1, DecodeKV: 4}, // 1 decodes, 2 ends its prompt
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.Timing, p.MaxNumSeqs = tim, tc.maxSeqs
			h := newSchedHarness(t, p)
			h.submit(tc.reqs...)
			for i, shape := range tc.want {
				start := h.now
				h.step()
				if got, want := h.now.Sub(start), tim.StepTime(shape); got != want {
					t.Errorf("step %d took %v, want %v for shape %+v", i+1, got, want, shape)
				}
			}
			h.run()
			if len(h.steps) != len(tc.want) {
				t.Errorf("ran %d steps, want %d", len(h.steps), len(tc.want))
			}
		})
	}
}

func TestChunkedPrefill(t *testing.T) {
	cases := []struct {
		name      string
		prompt    int
		output    int
		wantSteps []int // tokens computed per step (Hooks.Step)
	}{
		{"prompt below the budget", 3, 2, []int{3, 1}},
		{"prompt equal to the budget", 8, 2, []int{8, 1}},
		{"one token over the budget", 9, 3, []int{8, 1, 1, 1}},
		{"several chunks", 20, 3, []int{8, 8, 4, 1, 1}},
		{"single output token", 17, 1, []int{8, 8, 1}},
	}
	const (
		apiLatency = 5 * time.Millisecond // arrival to Submit
		queued     = 2 * time.Millisecond // Submit to the first Step
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newSchedHarness(t, schedProfile())
			h.now = epoch.Add(apiLatency)
			h.submit(schedReq(1, tc.prompt, tc.output))
			h.now = h.now.Add(queued)
			start := h.now
			h.run()
			if !slices.Equal(h.steps, tc.wantSteps) {
				t.Fatalf("tokens per step = %v, want %v", h.steps, tc.wantSteps)
			}
			// The prompt completes in step c, which yields the first token; every later
			// step yields one more.
			c := len(tc.wantSteps) - tc.output + 1
			wantEmit := make([]int, len(tc.wantSteps))
			for i := c - 1; i < len(wantEmit); i++ {
				wantEmit[i] = 1
			}
			if got := h.emittedPerStep(1); !slices.Equal(got, wantEmit) {
				t.Errorf("tokens emitted per step = %v, want %v", got, wantEmit)
			}
			stepEnd := func(k int) time.Time { return start.Add(time.Duration(k) * schedStep) }
			want := Finished{
				ID: 1, Reason: "length", PromptTokens: tc.prompt, OutputTokens: tc.output, MaxTokens: 1,
				Queue:   queued,
				Prefill: stepEnd(c).Sub(start),
				Decode:  stepEnd(len(tc.wantSteps)).Sub(stepEnd(c)),
				TTFT:    stepEnd(c).Sub(epoch),
				E2E:     stepEnd(len(tc.wantSteps)).Sub(epoch),
			}
			if got := h.finished[1]; got != want {
				t.Errorf("Finished = %+v\nwant       %+v", got, want)
			}
			st := h.s.Stats()
			if st.PromptTokens != int64(tc.prompt) || st.GenerationTokens != int64(tc.output) || st.Steps != int64(len(tc.wantSteps)) {
				t.Errorf("stats prompt %d, generation %d, steps %d; want %d, %d, %d",
					st.PromptTokens, st.GenerationTokens, st.Steps, tc.prompt, tc.output, len(tc.wantSteps))
			}
		})
	}
}

func TestFCFSAndMaxNumSeqs(t *testing.T) {
	cases := []struct {
		name      string
		maxSeqs   int
		prompts   []int // one request each (IDs 1, 2, ...), 2 output tokens, submitted in order
		wantFirst []int // step of each request's first token
	}{
		{"one at a time", 1, []int{4, 4, 4}, []int{1, 3, 5}},
		{"two at a time", 2, []int{4, 4, 4, 4}, []int{1, 1, 3, 3}},
		// 1 takes the whole budget; 2 gets the 7 tokens left beside 1's decode and ends
		// its prompt in step 3, where 3 starts with the budget left over.
		{"bounded by the token budget", 4, []int{8, 8, 8}, []int{1, 3, 4}},
		// Short prompts queue behind a long one: they start only with the budget the
		// long prompt's last chunk leaves.
		{"short prompts wait behind a long one", 4, []int{20, 1, 1}, []int{3, 3, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.MaxNumSeqs = tc.maxSeqs
			h := newSchedHarness(t, p)
			for i, n := range tc.prompts {
				h.submit(schedReq(uint64(i+1), n, 2))
			}
			for !h.s.Idle() {
				if !h.plan() {
					t.Fatal("Step found nothing to run")
				}
				if st := h.s.Stats(); st.Running > tc.maxSeqs {
					t.Fatalf("step %d runs %d sequences, max %d", len(h.steps)+1, st.Running, tc.maxSeqs)
				}
				h.complete()
			}
			var got []int
			for i := range tc.prompts {
				got = append(got, h.firstStep(uint64(i+1)))
			}
			if !slices.Equal(got, tc.wantFirst) {
				t.Errorf("first token in steps %v, want %v", got, tc.wantFirst)
			}
		})
	}
}

// TestFCFSHeadOfLineBlocking checks that a request that would fit in the KV cache does
// not overtake an earlier one that does not.
func TestFCFSHeadOfLineBlocking(t *testing.T) {
	p := schedProfile()
	p.NumBlocks, p.MaxModelLen = 4, 16
	h := newSchedHarness(t, p)
	// 1 fills the budget in step 1 and then holds 3 to 4 of the 4 blocks. 2's first
	// chunk (7 tokens) needs 2 blocks; 3 needs one, which is free until step 5.
	h.submit(schedReq(1, 8, 8), schedReq(2, 8, 1), schedReq(3, 2, 1))
	for range 7 { // 1 finishes in step 8
		h.step()
		if st := h.s.Stats(); st.Running != 1 || st.Waiting != 2 {
			t.Fatalf("step %d: running %d, waiting %d; want 1 and 2", len(h.steps), st.Running, st.Waiting)
		}
	}
	h.run()
	if got := []int{h.firstStep(1), h.firstStep(2), h.firstStep(3)}; !slices.Equal(got, []int{1, 9, 10}) {
		t.Errorf("first tokens in steps %v, want [1 9 10]", got)
	}
}

func TestBudgetSharing(t *testing.T) {
	type submission struct {
		before int // submitted before this step (1-based)
		req    Request
	}
	cases := []struct {
		name      string
		spec      Speculation
		subs      []submission
		wantSteps []int
	}{
		{"running decode goes before a new prefill", Speculation{}, []submission{
			{1, schedReq(1, 4, 4)}, {2, schedReq(2, 20, 1)},
		}, []int{4, 1 + 7, 1 + 7, 1 + 6}},
		{"many decodes and a long prompt", Speculation{}, []submission{
			{1, schedReq(1, 2, 6)}, {1, schedReq(2, 2, 6)}, {1, schedReq(3, 2, 6)}, {2, schedReq(4, 30, 1)},
		}, []int{6, 3 + 5, 3 + 5, 3 + 5, 3 + 5, 3 + 5, 5}},
		{"speculative decodes count 1+k tokens", Speculation{DraftTokens: 2}, []submission{
			{1, schedReq(1, 2, 4)}, {1, schedReq(2, 2, 4)}, {2, schedReq(3, 20, 1)},
		}, []int{4, 3 + 3 + 2, 3 + 3 + 2, 3 + 3 + 2, 8, 6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.Speculation = tc.spec
			h := newSchedHarness(t, p)
			for k := 1; len(tc.subs) > 0 || !h.s.Idle(); k++ {
				for len(tc.subs) > 0 && tc.subs[0].before == k {
					h.submit(tc.subs[0].req)
					tc.subs = tc.subs[1:]
				}
				h.step()
			}
			if !slices.Equal(h.steps, tc.wantSteps) {
				t.Errorf("tokens per step = %v, want %v", h.steps, tc.wantSteps)
			}
			// A request that has its first token gets a token in every step until done.
			for id := range h.reqs {
				per := h.emittedPerStep(id)
				first, last := -1, -1
				for i, n := range per {
					if n > 0 {
						last = i
						if first < 0 {
							first = i
						}
					}
				}
				if first < 0 || slices.Contains(per[first:last+1], 0) {
					t.Errorf("request %d skipped a decode step: tokens per step %v", id, per)
				}
			}
		})
	}
}

// TestPreemptRecompute follows one preemption through: two requests grow in lockstep
// until the KV cache is full, the later one is preempted to the front of the queue,
// recomputes its prompt and output, and finishes with all its tokens.
func TestPreemptRecompute(t *testing.T) {
	p := schedProfile()
	p.NumBlocks, p.MaxModelLen, p.MaxBatchedTokens = 4, 16, 16
	h := newSchedHarness(t, p)
	h.submit(schedReq(1, 4, 8), schedReq(2, 4, 8))
	for range 5 {
		h.step() // after step 5 each holds 8 computed tokens in 2 blocks: the cache is full
	}
	if st := h.s.Stats(); st.UsedBlocks != 4 || st.Preemptions != 0 {
		t.Fatalf("after step 5: used %d blocks, %d preemptions; want 4 and 0", st.UsedBlocks, st.Preemptions)
	}
	h.submit(schedReq(3, 4, 1))
	// Step 6: 1 needs a third block. 2, admitted last, is preempted and its two blocks
	// freed; 1 takes one of them. No request is admitted in a step that preempts.
	if !h.plan() {
		t.Fatal("step 6 found nothing to run")
	}
	want := Stats{Running: 1, Waiting: 2, Preempted: 1, Preemptions: 1, UsedBlocks: 3}
	if st := h.s.Stats(); st.Running != want.Running || st.Waiting != want.Waiting || st.Preempted != want.Preempted ||
		st.Preemptions != want.Preemptions || st.UsedBlocks != want.UsedBlocks {
		t.Fatalf("step 6 planned: %+v\nwant running %d, waiting %d, preempted %d, preemptions %d, used blocks %d",
			st, want.Running, want.Waiting, want.Preempted, want.Preemptions, want.UsedBlocks)
	}
	h.complete()
	// Steps 7 and 8: 2 heads the queue and needs 3 blocks to recompute its 9 tokens; 3
	// would fit in the one free block but waits behind it. 1 finishes in step 8.
	for range 2 {
		h.step()
		if st := h.s.Stats(); st.Waiting != 2 || st.Preempted != 1 {
			t.Fatalf("step %d: waiting %d, preempted %d; want 2 and 1", len(h.steps), st.Waiting, st.Preempted)
		}
	}
	h.run()
	// Step 9 recomputes 2's prompt and 5 generated tokens (9) and 3's prompt (4).
	if want := []int{8, 2, 2, 2, 2, 1, 1, 1, 9 + 4, 1, 1}; !slices.Equal(h.steps, want) {
		t.Errorf("tokens per step = %v, want %v", h.steps, want)
	}
	if got, want := h.emittedPerStep(2), []int{1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("request 2 tokens per step = %v, want %v", got, want)
	}
	wantF := Finished{
		ID: 2, Reason: "length", PromptTokens: 4, OutputTokens: 8, MaxTokens: 2, Preemptions: 1,
		Prefill: schedStep, Decode: at(11).Sub(at(1)), TTFT: schedStep, E2E: at(11).Sub(epoch),
	}
	if got := h.finished[2]; got != wantF {
		t.Errorf("request 2 Finished = %+v\nwant                 %+v", got, wantF)
	}
	if h.finished[1].Preemptions != 0 || h.finished[3].Preemptions != 0 {
		t.Errorf("requests 1 and 3 preempted %d and %d times, want 0", h.finished[1].Preemptions, h.finished[3].Preemptions)
	}
	st := h.s.Stats()
	if st.Preemptions != 1 || st.Preempted != 0 || st.PromptTokens != 4+4+9+4 || st.GenerationTokens != 8+8+1 {
		t.Errorf("final stats: preemptions %d, preempted %d, prompt %d, generation %d; want 1, 0, 21, 17",
			st.Preemptions, st.Preempted, st.PromptTokens, st.GenerationTokens)
	}
	// 2's first token after the recompute arrives 40 ms after its previous one.
	var wantTokens []tokenCall
	for range 4*2 + 3 {
		wantTokens = append(wantTokens, tokenCall{schedStep, 1})
	}
	wantTokens = append(wantTokens, tokenCall{4 * schedStep, 1}, tokenCall{schedStep, 1}, tokenCall{schedStep, 1})
	if !slices.Equal(h.tokens, wantTokens) {
		t.Errorf("Tokens hook calls = %v, want %v", h.tokens, wantTokens)
	}
}

func TestPreemptVictim(t *testing.T) {
	cases := []struct {
		name      string
		numBlocks int
		reqs      []Request
		want      map[uint64]int // Finished.Preemptions by ID
	}{
		// Three requests of 2 blocks each fill 6 blocks; when 1 needs a third, 3 goes.
		{"the last admitted is preempted", 6, []Request{schedReq(1, 4, 8), schedReq(2, 4, 8), schedReq(3, 4, 8)},
			map[uint64]int{1: 0, 2: 0, 3: 1}},
		// 2, the last admitted, is the one that cannot grow: it preempts itself and 1 runs on.
		{"the requester is the last and preempts itself", 4, []Request{schedReq(1, 4, 4), schedReq(2, 8, 8)},
			map[uint64]int{1: 0, 2: 1}},
		{"no preemption when everything fits", 16, []Request{schedReq(1, 4, 8), schedReq(2, 4, 8), schedReq(3, 4, 8)},
			map[uint64]int{1: 0, 2: 0, 3: 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.NumBlocks, p.MaxModelLen, p.MaxBatchedTokens = tc.numBlocks, 16, 16
			h := newSchedHarness(t, p)
			h.submit(tc.reqs...)
			h.run()
			var total int64
			for id, want := range tc.want {
				f := h.finished[id]
				if f.Preemptions != want || f.OutputTokens != h.reqs[id].OutputTokens || h.emitted[id] != f.OutputTokens {
					t.Errorf("request %d: %d preemptions, %d tokens (%d emitted); want %d preemptions, %d tokens",
						id, f.Preemptions, f.OutputTokens, h.emitted[id], want, h.reqs[id].OutputTokens)
				}
				total += int64(want)
			}
			if st := h.s.Stats(); st.Preemptions != total || st.UsedBlocks != 0 {
				t.Errorf("stats: %d preemptions, %d used blocks; want %d and 0", st.Preemptions, st.UsedBlocks, total)
			}
		})
	}
}

// A short prompt behind a long one's prefill: without vLLM's
// --long-prefill-token-threshold the long prompt takes each step's whole budget and the
// short one waits for the last chunk; with a threshold of 4 a chunk leaves the other 4
// tokens of the budget to it, and it gets its first token in the first step.
func TestLongPrefillTokenThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold int
		steps     []int // tokens computed per step until the short prompt's first token
		first     int   // the step that gives the short prompt its first token
	}{
		{0, []int{8, 8, 8, 3}, 4},
		{4, []int{7}, 1},
	} {
		p := schedProfile()
		p.LongPrefillTokenThreshold = tc.threshold
		h := newSchedHarness(t, p)
		h.submit(schedReq(1, 24, 1), schedReq(2, 3, 1))
		for range len(tc.steps) {
			h.step()
		}
		if !slices.Equal(h.steps, tc.steps) || h.firstStep(2) != tc.first {
			t.Errorf("threshold %d: tokens per step %v, the short prompt's first token in step %d; want %v and %d",
				tc.threshold, h.steps, h.firstStep(2), tc.steps, tc.first)
		}
	}
	bad := schedProfile()
	bad.LongPrefillTokenThreshold = -1
	if bad.Validate() == nil {
		t.Error("a negative threshold validates")
	}
}
