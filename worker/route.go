package worker

import (
	"container/list"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
)

// account is one configured account with everything that is its own: gate, socket pool, limits.
type account struct {
	index    int
	name     string
	identity string
	source   string // where the credentials came from, for logs (never the secret)
	gate     *gate.Gate
	codex    *codex.Client
	lim      *limitState // guarded by router.mu

	requests, completed     atomic.Int64 // generations started on the account; of those, completed
	limited, unauthorized   atomic.Int64 // refusals for limits (429) and credentials (401)
	moved, cooldowns, fasts atomic.Int64 // moved to another account; cooldowns begun; fast answers naming it
}

// router picks the account for each generation. Safe for concurrent use.
type router struct {
	// enforce is true for Config.Accounts: cooldowns keep requests away and refused requests
	// move. The one-account shortcut only records the reports, and every request goes upstream as
	// it always did.
	enforce  bool
	cooldown time.Duration

	mu       sync.Mutex
	accounts []*account
	affinity *affinity
}

// choice is a candidate account and what routing compares.
type choice struct {
	a        *account
	delay    time.Duration // 0 = can start now: an idle pooled socket, or a gate that lets it through
	share    float64       // headroom per generation in flight after this one: larger is better
	headroom float64
}

// better reports whether c should win over d.
func (c choice) better(d choice) bool {
	switch {
	case c.delay != d.delay:
		return c.delay < d.delay
	case c.share != d.share:
		return c.share > d.share
	case c.headroom != d.headroom:
		return c.headroom > d.headroom
	}
	return c.a.index < d.a.index
}

// startDelay estimates how long a new generation on a would wait to start: 0 with an idle pooled
// socket (no upgrade) or a gate that grants a permit at once, else the gate's queue times its
// spacing. An estimate for ranking only; the gate itself decides.
func startDelay(a *account) time.Duration {
	if a.codex.Stats().Idle > 0 {
		return 0
	}
	s := a.gate.Snapshot()
	if s.Mode == gate.Off {
		return 0
	}
	pending := s.Queued
	if s.Window > 0 && s.InFlight >= s.Window {
		pending += s.InFlight - s.Window + 1
	}
	if pending == 0 && s.Spacing == 0 {
		return 0
	}
	return time.Duration(pending+1) * max(s.Spacing, time.Millisecond)
}

// pick chooses the account for a generation with prompt cache key (may be empty) at now, leaving
// out the accounts in tried, and counts the generation as started on it (release it with
// finish). With no account to use it returns nil and, when every account left is cooling down,
// the error to answer with (429, or 401 when credentials were the reason).
//
// The rules, in order:
//  1. Accounts cooling down are left out, and so are accounts on their last call that already
//     run a generation.
//  2. A key that an account served last goes to it again, if it can start at once.
//  3. The account that can start soonest wins; among those, the one with the most headroom per
//     generation in flight (so load spreads, and an account near its limit gets less of it);
//     then the most headroom; then the order of the configuration.
//
// Accounts on their last call are used concurrently only when nothing else is left.
func (r *router) pick(now time.Time, key string, tried []*account) (*account, *schemas.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best, busy *choice
	var first *account // the cooling account usable first
	for _, a := range r.accounts {
		if slices.Contains(tried, a) {
			continue
		}
		av := a.lim.available(now)
		if !r.enforce {
			av = availability{headroom: av.headroom}
		}
		if av.cooling {
			if first == nil || av.until.Before(first.lim.coolUntil) {
				first = a
			}
			continue
		}
		c := choice{a: a, headroom: av.headroom, share: av.headroom / float64(a.lim.inflight+1)}
		if av.lastCall && a.lim.inflight > 0 {
			if busy == nil || c.better(*busy) {
				busy = &c
			}
			continue
		}
		c.delay = startDelay(a)
		if best == nil || c.better(*best) {
			best = &c
		}
	}
	if key != "" && best != nil {
		if a := r.affinity.get(key); a != nil && a != best.a && !slices.Contains(tried, a) && r.usable(a, now) && startDelay(a) == 0 {
			best = &choice{a: a}
		}
	}
	if best == nil {
		best = busy
	}
	if best != nil {
		best.a.lim.started()
		best.a.requests.Add(1)
		return best.a, nil
	}
	if first == nil {
		return nil, nil
	}
	first.fasts.Add(1)
	return nil, r.coolingError(first, now)
}

