package enginesim

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// kvRandom drives a scheduler with a random sequence of operations for
// TestKVInvariantsRandomized and tracks which requests are live.
type kvRandom struct {
	t      *testing.T
	h      *schedHarness
	rng    *rand.Rand
	docs   [][]int // with caching, prompts are prefixes of these, some with a random tail
	nextID uint64
	live   map[uint64]bool
}

// kvMaxLive bounds the requests in the scheduler at a time.
const kvMaxLive = 12

// submit queues a request of random size that fits the context window.
func (k *kvRandom) submit() {
	p, rng := k.h.p, k.rng
	if len(k.live) >= kvMaxLive {
		return
	}
	k.nextID++
	prompt := 1 + rng.IntN(p.MaxModelLen-1)
	if rng.IntN(2) == 0 {
		prompt = 1 + rng.IntN(16)
	}
	r := schedReq(k.nextID, prompt, 1+rng.IntN(p.MaxModelLen-prompt))
	if rng.IntN(2) == 0 {
		r.FinishReason = "stop"
	}
	if p.PrefixCaching {
		ids := slices.Clone(k.docs[rng.IntN(len(k.docs))][:prompt])
		if rng.IntN(2) == 0 {
			for j := rng.IntN(prompt); j < prompt; j++ {
				ids[j] = rng.IntN(p.Vocab)
			}
		}
		r.BlockHashes = kvChainHashes(ids, p.BlockSize)
	}
	k.h.submit(r)
	k.live[r.ID] = true
}

// abort aborts a live request, or now and then a finished or unknown one, at time at,
// and checks what Abort reports.
func (k *kvRandom) abort(at time.Time) {
	id := uint64(k.rng.IntN(int(k.nextID) + 2))
	if ids := slices.Sorted(maps.Keys(k.live)); len(ids) > 0 && k.rng.IntN(4) != 0 {
		id = ids[k.rng.IntN(len(ids))]
	}
	if got := k.h.abort(at, id); got != k.live[id] {
		k.t.Fatalf("Abort(%d) = %v, want %v", id, got, k.live[id])
	}
	delete(k.live, id)
}

// step runs a step, if Step finds one, with requests coming and going while it runs.
// Step must find one exactly when the scheduler is not idle.
func (k *kvRandom) step() {
	idle := k.h.s.Idle()
	ok := k.h.plan()
	if ok == idle {
		k.t.Fatalf("Step = %v with Idle() = %v: %+v", ok, idle, k.h.s.Stats())
	}
	if !ok {
		return
	}
	checkSchedKV(k.t, k.h.s)
	if k.rng.IntN(10) == 0 {
		k.abort(k.h.now.Add(k.h.end.Sub(k.h.now) / 2))
		checkSchedKV(k.t, k.h.s)
	}
	if k.rng.IntN(4) == 0 {
		k.submit()
	}
	for _, e := range k.h.complete() {
		if e.Done {
			delete(k.live, e.ID)
		}
	}
}

// checkDrained checks a drained scheduler: nothing held, every request finished once,
// with all its tokens unless aborted. It returns the number of aborted requests.
func (k *kvRandom) checkDrained() (aborts int) {
	h, t := k.h, k.t
	st := h.s.Stats()
	if st.UsedBlocks != 0 || st.UsedTokens != 0 || st.Running != 0 || st.Waiting != 0 || st.Preempted != 0 {
		t.Errorf("drained scheduler: %+v", st)
	}
	if h.s.kv.caching && h.s.kv.lru.Len() != len(h.s.kv.blocks) {
		t.Errorf("%d cached blocks, %d of them free; want all free", len(h.s.kv.blocks), h.s.kv.lru.Len())
	}
	for id, r := range h.reqs {
		f := h.finished[id]
		switch {
		case h.finishes[id] != 1:
			t.Errorf("request %d finished %d times", id, h.finishes[id])
		case h.aborted[id]:
			aborts++
			if f.Reason != "abort" || f.OutputTokens != h.emitted[id] {
				t.Errorf("aborted request %d: %+v, %d tokens emitted", id, f, h.emitted[id])
			}
		case f.Reason != r.FinishReason || f.OutputTokens != r.OutputTokens || h.emitted[id] != r.OutputTokens:
			t.Errorf("request %d: %+v, %d tokens emitted; want %q after %d", id, f, h.emitted[id], r.FinishReason, r.OutputTokens)
		}
	}
	if got := st.finishedTotal(); got != int64(len(h.reqs)) {
		t.Errorf("FinishedByReason totals %d, %d requests", got, len(h.reqs))
	}
	return aborts
}

// TestKVInvariantsRandomized runs random sequences of Submit, Step, Complete and Abort,
// with requests coming and going while steps run, and checks the KV accounting after
// every operation; then it drains the scheduler and checks that every request finished
// once, with all its tokens unless it was aborted, and that nothing is left held.
func TestKVInvariantsRandomized(t *testing.T) {
	cases := []struct {
		name    string
		caching bool
		spec    Speculation
		seed    uint64
	}{
		{"plain", false, Speculation{}, 1},
		{"prefix caching with shared prefixes", true, Speculation{}, 2},
		{"speculative decoding", false, Speculation{DraftTokens: 3, AcceptRate: 0.7}, 3},
		{"prefix caching and speculative decoding", true, Speculation{DraftTokens: 2, AcceptRate: 0.5}, 4},
	}
	const ops = 20_000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			p.PrefixCaching, p.Speculation = tc.caching, tc.spec
			k := &kvRandom{t: t, h: newSchedHarness(t, p), rng: rand.New(rand.NewPCG(tc.seed, 0x5eed)), live: map[uint64]bool{}}
			k.docs = make([][]int, 3)
			for i := range k.docs {
				k.docs[i] = make([]int, p.MaxModelLen)
				for j := range k.docs[i] {
					k.docs[i][j] = k.rng.IntN(p.Vocab)
				}
			}
			for range ops {
				switch r := k.rng.IntN(20); {
				case r < 5:
					k.submit()
				case r < 6:
					k.abort(k.h.now)
				default:
					k.step()
				}
				checkSchedKV(t, k.h.s)
			}
			k.h.run()
			aborts := k.checkDrained()
			st := k.h.s.Stats()
			t.Logf("%d requests, %d aborts, %d preemptions, %d prefix hits, %d accepted drafts, %d steps",
				len(k.h.reqs), aborts, st.Preemptions, st.PrefixHits, st.SpecAccepted, st.Steps)
			// The sequence must have exercised what it checks.
			if aborts == 0 || st.Preemptions == 0 || tc.caching && st.PrefixHits == 0 || tc.spec.DraftTokens > 0 && st.SpecAccepted == 0 {
				t.Errorf("weak run: %d requests, %d aborts, %d preemptions, %d prefix hits, %d accepted drafts",
					len(k.h.reqs), aborts, st.Preemptions, st.PrefixHits, st.SpecAccepted)
			}
		})
	}
}
