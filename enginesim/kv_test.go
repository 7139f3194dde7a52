package enginesim

import (
	"slices"
	"testing"
)

// checkSchedKV checks the scheduler's KV accounting against the sequences that hold
// blocks: 0 <= used <= NumBlocks; used equals the running sequences' private blocks
// plus the cached blocks somebody holds; each cached block's reference count equals
// the running sequences whose leading hashes name it; the free cached blocks are exactly
// those in the LRU list and never outnumber the free blocks; waiting requests hold
// nothing; and no more than MaxNumSeqs requests run.
func checkSchedKV(t *testing.T, s *Scheduler) {
	t.Helper()
	c := s.kv
	if c.used < 0 || c.used > c.numBlocks {
		t.Fatalf("used blocks %d outside [0, %d]", c.used, c.numBlocks)
	}
	private := 0
	refs := map[uint64]int{}
	for _, q := range s.running {
		if q.plain < 0 || q.hashed < 0 || (q.plain+q.hashed)*c.blockSize < q.computed {
			t.Fatalf("request %d holds %d private and %d shared blocks for %d computed tokens", q.req.ID, q.plain, q.hashed, q.computed)
		}
		private += q.plain
		for _, h := range q.req.BlockHashes[:q.hashed] {
			refs[h]++
		}
	}
	for _, q := range s.waiting {
		if q.plain != 0 || q.hashed != 0 || q.computed != 0 {
			t.Fatalf("waiting request %d holds KV: %d private, %d shared blocks, %d computed tokens", q.req.ID, q.plain, q.hashed, q.computed)
		}
	}
	shared := 0
	if c.caching {
		if c.lru.Len() > c.free() {
			t.Fatalf("%d free cached blocks, only %d free blocks", c.lru.Len(), c.free())
		}
		for h, b := range c.blocks {
			if b.refs != refs[h] || (b.refs == 0) != (b.elem != nil) {
				t.Fatalf("cached block %x: %d refs (in LRU: %v), held by %d running requests", h, b.refs, b.elem != nil, refs[h])
			}
			if b.refs > 0 {
				shared++
			}
		}
		if free := len(c.blocks) - shared; c.lru.Len() != free {
			t.Fatalf("LRU holds %d blocks, %d cached blocks are free", c.lru.Len(), free)
		}
	}
	if len(refs) != shared {
		t.Fatalf("running requests hold %d shared blocks, the cache knows %d", len(refs), shared)
	}
	if c.used != private+shared {
		t.Fatalf("used blocks %d, running requests hold %d private + %d shared", c.used, private, shared)
	}
	if n := len(s.running); n > s.p.MaxNumSeqs {
		t.Fatalf("%d running requests, max %d", n, s.p.MaxNumSeqs)
	}
}

// kvChainHashes returns chained hashes of the full blocks of ids, like the server's:
// two prompts share a leading hash exactly when they share every token up to it.
func kvChainHashes(ids []int, blockSize int) []uint64 {
	h := uint64(14695981039346656037)
	out := make([]uint64, 0, len(ids)/blockSize)
	for b := 0; b+blockSize <= len(ids); b += blockSize {
		for _, id := range ids[b : b+blockSize] {
			h ^= uint64(id)
			h *= 1099511628211
		}
		out = append(out, h)
	}
	return out
}

// kvLRU returns the hashes of the free cached blocks, least recently freed first.
func kvLRU(c *kvCache) []uint64 {
	var out []uint64
	if c.lru == nil {
		return out
	}
	for e := c.lru.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*cachedBlock).hash)
	}
	return out
}

// kvCached returns the hashes of every cached block, held or free, sorted.
func kvCached(c *kvCache) []uint64 {
	var out []uint64
	for h := range c.blocks {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

func TestKVBlocksFor(t *testing.T) {
	cases := []struct {
		name   string
		tokens int
		want   int
	}{
		{"none", 0, 0},
		{"one token", 1, 1},
		{"one full block", 4, 1},
		{"one past a block", 5, 2},
		{"four blocks", 16, 4},
	}
	c := newKVCache(4, 16, false)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.blocksFor(tc.tokens); got != tc.want {
				t.Errorf("blocksFor(%d) = %d, want %d", tc.tokens, got, tc.want)
			}
		})
	}
}

// kvOp is one operation on a kvCache in TestKVCache.
type kvOp struct {
	do     string // allocate, release, publish, acquire, releaseShared
	n      int
	hashes []uint64
	ok     bool // what allocate and publish must report
}

