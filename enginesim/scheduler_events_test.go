package enginesim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestAbort(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"waiting request", func(t *testing.T) {
			p := schedProfile()
			p.MaxNumSeqs = 1
			h := newSchedHarness(t, p)
			h.submit(schedReq(1, 4, 3), schedReq(2, 4, 2))
			h.step()
			if st := h.s.Stats(); st.Waiting != 1 {
				t.Fatalf("waiting %d, want 1", st.Waiting)
			}
			if !h.abort(h.now, 2) {
				t.Fatal("Abort of a waiting request = false")
			}
			if st := h.s.Stats(); st.Waiting != 0 || st.Running != 1 {
				t.Errorf("after abort: waiting %d, running %d; want 0 and 1", st.Waiting, st.Running)
			}
			want := Finished{ID: 2, Reason: "abort", PromptTokens: 4, MaxTokens: 2, E2E: schedStep}
			if got := h.finished[2]; got != want {
				t.Errorf("Finished = %+v, want %+v", got, want)
			}
			if h.abort(h.now, 2) {
				t.Error("second Abort = true")
			}
			h.run() // fails on any emission for 2
			if h.emitted[2] != 0 || h.finishes[2] != 1 || h.s.Stats().FinishedByReason["abort"] != 1 {
				t.Errorf("request 2: %d tokens, %d finishes, stats %v", h.emitted[2], h.finishes[2], h.s.Stats().FinishedByReason)
			}
		}},
		{"running request between steps", func(t *testing.T) {
			h := newSchedHarness(t, schedProfile())
			h.submit(schedReq(1, 8, 4))
			h.step()
			if st := h.s.Stats(); st.UsedBlocks != 2 || st.UsedTokens != 8 {
				t.Fatalf("used %d blocks, %d tokens; want 2 and 8", st.UsedBlocks, st.UsedTokens)
			}
			if !h.abort(h.now, 1) {
				t.Fatal("Abort = false")
			}
			if st := h.s.Stats(); st.UsedBlocks != 0 || st.UsedTokens != 0 || st.Running != 0 || !h.s.Idle() {
				t.Errorf("after abort: %+v, want nothing held or running", st)
			}
			want := Finished{ID: 1, Reason: "abort", PromptTokens: 8, OutputTokens: 1, MaxTokens: 1, Prefill: schedStep, TTFT: schedStep, E2E: schedStep}
			if got := h.finished[1]; got != want {
				t.Errorf("Finished = %+v, want %+v", got, want)
			}
			h.run()
		}},
		{"running request during its step", func(t *testing.T) {
			h := newSchedHarness(t, schedProfile())
			h.submit(schedReq(1, 8, 4))
			h.step()
			h.plan()
			if !h.abort(h.now.Add(schedStep/2), 1) {
				t.Fatal("Abort = false")
			}
			if h.abort(h.now.Add(schedStep/2), 1) {
				t.Error("second Abort during the step = true")
			}
			if st := h.s.Stats(); st.UsedBlocks != 3 || h.finishes[1] != 0 {
				t.Errorf("before Complete: %d used blocks, %d finishes; want the 3 blocks of the step still held and 0", st.UsedBlocks, h.finishes[1])
			}
			if es := h.complete(); len(es) != 0 {
				t.Errorf("emissions %+v, want none", es)
			}
			if st := h.s.Stats(); st.UsedBlocks != 0 || st.Running != 0 {
				t.Errorf("after Complete: used %d blocks, running %d; want 0 and 0", st.UsedBlocks, st.Running)
			}
			if f := h.finished[1]; f.Reason != "abort" || f.OutputTokens != 1 || f.E2E != 2*schedStep {
				t.Errorf("Finished = %+v, want an abort after 1 token at the end of the step", f)
			}
		}},
		{"running request left out of the step in progress", func(t *testing.T) {
			// With a 3-token budget and 2 drafts, 1's decode fills every step, so 2,
			// though running, is not in step 2. Its blocks are freed at once.
			p := schedProfile()
			p.MaxBatchedTokens, p.Speculation = 3, Speculation{DraftTokens: 2}
			h := newSchedHarness(t, p)
			h.submit(schedReq(1, 2, 5), schedReq(2, 1, 5))
			h.step()
			h.plan()
			if st := h.s.Stats(); st.Running != 2 || st.UsedBlocks != 3 {
				t.Fatalf("step 2 planned: running %d, used %d blocks; want 2 and 3", st.Running, st.UsedBlocks)
			}
			if !h.abort(h.now.Add(schedStep/2), 2) {
				t.Fatal("Abort = false")
			}
			if st := h.s.Stats(); st.Running != 1 || st.UsedBlocks != 2 || h.finishes[2] != 1 {
				t.Errorf("after abort: running %d, used %d blocks, %d finishes; want 1, 2, 1", st.Running, st.UsedBlocks, h.finishes[2])
			}
			if f := h.finished[2]; f.E2E != schedStep+schedStep/2 {
				t.Errorf("E2E = %v, want the abort time %v", f.E2E, schedStep+schedStep/2)
			}
			h.complete()
			h.run()
		}},
		{"unknown and finished requests", func(t *testing.T) {
			h := newSchedHarness(t, schedProfile())
			if h.abort(h.now, 7) {
				t.Error("Abort of an unknown request = true")
			}
			h.submit(schedReq(1, 4, 1))
			h.run()
			if h.abort(h.now, 1) {
				t.Error("Abort of a finished request = true")
			}
			if got := h.s.Stats().FinishedByReason; got["abort"] != 0 || got["length"] != 1 {
				t.Errorf("FinishedByReason = %v", got)
			}
		}},
		{"ID reused after an abort during a step", func(t *testing.T) {
			h := newSchedHarness(t, schedProfile())
			h.submit(schedReq(1, 4, 3))
			h.step()
			h.plan()
			if !h.abort(h.now, 1) {
				t.Fatal("Abort = false")
			}
			h.submit(schedReq(1, 4, 2)) // the old request is gone for the caller
			h.complete()
			if !h.abort(h.now, 1) {
				t.Fatal("Abort of the new request with the reused ID = false")
			}
			if h.finishes[1] != 2 || !h.s.Idle() {
				t.Errorf("%d finishes, idle %v; want 2 and idle", h.finishes[1], h.s.Idle())
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

func TestSpecDecoding(t *testing.T) {
	cases := []struct {
		name        string
		spec        Speculation
		maxModelLen int // 0: schedProfile's
		numBlocks   int // 0: schedProfile's
		prompt      int
		output      int
		wantEmit    []int // tokens emitted per step
		wantSteps   []int // tokens computed per step
		wantStats   [3]int64
	}{
		// The last decode still drafts 2 and accepts both; only 1 token is left to emit.
		{"all accepted", Speculation{2, 1}, 0, 0, 4, 8, []int{1, 3, 3, 1}, []int{4, 3, 3, 3}, [3]int64{3, 6, 6}},
		{"none accepted", Speculation{2, 0}, 0, 0, 4, 4, []int{1, 1, 1, 1}, []int{4, 3, 3, 3}, [3]int64{3, 6, 0}},
		{"speculation off", Speculation{}, 0, 0, 4, 3, []int{1, 1, 1}, []int{4, 1, 1}, [3]int64{}},
		// Prompt 10 ends in step 2 (context 11). Drafts stop at the context window, as in
		// vLLM: 3 (to context 15), then none.
		{"drafts stop at the context window", Speculation{3, 1}, 16, 0, 10, 6, []int{0, 1, 4, 1}, []int{8, 2, 4, 1}, [3]int64{1, 3, 3}},
		// The window is the whole cache: drafting past it would need a 5th block, which a
		// request alone could never get.
		{"drafts fit a full cache", Speculation{2, 0}, 16, 4, 12, 4, []int{0, 1, 1, 1, 1}, []int{8, 4, 3, 2, 1}, [3]int64{2, 3, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.Speculation = tc.spec
			if tc.maxModelLen > 0 {
				p.MaxModelLen = tc.maxModelLen
			}
			if tc.numBlocks > 0 {
				p.NumBlocks = tc.numBlocks
			}
			h := newSchedHarness(t, p)
			h.submit(schedReq(1, tc.prompt, tc.output))
			h.run()
			if got := h.emittedPerStep(1); !slices.Equal(got, tc.wantEmit) {
				t.Errorf("tokens emitted per step = %v, want %v", got, tc.wantEmit)
			}
			if !slices.Equal(h.steps, tc.wantSteps) {
				t.Errorf("tokens computed per step = %v, want %v", h.steps, tc.wantSteps)
			}
			st := h.s.Stats()
			if got := [3]int64{st.SpecDrafts, st.SpecDraftTokens, st.SpecAccepted}; got != tc.wantStats {
				t.Errorf("drafts, draft tokens, accepted = %v, want %v", got, tc.wantStats)
			}
			if st.GenerationTokens != int64(tc.output) || h.finished[1].OutputTokens != tc.output || st.Preemptions != 0 {
				t.Errorf("generated %d tokens (Finished %d), %d preemptions; want %d and none",
					st.GenerationTokens, h.finished[1].OutputTokens, st.Preemptions, tc.output)
			}
		})
	}
}

// TestSpecDecodingStatsAddUp runs many speculative requests and checks the counters
// against what the steps computed and emitted.
func TestSpecDecodingStatsAddUp(t *testing.T) {
	cases := []struct {
		name string
		rate float64
	}{
		{"never accepted", 0},
		{"sometimes accepted", 0.6},
		{"always accepted", 1},
	}
	const k = 3
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.Speculation = Speculation{DraftTokens: k, AcceptRate: tc.rate}
			p.MaxNumSeqs = 2 // 2 x (1+k) fits the budget: every decode drafts k
			h := newSchedHarness(t, p)
			for id := uint64(1); id <= 6; id++ {
				h.submit(schedReq(id, 3, 20))
			}
			h.run()
			st := h.s.Stats()
			if st.SpecDraftTokens != k*st.SpecDrafts || st.SpecAccepted > st.SpecDraftTokens {
				t.Errorf("drafts %d, draft tokens %d, accepted %d: want k tokens per draft and accepted <= drafted",
					st.SpecDrafts, st.SpecDraftTokens, st.SpecAccepted)
			}
			switch tc.rate {
			case 0:
				if st.SpecAccepted != 0 {
					t.Errorf("accepted %d at rate 0", st.SpecAccepted)
				}
			case 1:
				if st.SpecAccepted != st.SpecDraftTokens {
					t.Errorf("accepted %d of %d at rate 1", st.SpecAccepted, st.SpecDraftTokens)
				}
			}
			// Every emission is 1 token plus accepted drafts, less what passed the end.
			var emitted int64
			for _, n := range h.emitted {
				emitted += int64(n)
			}
			if decodes := emitted - 6; st.GenerationTokens != emitted || decodes < st.SpecDrafts || decodes > st.SpecDrafts+st.SpecAccepted {
				t.Errorf("generated %d, emitted %d, drafts %d, accepted %d: decode tokens out of bounds",
					st.GenerationTokens, emitted, st.SpecDrafts, st.SpecAccepted)
			}
		})
	}
}

