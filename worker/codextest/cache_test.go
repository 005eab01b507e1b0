package codextest

import (
	"fmt"
	"strings"
	"testing"
)

func cachedOf(evs []event) float64 {
	v, _ := evs[len(evs)-1].get("response.usage.input_tokens_details.cached_tokens").(float64)
	return v
}

// cacheStep is one request of a prompt cache test: who sends what, and whether it is cached.
type cacheStep struct {
	token, prompt string
	wantCached    bool
}

func TestPromptCachePerAccount(t *testing.T) {
	long := strings.Repeat("a long shared conversation prefix ", 40) // well over cacheBlock bytes
	accts := []Account{{Name: "a", Token: "tok-a"}, {Name: "b", Token: "tok-b"}}
	tests := []struct {
		name  string
		opts  Options
		steps []cacheStep
	}{
		{name: "repeat on one account is cached, another account is not", opts: Options{Accounts: accts},
			steps: []cacheStep{{"tok-a", long, false}, {"tok-a", long + "more", true}, {"tok-b", long, false}, {"tok-b", long, true}}},
		{name: "short prompts are never cached", opts: Options{},
			steps: []cacheStep{{"", "Say hello", false}, {"", "Say hello", false}}},
		{name: "switched off", opts: Options{NoPromptCache: true},
			steps: []cacheStep{{"", long, false}, {"", long, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.opts)
			var sumIn, sumCached int64
			for i, st := range tt.steps {
				c, _, err := dial(t, s.URL, bearer(st.token))
				if err != nil {
					t.Fatal(err)
				}
				evs := readResponseOf(t, c, createFrame(st.prompt, nil))
				cached := cachedOf(evs)
				in := evs[len(evs)-1].get("response.usage.input_tokens").(float64)
				if (cached > 0) != st.wantCached || cached > in {
					t.Errorf("step %d (%s): cached_tokens %v of %v, want cached %v", i, st.token, cached, in, st.wantCached)
				}
				sumIn, sumCached = sumIn+int64(in), sumCached+int64(cached)
			}
			if st := s.Stats(); st.InputTokens != sumIn || st.CachedTokens != sumCached {
				t.Errorf("Stats input %d cached %d, want the usage sums %d and %d", st.InputTokens, st.CachedTokens, sumIn, sumCached)
			}
		})
	}
}

func TestPromptCacheGrowsWithPrefix(t *testing.T) {
	s := newServer(t, Options{})
	c := mustDial(t, s)
	history := []any{userMsg(strings.Repeat("turn one of the conversation ", 30))}
	var last float64
	for turn := range 4 {
		evs := readResponseOf(t, c, toolFrame(history, nil, nil))
		cached := cachedOf(evs)
		if turn > 0 && cached <= last {
			t.Errorf("turn %d: cached_tokens %v, want more than the turn before (%v)", turn, cached, last)
		}
		last = cached
		history = append(history, userMsg(strings.Repeat("a further turn ", 30)))
	}
}

func TestPromptCacheBounded(t *testing.T) {
	c := &promptCache{set: map[uint64]struct{}{}}
	first := []byte(strings.Repeat("x", cacheBlock))
	c.lookup(first)
	if c.lookup(first) != 1 {
		t.Fatal("a repeated input is not cached")
	}
	for i := range cacheEntries {
		c.lookup(fmt.Appendf(nil, "%0*d", cacheBlock, i)) // cacheEntries other inputs, one block each
	}
	if len(c.set) > cacheEntries || len(c.ring) > cacheEntries {
		t.Errorf("cache holds %d (ring %d), want at most %d", len(c.set), len(c.ring), cacheEntries)
	}
	if c.lookup(first) != 0 {
		t.Error("the oldest prefix survived a full cache of newer ones")
	}
}

func TestAccountStatsCountTokens(t *testing.T) {
	long := strings.Repeat("a long shared conversation prefix ", 40)
	s := newServer(t, Options{Accounts: []Account{{Name: "a", Token: "tok-a"}, {Name: "b", Token: "tok-b"}}})
	for _, tok := range []string{"tok-a", "tok-a", "tok-b"} {
		c, _, err := dial(t, s.URL, bearer(tok))
		if err != nil {
			t.Fatal(err)
		}
		readResponseOf(t, c, createFrame(long, nil))
	}
	st := s.Stats()
	a, b := st.Accounts["a"], st.Accounts["b"]
	if a.CachedTokens == 0 || b.CachedTokens != 0 || a.InputTokens != 2*b.InputTokens || st.CachedTokens != a.CachedTokens {
		t.Errorf("accounts a %+v b %+v, server cached %d; want only a's repeat cached", a, b, st.CachedTokens)
	}
	s.ResetStats()
	if st := s.Stats(); st.InputTokens != 0 || st.Accounts["a"].CachedTokens != 0 {
		t.Errorf("after ResetStats: %+v", st)
	}
}