func TestKVCache(t *testing.T) {
	alloc := func(n int) kvOp { return kvOp{do: "allocate", n: n, ok: true} }
	pub := func(h uint64) kvOp { return kvOp{do: "publish", hashes: []uint64{h}, ok: true} }
	free := func(hs ...uint64) kvOp { return kvOp{do: "releaseShared", hashes: hs} }
	cases := []struct {
		name       string
		numBlocks  int
		caching    bool
		ops        []kvOp
		wantUsed   int
		wantLRU    []uint64 // free cached blocks, least recently freed first
		wantCached []uint64 // every cached block, sorted
	}{
		{"allocate and release", 4, false, []kvOp{alloc(3), {do: "release", n: 2}}, 1, nil, nil},
		{"allocate everything", 4, false, []kvOp{alloc(1), alloc(3)}, 4, nil, nil},
		{"allocate more than is free", 4, false, []kvOp{alloc(2), {do: "allocate", n: 3}}, 2, nil, nil},
		{"without caching nothing is published", 4, false, []kvOp{alloc(1), {do: "publish", hashes: []uint64{1}}}, 1, nil, nil},
		{"a published block can be shared", 4, true, []kvOp{alloc(2), pub(1), pub(2), {do: "acquire", hashes: []uint64{1, 2}}},
			2, nil, []uint64{1, 2}},
		{"the same content is published once", 4, true, []kvOp{alloc(2), pub(1), {do: "publish", hashes: []uint64{1}}},
			2, nil, []uint64{1}},
		{"released blocks stay cached, deepest first in line", 4, true, []kvOp{alloc(3), pub(1), pub(2), pub(3), free(1, 2, 3)},
			0, []uint64{3, 2, 1}, []uint64{1, 2, 3}},
		{"a shared block is freed by its last holder", 4, true, []kvOp{alloc(1), pub(1), {do: "acquire", hashes: []uint64{1}}, free(1)},
			1, nil, []uint64{1}},
		{"acquire takes a free cached block back", 4, true, []kvOp{alloc(2), pub(1), pub(2), free(1, 2), {do: "acquire", hashes: []uint64{1}}},
			1, []uint64{2}, []uint64{1, 2}},
		{"allocation evicts the least recently freed", 4, true, []kvOp{
			alloc(1), pub(1), free(1), alloc(1), pub(2), free(2), alloc(1), pub(3), free(3), alloc(2),
		}, 2, []uint64{2, 3}, []uint64{2, 3}},
		{"allocating everything evicts every cached block", 2, true, []kvOp{alloc(2), pub(1), pub(2), free(1, 2), alloc(2)},
			2, nil, nil},
		{"a failed allocation evicts nothing", 2, true, []kvOp{alloc(1), pub(1), free(1), {do: "allocate", n: 3}},
			0, []uint64{1}, []uint64{1}},
		{"held blocks are never evicted", 3, true, []kvOp{alloc(1), pub(1), alloc(1), pub(2), free(2), alloc(2)},
			3, nil, []uint64{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newKVCache(4, tc.numBlocks, tc.caching)
			for i, op := range tc.ops {
				switch op.do {
				case "allocate":
					if got := c.allocate(op.n); got != op.ok {
						t.Fatalf("op %d: allocate(%d) = %v, want %v", i, op.n, got, op.ok)
					}
				case "release":
					c.release(op.n)
				case "publish":
					if got := c.publish(op.hashes[0]); got != op.ok {
						t.Fatalf("op %d: publish(%d) = %v, want %v", i, op.hashes[0], got, op.ok)
					}
				case "acquire":
					c.acquire(op.hashes)
				case "releaseShared":
					c.releaseShared(op.hashes)
				}
				if c.used < 0 || c.used > c.numBlocks || tc.caching && c.lru.Len() > c.free() {
					t.Fatalf("op %d: used %d of %d, %d free cached", i, c.used, c.numBlocks, len(kvLRU(c)))
				}
			}
			if c.used != tc.wantUsed {
				t.Errorf("used = %d, want %d", c.used, tc.wantUsed)
			}
			if got := kvLRU(c); !slices.Equal(got, tc.wantLRU) {
				t.Errorf("LRU = %v, want %v", got, tc.wantLRU)
			}
			if got := kvCached(c); !slices.Equal(got, tc.wantCached) {
				t.Errorf("cached = %v, want %v", got, tc.wantCached)
			}
		})
	}
}

func TestKVMatch(t *testing.T) {
	cases := []struct {
		name   string
		hashes []uint64
		max    int
		want   int
	}{
		{"whole prefix", []uint64{1, 2, 3}, 3, 3},
		{"bounded by max", []uint64{1, 2, 3}, 2, 2},
		{"max zero", []uint64{1, 2, 3}, 0, 0},
		{"stops at the first miss", []uint64{1, 9, 3}, 3, 1},
		{"leading hashes only", []uint64{9, 1, 2}, 3, 0},
		{"no hashes", nil, 3, 0},
		{"longer than the cache", []uint64{1, 2, 3, 4}, 9, 3},
	}
	c := newKVCache(4, 8, true)
	c.allocate(3)
	for _, h := range []uint64{1, 2, 3} {
		c.publish(h)
	}
	c.releaseShared([]uint64{1, 2, 3})
	off := newKVCache(4, 8, false)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.match(tc.hashes, tc.max); got != tc.want {
				t.Errorf("match(%v, %d) = %d, want %d", tc.hashes, tc.max, got, tc.want)
			}
			if got := off.match(tc.hashes, tc.max); got != 0 {
				t.Errorf("match without caching = %d, want 0", got)
			}
		})
	}
}

