package worker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
	"github.com/codexpool/codexpool/worker/codex/login"
)

// account is one configured account with everything that is its own: gate, socket pool, limits.
type account struct {
	index    int
	name     string
	identity string
	source   string // where the credentials came from, for logs (never the secret)
	gate     *gate.Gate
	codex    *codex.Client
	auth     *login.Auth // keeps a login file fresh; nil with a fixed token
	lim      *limitState // guarded by router.mu
	starting int         // generations committed to it without a first event yet; guarded by router.mu

	maxConcurrent int       // Account.MaxConcurrent: slots across the pool; 0 = no limit
	leases        int       // slots this worker holds; guarded by router.mu
	slotsFullAt   time.Time // when every slot was last found held; guarded by router.mu

	requests, completed     atomic.Int64 // generations started on the account; of those, completed
	limited, unauthorized   atomic.Int64 // refusals for limits (429) and credentials (401)
	moved, cooldowns, fasts atomic.Int64 // moved to another account; cooldowns begun; fast answers naming it
	proxyFailures           atomic.Int64 // tries its proxy failed (unreachable, 407, no answer in time)
}

// router picks the account for each generation. Safe for concurrent use. It knows no account
// mode: what keeps a generation from an account is the account's limitState (record-only with
// the one-account shortcut, whose requests all go upstream as they always did).
type router struct {
	cooldown time.Duration

	mu       sync.Mutex
	accounts []*account
	holders  int           // generations waiting in hold
	wake     chan struct{} // closed (and replaced) when a held generation should look again
}

// holdCheck is how often a held generation looks again even without a wake-up (a gate's spacing
// relaxes, a cooldown ends, without an event of ours).
const holdCheck = 50 * time.Millisecond

// choice is a candidate account and what routing compares.
type choice struct {
	a        *account
	delay    time.Duration // below startSlack = can start now: an idle pooled socket, or a gate that lets it through
	share    float64       // headroom per generation in flight after this one: larger is better
	headroom float64
	probe    bool // on its last call with nothing running: one generation uses it up, or tells
}

// startSlack is the resolution at which start delays are compared. Estimates below it are
// noise (a handshake or two in flight); ranking on them would send a whole burst, picked within
// a millisecond, to whichever gate happened to look free.
const startSlack = 20 * time.Millisecond

// better reports whether c should win over d.
func (c choice) better(d choice) bool {
	switch {
	case c.delay/startSlack != d.delay/startSlack:
		return c.delay < d.delay
	case c.probe != d.probe:
		return c.probe
	case c.share != d.share:
		return c.share > d.share
	case c.headroom != d.headroom:
		return c.headroom > d.headroom
	}
	return c.a.index < d.a.index
}

// readiness estimates how long a new generation on a would wait to start: 0 with an idle pooled
// socket (no upgrade) or a gate that grants a permit at once, else the gate's queue times its
// spacing. take is false while a generation is starting on a that is unknown (limitState.heard)
// or on its final stretch (availability.final), and when a already has as many generations
// starting (committed, no first event yet) as its gate lets upgrade at once: more would only
// queue in that gate, while another account's gate may free up first. Estimates for ranking only; the gate itself decides.
// r.mu is held.
func (r *router) readiness(a *account, now time.Time) (delay time.Duration, take bool) {
	if a.capped(now) {
		return 0, false
	}
	if r.holding() && a.starting > 0 && a.lim.oneStarting(now) {
		return 0, false // one generation at a time learns what the origin says of it
	}
	if a.codex.Stats().Idle > 0 {
		return 0, true
	}
	s := a.gate.Snapshot()
	if s.Mode == gate.Off {
		return 0, true
	}
	take = !r.holding() || a.starting < startLimit(s)
	pending := s.Queued
	if s.Window > 0 && s.InFlight >= s.Window {
		pending += s.InFlight - s.Window + 1
	}
	if pending == 0 && s.Spacing == 0 {
		return 0, take
	}
	return time.Duration(pending+1) * max(s.Spacing, time.Millisecond), take
}