// usable reports whether a takes a generation at now: not cooling down, and not on its last
// call with one already running.
func (r *router) usable(a *account, now time.Time) bool {
	if !r.enforce {
		return true
	}
	av := a.lim.available(now)
	return !av.cooling && !(av.lastCall && a.lim.inflight > 0)
}

// coolingError is the answer when every account is cooling down: the one usable first names the
// wait and the reason.
func (r *router) coolingError(a *account, now time.Time) *schemas.Error {
	wait := max(a.lim.coolUntil.Sub(now), time.Second)
	code, status := schemas.CodeUpstreamRateLimited, 429
	if a.lim.coolCode == codeUnauthorized {
		code, status = schemas.CodeUpstreamUnauthorized, 401
	}
	n := len(r.accounts)
	what := "every account is cooling down"
	if n == 1 {
		what = "the only account is cooling down"
	}
	upstream := a.lim.coolCode
	if upstream == codeUnauthorized {
		upstream = ""
	}
	return &schemas.Error{Status: status, Code: code, RetryAfter: wait, UpstreamCode: upstream, Account: a.name,
		Message: fmt.Sprintf("worker: %s; the first, %q, is usable again in %s (%s)", what, a.name, wait.Round(time.Second), a.lim.coolWhy)}
}

// codeUnauthorized marks a cooldown set by a 401 (the origin's own code is rarely given).
const codeUnauthorized = "unauthorized"

// finish releases a generation pick started on a: completed counts it towards the account's
// projected usage and remembers the account for key.
func (r *router) finish(a *account, key string, completed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.lim.finished(completed)
	if completed && key != "" {
		r.affinity.put(key, a)
	}
}

// refuse records that the origin refused a: it cools down (with Config.Accounts) until the
// refusal's retry time or for the fallback cooldown. It reports whether a cooldown began or grew,
// and until when.
func (r *router) refuse(a *account, code, why string, retryAfter time.Duration, now time.Time) (bool, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.enforce {
		return false, time.Time{}
	}
	before := a.lim.coolUntil
	a.lim.refuse(code, why, retryAfter, now, r.cooldown)
	if a.lim.coolUntil.After(before) {
		a.cooldowns.Add(1)
		return true, a.lim.coolUntil
	}
	return false, time.Time{}
}

// observe records a usage report of a's origin. It reports whether a cooldown began or grew.
func (r *router) observe(a *account, l codex.Limits, now time.Time) (bool, time.Time, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := a.lim.coolUntil
	a.lim.observe(l, now, r.cooldown)
	if !r.enforce {
		// The shortcut keeps no cooldown: its requests go upstream whatever the reports say.
		a.lim.coolUntil, a.lim.coolCode, a.lim.coolWhy = time.Time{}, "", ""
		return false, time.Time{}, ""
	}
	if a.lim.coolUntil.After(before) {
		a.cooldowns.Add(1)
		return true, a.lim.coolUntil, a.lim.coolWhy
	}
	return false, time.Time{}, ""
}

// earliest returns when the first account stops cooling down, and false when one is not cooling.
func (r *router) earliest(now time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t time.Time
	for _, a := range r.accounts {
		if !r.enforce || !now.Before(a.lim.coolUntil) {
			return time.Time{}, false
		}
		if t.IsZero() || a.lim.coolUntil.Before(t) {
			t = a.lim.coolUntil
		}
	}
	return t, !t.IsZero()
}

// affinity remembers which account served a prompt cache key last, for the max most recent keys.
// Not safe for concurrent use (router.mu guards it).
type affinity struct {
	max   int
	order *list.List // of *affinityEntry, most recent first
	keys  map[string]*list.Element
}

type affinityEntry struct {
	key string
	a   *account
}

func newAffinity(max int) *affinity {
	return &affinity{max: max, order: list.New(), keys: map[string]*list.Element{}}
}

func (f *affinity) get(key string) *account {
	if e, ok := f.keys[key]; ok {
		f.order.MoveToFront(e)
		return e.Value.(*affinityEntry).a
	}
	return nil
}

func (f *affinity) put(key string, a *account) {
	if e, ok := f.keys[key]; ok {
		e.Value.(*affinityEntry).a = a
		f.order.MoveToFront(e)
		return
	}
	f.keys[key] = f.order.PushFront(&affinityEntry{key: key, a: a})
	for f.order.Len() > f.max {
		old := f.order.Back()
		f.order.Remove(old)
		delete(f.keys, old.Value.(*affinityEntry).key)
	}
}