func TestKVFreeCached(t *testing.T) {
	cases := []struct {
		name   string
		hashes []uint64
		want   int
	}{
		{"none", nil, 0},
		{"held block", []uint64{1}, 0},
		{"free block", []uint64{2}, 1},
		{"held and free", []uint64{1, 2, 3}, 2},
	}
	// 1 is held by a sequence; 2 and 3 are free but cached.
	c := newKVCache(4, 8, true)
	c.allocate(3)
	for _, h := range []uint64{1, 2, 3} {
		c.publish(h)
	}
	c.releaseShared([]uint64{2, 3})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.freeCached(tc.hashes); got != tc.want {
				t.Errorf("freeCached(%v) = %d, want %d", tc.hashes, got, tc.want)
			}
		})
	}
}

// kvCachingProfile is schedProfile with prefix caching and a budget that holds any of
// the prompts below in one step.
func kvCachingProfile(numBlocks int) Profile {
	p := schedProfile()
	p.PrefixCaching, p.MaxBatchedTokens = true, 32
	p.NumBlocks, p.MaxModelLen = numBlocks, min(p.MaxModelLen, numBlocks*p.BlockSize)
	return p
}

func TestPrefixCacheHit(t *testing.T) {
	cases := []struct {
		name         string
		first        Request // runs to completion first
		second       Request
		caching      bool
		wantComputed int // prompt tokens the second computes
	}{
		{"same prompt ending in a partial block", Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, true, 2},
		{"whole-block prompt recomputes its last block", Request{PromptTokens: 8, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 8, BlockHashes: []uint64{1, 2}}, true, 4},
		{"one token past whole blocks", Request{PromptTokens: 9, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 9, BlockHashes: []uint64{1, 2}}, true, 1},
		{"one-block prompt hits nothing", Request{PromptTokens: 4, BlockHashes: []uint64{1}}, Request{PromptTokens: 4, BlockHashes: []uint64{1}}, true, 4},
		{"first block shared", Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 10, BlockHashes: []uint64{1, 3}}, true, 6},
		{"first block differs", Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 10, BlockHashes: []uint64{5, 2}}, true, 10},
		{"longer prompt with the same prefix", Request{PromptTokens: 8, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 14, BlockHashes: []uint64{1, 2, 3}}, true, 6},
		{"request without hashes", Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 10}, true, 10},
		{"profile without prefix caching", Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, Request{PromptTokens: 10, BlockHashes: []uint64{1, 2}}, false, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := kvCachingProfile(16)
			p.PrefixCaching = tc.caching
			h := newSchedHarness(t, p)
			first, second := schedReq(1, tc.first.PromptTokens, 3), schedReq(2, tc.second.PromptTokens, 1)
			first.BlockHashes, second.BlockHashes = tc.first.BlockHashes, tc.second.BlockHashes
			h.submit(first)
			h.run()
			before := h.s.Stats()
			h.submit(second)
			h.run()
			st := h.s.Stats()
			if got := h.steps[len(h.steps)-1]; got != tc.wantComputed {
				t.Errorf("second request computed %d prompt tokens, want %d", got, tc.wantComputed)
			}
			cached := tc.second.PromptTokens - tc.wantComputed
			var queries int64
			if tc.caching && tc.second.BlockHashes != nil {
				queries = int64(tc.second.PromptTokens)
			}
			if got := h.finished[2].CachedTokens; got != cached {
				t.Errorf("Finished.CachedTokens = %d, want %d", got, cached)
			}
			if hits, q := st.PrefixHits-before.PrefixHits, st.PrefixQueries-before.PrefixQueries; hits != int64(cached) || q != queries {
				t.Errorf("prefix hits %d of %d queried tokens, want %d of %d", hits, q, cached, queries)
			}
			if got := st.PromptTokens - before.PromptTokens; got != int64(tc.wantComputed) {
				t.Errorf("prompt tokens counter grew by %d, want %d", got, tc.wantComputed)
			}
			if h.finished[2].OutputTokens != 1 || st.UsedBlocks != 0 {
				t.Errorf("second request: %d tokens, %d blocks still used", h.finished[2].OutputTokens, st.UsedBlocks)
			}
		})
	}
}

