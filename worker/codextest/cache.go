package codextest

import (
	"hash/fnv"
	"sync"
)

// The prompt cache: per account (one for the anonymous origin), the serialized input of every
// request (instructions, tools, input, as sent) is remembered as the hashes of its prefixes at
// each cacheBlock bytes; a later request's longest remembered prefix is its cached share. Each
// cache holds at most cacheEntries prefixes, the oldest forgotten first.

const (
	cacheBlock   = 256  // bytes a cached prefix grows by; a shorter input is never cached
	cacheEntries = 4096 // prefixes one account's cache keeps
)

// promptCaches are the caches of every account, by account name ("" = no accounts).
type promptCaches struct {
	mu sync.Mutex
	m  map[string]*promptCache
}

func (pc *promptCaches) of(name string) *promptCache {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil {
		pc.m = map[string]*promptCache{}
	}
	c := pc.m[name]
	if c == nil {
		c = &promptCache{set: map[uint64]struct{}{}}
		pc.m[name] = c
	}
	return c
}

// A promptCache is a bounded set of prefix hashes, evicted in insertion order.
type promptCache struct {
	mu   sync.Mutex
	set  map[uint64]struct{}
	ring []uint64 // insertion order, for eviction; len <= cacheEntries
	next int      // the ring slot the next insertion evicts, once full
}

// lookup returns the share of input (0..1) whose prefix was seen before, and remembers input.
func (c *promptCache) lookup(input []byte) float64 {
	if len(input) < cacheBlock {
		return 0
	}
	hashes := prefixHashes(input)
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for hit < len(hashes) {
		if _, ok := c.set[hashes[hit]]; !ok {
			break
		}
		hit++
	}
	for _, h := range hashes[hit:] {
		c.insert(h)
	}
	return float64(hit*cacheBlock) / float64(len(input))
}

func (c *promptCache) insert(h uint64) {
	if len(c.ring) < cacheEntries {
		c.ring = append(c.ring, h)
	} else {
		delete(c.set, c.ring[c.next])
		c.ring[c.next] = h
		c.next = (c.next + 1) % cacheEntries
	}
	c.set[h] = struct{}{}
}

// prefixHashes hashes input[:k*cacheBlock] for every whole block k >= 1.
func prefixHashes(input []byte) []uint64 {
	h := fnv.New64a()
	out := make([]uint64, 0, len(input)/cacheBlock)
	for off := 0; off+cacheBlock <= len(input); off += cacheBlock {
		h.Write(input[off : off+cacheBlock])
		out = append(out, h.Sum64())
	}
	return out
}

// serializedInput is what the prompt cache sees of a request.
func serializedInput(req *genRequest) []byte {
	b := make([]byte, 0, len(req.Instructions)+len(req.Tools)+len(req.Input)+2)
	b = append(b, req.Instructions...)
	b = append(b, 0)
	b = append(b, req.Tools...)
	b = append(b, 0)
	return append(b, req.Input...)
}

// name is the account's name, "" for nil (no accounts): the key of its prompt cache.
func (a *account) name() string {
	if a == nil {
		return ""
	}
	return a.Name
}