// capped reports whether a is at its max_concurrent at now: in this worker, or in the pool a
// moment ago. r.mu is held.
func (a *account) capped(now time.Time) bool {
	return a.maxConcurrent > 0 && (a.leases >= a.maxConcurrent || now.Sub(a.slotsFullAt) < slotRetry)
}

// spreadWait is how long a generation may hold for a burst to spread over accounts the origin
// has not answered for yet (see pick, rule 5).
const spreadWait = 50 * time.Millisecond

// startLimit is how many generations may be starting on an account with gate state s: the
// adaptive gate's window, one while another gate paces, no limit otherwise.
func startLimit(s gate.Snapshot) int {
	switch {
	case s.Window > 0:
		return s.Window
	case s.Spacing > 0:
		return 1
	}
	return math.MaxInt
}

// holding reports whether generations wait in the worker for an account to free up, rather than
// in one account's gate: only with several accounts (the one-account shortcut has one).
func (r *router) holding() bool { return len(r.accounts) > 1 }

// pick chooses the account for a generation at now, leaving out the accounts in tried, and counts the generation as started on it (release it with
// started at its first event and finish at its end). hold is true when accounts are usable but
// none can take it yet: wait in hold and pick again. With no account to use it returns nil and,
// when every account left is cooling down, the error to answer with (429, or 401 when
// credentials were the reason).
//
// The rules, in order:
//  1. Accounts cooling down are left out, and so are accounts on their last call that already
//     run a generation.
//  2. An account at its MaxConcurrent (the slots this worker holds, or all of the pool's a
//     moment ago) takes nothing for now. With several accounts, one the origin has not answered for yet (it may be used up by
//     other workers), or one its projection puts within two generations of its ceiling, takes
//     one starting generation at a time, and one whose gate already has as
//     many upgrades starting as it lets through at once takes no more for now: the generation waits for whichever account frees
//     up first, instead of queueing behind one gate.
//  3. The account the generation's session is bound to (want; nil = none) wins if it is not
//     cooling down; while it cannot take the generation yet, the generation holds for it.
//  4. The account that can start soonest wins; among those, one on its last call with nothing
//     running (its last generation uses it up, or its report corrects a projection that counted
//     a completion twice, or guessed a step); then the one with the most headroom per
//     generation in flight (so load spreads, and an account near its limit gets less of it);
//     then the most headroom; then the order of the configuration.
//  5. A burst spreads: while an account the origin has not answered for yet (rule 2: one
//     starting generation at a time) runs fewer than half as many generations as the winner
//     would with this one, the generation holds for it, up to spreadWait after it first held
//     (held is when; zero: it has not). On a loaded machine the first account to answer took
//     the whole burst's start before the others' first answers came, milliseconds later: 17 of
//     30, where each had 10 to take.
//
// Accounts on their last call are used concurrently only when nothing else is left.
func (r *router) pick(now time.Time, want *account, tried []*account, held time.Time) (a *account, hold bool, cerr *schemas.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best, busy *choice
	var first *account // the cooling account usable first
	full := false      // an account is usable but cannot take more now
	unheard := -1      // the fewest generations running on an account not answered for yet, that cannot take more now
	for _, a := range r.accounts {
		if slices.Contains(tried, a) {
			continue
		}
		av := a.lim.available(now)
		if av.cooling {
			if first == nil || av.until.Before(first.lim.coolUntil) {
				first = a
			}
			continue
		}
		c := choice{a: a, headroom: av.headroom, share: av.headroom / float64(a.lim.inflight+1), probe: av.lastCall}
		if av.lastCall && a.lim.inflight > 0 {
			if busy == nil || c.better(*busy) {
				busy = &c
			}
			continue
		}
		var take bool
		if c.delay, take = r.readiness(a, now); !take {
			full = true
			if a.lim.unknown() && !a.capped(now) && (unheard < 0 || a.lim.inflight < unheard) {
				unheard = a.lim.inflight
			}
			continue
		}
		if best == nil || c.better(*best) {
			best = &c
		}
	}
	if want == nil && best != nil && unheard >= 0 && 2*unheard < best.a.lim.inflight+1 && (held.IsZero() || now.Sub(held) < spreadWait) {
		return nil, true, nil // rule 5
	}
	if want != nil && !slices.Contains(tried, want) && !want.lim.available(now).cooling {
		if _, take := r.readiness(want, now); !take || !r.usable(want, now) {
			return nil, true, nil // wait for it
		}
		best = &choice{a: want}
	}
	if best == nil && full {
		return nil, true, nil
	}
	if best == nil {
		best = busy
	}
	if best != nil {
		best.a.lim.started()
		best.a.starting++
		best.a.requests.Add(1)
		return best.a, false, nil
	}
	if first == nil {
		return nil, false, nil
	}
	first.fasts.Add(1)
	return nil, false, r.coolingError(first, now)
}

