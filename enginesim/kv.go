package enginesim

import "container/list"

// kvCache accounts for the KV cache in blocks, the way vLLM's block pool does: a block is
// either held by one or more sequences (used) or free. With prefix caching, a free block
// that holds a full prompt block keeps its content and its hash until the space is needed
// again, so a later prompt with the same prefix can take it over without recomputing it.
//
// Invariants: 0 <= used <= numBlocks, and the free blocks that still hold cached content
// (lru.Len()) never outnumber the free blocks. Not safe for concurrent use.
type kvCache struct {
	blockSize int
	numBlocks int
	used      int

	caching bool
	blocks  map[uint64]*cachedBlock // content hash -> block, held or free
	lru     *list.List              // free cached blocks, least recently freed first
}

// cachedBlock is a block whose content is a full block of some prompt.
type cachedBlock struct {
	hash uint64
	refs int           // sequences holding it; 0 means free but still cached
	elem *list.Element // position in lru while refs == 0
}

func newKVCache(blockSize, numBlocks int, caching bool) *kvCache {
	c := &kvCache{blockSize: blockSize, numBlocks: numBlocks, caching: caching}
	if caching {
		c.blocks = make(map[uint64]*cachedBlock)
		c.lru = list.New()
	}
	return c
}

// free returns the number of blocks not held by any sequence.
func (c *kvCache) free() int { return c.numBlocks - c.used }

// blocksFor returns the blocks needed to hold n tokens.
func (c *kvCache) blocksFor(n int) int { return (n + c.blockSize - 1) / c.blockSize }

// allocate takes n fresh blocks, evicting cached content as needed. It reports false,
// changing nothing, when fewer than n blocks are free.
func (c *kvCache) allocate(n int) bool {
	if n > c.free() {
		return false
	}
	c.used += n
	c.evictExcess()
	return true
}

// release gives back n blocks that were never published to the cache.
func (c *kvCache) release(n int) { c.used -= n }

// match returns how many leading hashes name blocks present in the cache, up to max.
func (c *kvCache) match(hashes []uint64, max int) int {
	if !c.caching {
		return 0
	}
	n := 0
	for n < len(hashes) && n < max {
		if _, ok := c.blocks[hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// freeCached returns how many of the cached blocks named by hashes, all of which must be
// present (see match), are free: taking them over with acquire uses up that many free
// blocks.
func (c *kvCache) freeCached(hashes []uint64) int {
	n := 0
	for _, h := range hashes {
		if c.blocks[h].refs == 0 {
			n++
		}
	}
	return n
}

// acquire takes a reference on each of the cached blocks named by hashes, all of which
// must be present (see match). Blocks that were free become used.
func (c *kvCache) acquire(hashes []uint64) {
	for _, h := range hashes {
		b := c.blocks[h]
		if b.refs == 0 {
			c.lru.Remove(b.elem)
			b.elem = nil
			c.used++
		}
		b.refs++
	}
	c.evictExcess()
}

// publish records that a block just computed by a sequence holds the full prompt block
// with the given hash, so later prompts can share it. It reports false when another
// sequence published the same content first; the caller then keeps its block private.
func (c *kvCache) publish(hash uint64) bool {
	if !c.caching {
		return false
	}
	if _, ok := c.blocks[hash]; ok {
		return false
	}
	c.blocks[hash] = &cachedBlock{hash: hash, refs: 1}
	return true
}

// releaseShared drops one reference on each named block. A block nobody holds becomes
// free but stays cached, most recently freed last in line for eviction.
func (c *kvCache) releaseShared(hashes []uint64) {
	// Free the deepest blocks first so that the shared head of a prefix is evicted last.
	for i := len(hashes) - 1; i >= 0; i-- {
		b := c.blocks[hashes[i]]
		b.refs--
		if b.refs == 0 {
			c.used--
			b.elem = c.lru.PushBack(b)
		}
	}
}

// evictExcess forgets the content of the least recently freed cached blocks until no more
// of them exist than there are free blocks.
func (c *kvCache) evictExcess() {
	if !c.caching {
		return
	}
	for c.lru.Len() > c.free() {
		b := c.lru.Remove(c.lru.Front()).(*cachedBlock)
		delete(c.blocks, b.hash)
	}
}