// TestPrefixCacheShared checks that a running request's published blocks serve a second
// request at once, counted once in the used blocks.
func TestPrefixCacheShared(t *testing.T) {
	h := newSchedHarness(t, kvCachingProfile(16))
	a := schedReq(1, 10, 4)
	a.BlockHashes = []uint64{1, 2}
	h.submit(a)
	h.step() // a computes 10 tokens in 3 blocks and publishes 2 of them
	b := schedReq(2, 10, 1)
	b.BlockHashes = []uint64{1, 2}
	h.submit(b)
	h.plan()
	// a keeps its 3 blocks; b shares a's 2 published blocks and adds 1 for its last 2 tokens.
	if st := h.s.Stats(); st.UsedBlocks != 4 || st.Running != 2 {
		t.Fatalf("used %d blocks with %d running, want 4 and 2", st.UsedBlocks, st.Running)
	}
	h.complete()
	if h.steps[1] != 1+2 || h.finished[2].CachedTokens != 8 {
		t.Errorf("step 2 computed %d tokens, b had %d cached; want 3 and 8", h.steps[1], h.finished[2].CachedTokens)
	}
	h.run()
	if got := kvLRU(h.s.kv); h.s.Stats().UsedBlocks != 0 || !slices.Equal(got, []uint64{2, 1}) {
		t.Errorf("used %d blocks, LRU %v; want 0 and [2 1]", h.s.Stats().UsedBlocks, got)
	}
}

func TestPrefixCacheEviction(t *testing.T) {
	type run struct {
		prompt     int
		hashes     []uint64
		wantCached int
	}
	cases := []struct {
		name string
		runs []run // one request each, run to completion in turn, one output token
	}{
		// x and y are freed in that order; the 3 blocks of the third request leave room
		// for one of them, so x goes.
		{"least recently freed goes first", []run{
			{4, []uint64{10}, 0}, {4, []uint64{20}, 0}, {12, nil, 0}, {5, []uint64{10}, 0}, {5, []uint64{20}, 4},
		}},
		// A prefix is freed deepest block first, so its tail is evicted before its head.
		{"a prefix loses its tail first", []run{
			{12, []uint64{1, 2, 3}, 0}, {8, nil, 0}, {13, []uint64{1, 2, 3}, 8},
		}},
		// A request that needs the whole cache evicts every block of the prefix.
		{"an evicted prefix misses", []run{
			{12, []uint64{1, 2, 3}, 0}, {15, nil, 0}, {13, []uint64{1, 2, 3}, 0},
		}},
		{"a freshly used prefix outlives an older one", []run{
			{4, []uint64{10}, 0}, {4, []uint64{20}, 0}, {5, []uint64{10}, 4}, {12, nil, 0}, {5, []uint64{10}, 4}, {5, []uint64{20}, 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newSchedHarness(t, kvCachingProfile(4))
			for i, r := range tc.runs {
				id := uint64(i + 1)
				q := schedReq(id, r.prompt, 1)
				q.BlockHashes = r.hashes
				h.submit(q)
				h.run()
				if got := h.finished[id].CachedTokens; got != r.wantCached {
					t.Errorf("request %d had %d cached tokens, want %d", id, got, r.wantCached)
				}
			}
		})
	}
}

// TestPrefixCacheFailedAdmissionKeepsLRU is a regression test: a request that matches
// cached blocks but cannot be admitted must leave the eviction order alone. It used to
// take the blocks over and give them back as if just freed, so younger blocks were
// evicted first.
func TestPrefixCacheFailedAdmissionKeepsLRU(t *testing.T) {
	p := kvCachingProfile(4)
	p.MaxBatchedTokens = 16
	h := newSchedHarness(t, p)
	x, y := schedReq(1, 4, 1), schedReq(2, 4, 1)
	x.BlockHashes, y.BlockHashes = []uint64{10}, []uint64{20}
	h.submit(x)
	h.run()
	h.submit(y)
	h.run() // LRU: x, y
	r, big := schedReq(3, 8, 4), schedReq(4, 13, 1)
	big.BlockHashes = []uint64{10, 30, 40}
	h.submit(r, big)
	h.step() // r takes 2 blocks; big matches x but needs 2 more blocks than are free
	if got := kvLRU(h.s.kv); !slices.Equal(got, []uint64{10, 20}) {
		t.Fatalf("LRU after a failed admission = %v, want [10 20]", got)
	}
	h.step() // r takes a third block: x, freed first, is evicted
	if got := kvCached(h.s.kv); !slices.Equal(got, []uint64{20}) {
		t.Fatalf("cached after an eviction = %v, want [20]", got)
	}
	h.abort(h.now, 4)
	h.run()
	y2 := schedReq(5, 5, 1)
	y2.BlockHashes = []uint64{20}
	h.submit(y2)
	h.run()
	if got := h.finished[5].CachedTokens; got != 4 {
		t.Errorf("y's prefix: %d cached tokens, want 4", got)
	}
}