// hold waits until a held generation should pick again: something freed up, holdCheck passed,
// or ctx is done (its error is returned).
func (r *router) hold(ctx context.Context) error {
	r.mu.Lock()
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	wake := r.wake
	r.holders++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.holders--
		r.mu.Unlock()
	}()
	t := time.NewTimer(holdCheck)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// wakeLocked tells the held generations to look again. r.mu is held.
func (r *router) wakeLocked() {
	if r.holders > 0 && r.wake != nil {
		close(r.wake)
		r.wake = make(chan struct{})
	}
}

// started records that a generation committed to a has its first event (or ended without one):
// it is no longer starting. answered: that event was not an error (see limitState.heard).
func (r *router) started(a *account, answered bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.starting--
	if answered {
		a.lim.answered()
	}
	r.wakeLocked()
}

// usable reports whether a takes a generation at now: not cooling down, and not on its last
// call with one already running.
func (r *router) usable(a *account, now time.Time) bool {
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
	if upstream == codeUnauthorized || upstream == codeProxy {
		upstream = ""
	}
	return &schemas.Error{Status: status, Code: code, RetryAfter: wait, UpstreamCode: upstream, Account: a.name,
		Message: fmt.Sprintf("worker: %s; the first, %q, is usable again in %s (%s)", what, a.name, wait.Round(time.Second), a.lim.coolWhy)}
}

// codeUnauthorized marks a cooldown set by a 401 (the origin's own code is rarely given).
const codeUnauthorized = "unauthorized"

// codeProxy marks a cooldown set by a failure of the account's proxy; reasonProxy is that
// refusal's reason (beside "limits" and "credentials").
const codeProxy, reasonProxy = "proxy", "proxy"

// finish releases a generation pick started on a: completed counts it towards the account's
// projected usage.
func (r *router) finish(a *account, completed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.lim.finished(completed)
	r.wakeLocked()
}

// unpick undoes pick for a generation that could not lease a slot of a.
func (r *router) unpick(a *account) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.lim.finished(false)
	a.starting--
	a.requests.Add(-1)
	r.wakeLocked()
}

// slotsFull records that every slot of a was held at now.
func (r *router) slotsFull(a *account, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.slotsFullAt = now
}

// leased counts slots of a this worker takes (n = 1) or gives back (n = -1).
func (r *router) leased(a *account, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.leases += n
	if n < 0 {
		r.wakeLocked()
	}
}

// named returns the account called name; nil when the worker has none of that name.
func (r *router) named(name string) *account {
	for _, a := range r.accounts {
		if a.name == name {
			return a
		}
	}
	return nil
}

// cooling reports whether a is cooling down at now.
func (r *router) cooling(a *account, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return a.lim.available(now).cooling
}

// refuse records that the origin refused a: it cools down (unless its limits are record-only)
// until the refusal's retry time or for the fallback cooldown. It reports whether a cooldown began or grew,
// and until when.
func (r *router) refuse(a *account, code, why string, retryAfter time.Duration, now time.Time) (bool, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
		if !now.Before(a.lim.coolUntil) {
			return time.Time{}, false
		}
		if t.IsZero() || a.lim.coolUntil.Before(t) {
			t = a.lim.coolUntil
		}
	}
	return t, !t.IsZero()
}