func TestHooks(t *testing.T) {
	cases := []struct {
		name       string
		budget     int
		spec       Speculation
		reqs       []Request
		wantTokens []tokenCall
	}{
		{"one token per step", 8, Speculation{}, []Request{schedReq(1, 4, 3)},
			[]tokenCall{{schedStep, 1}, {schedStep, 1}}},
		{"speculative tokens arrive together", 8, Speculation{2, 1}, []Request{schedReq(1, 4, 5)},
			[]tokenCall{{schedStep, 3}, {schedStep, 1}}},
		{"chunked prompt: no call for the first token", 8, Speculation{}, []Request{schedReq(1, 20, 2)},
			[]tokenCall{{schedStep, 1}}},
		// 1's decodes fill the 3-token budget in steps 2 and 3, so 2's second token comes
		// 30 ms after its first.
		{"gap spans the steps a request sat out", 3, Speculation{DraftTokens: 2}, []Request{schedReq(1, 2, 3), schedReq(2, 1, 3)},
			[]tokenCall{{schedStep, 1}, {schedStep, 1}, {3 * schedStep, 1}, {schedStep, 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.MaxBatchedTokens, p.Speculation = tc.budget, tc.spec
			h := newSchedHarness(t, p)
			h.submit(tc.reqs...)
			h.run()
			if !slices.Equal(h.tokens, tc.wantTokens) {
				t.Errorf("Tokens calls = %v, want %v", h.tokens, tc.wantTokens)
			}
			for _, r := range tc.reqs {
				if h.finishes[r.ID] != 1 {
					t.Errorf("request %d: %d Finished calls, want 1", r.ID, h.finishes[r.ID])
				}
			}
			if st := h.s.Stats(); int64(len(h.steps)) != st.Steps {
				t.Errorf("%d Step calls, %d steps", len(h.steps), st.Steps)
			}
		})
	}
}

// schedMustPanic runs f and returns the message of the panic it must raise.
func schedMustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

func TestPanicOnMisuse(t *testing.T) {
	cases := []struct {
		name string
		f    func(s *Scheduler)
		want string
	}{
		{"Step twice", func(s *Scheduler) { s.Step(epoch); s.Step(epoch) }, "Step called twice"},
		{"Complete without Step", func(s *Scheduler) { s.Complete(epoch) }, "Complete called without Step"},
		{"Complete twice", func(s *Scheduler) { s.Step(epoch); s.Complete(epoch); s.Complete(epoch) }, "Complete called without Step"},
		{"Complete after an idle Step", func(s *Scheduler) {
			s.Step(epoch)
			s.Complete(epoch)
			s.Abort(epoch, 1)
			s.Step(epoch)
			s.Complete(epoch)
		}, "Complete called without Step"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScheduler(schedProfile(), Hooks{})
			s.Submit(epoch, schedReq(1, 4, 8))
			if msg := schedMustPanic(t, func() { tc.f(s) }); !strings.Contains(msg, tc.want) {
				t.Errorf("panic %q, want it to mention %q", msg, tc.want)
			}
		})
	}
}
